// The command line: usage, the commands, and parsing.

let usage = """
    USAGE: kvo-bench [--quick] [--filter SUBSTRING]... [--markdown FILE] [--json FILE] [--svg FILE] [--callgrind]
           kvo-bench run SCENARIO [--iterations N]
           kvo-bench compare OLD.json NEW.json [--threshold PERCENT]
           kvo-bench gate [--thresholds FILE] [--filter SUBSTRING]... [--json FILE] [--update] [--targets]
           kvo-bench contention [--quick] [--threads N] [--updates N] [--rounds N]
           kvo-bench stress [--quick] [--seconds N]
           kvo-bench --list | --help

    Measures KeyValueObserving, ObservableProgress and ObservableDefaults against the alternatives
    (NotificationCenter, Observation, AsyncStream, Foundation Progress, UserDefaults) and plain
    Swift, all in this one run, and prints a summary (one line per alternative: how many times
    faster or slower), then the tables: ns/op (p50, p90, p99 over repeated samples) with the ratio of
    each scenario's p50 to its baseline's p50, every row naming its implementation; a memory table
    (bytes per object, observer and observed key, from the allocator's statistics); and the defaults
    store's cross-process notification latency (this executable starts itself as the other process).
    Samples are taken in rounds (one batch of every scenario per round) so machine noise hits a
    scenario and its baseline alike.

    OPTIONS:
      --quick               smoke mode: few, short samples (the whole run takes under a minute)
      --filter SUBSTRING    only scenarios whose name contains SUBSTRING (repeatable); the
                            baselines they are compared with run too
      --markdown FILE       also write the summary and the full tables as Markdown to FILE, with
                            the date, toolchain and machine (Benchmarks/README.md is written so)
      --json FILE           also write the results as JSON to FILE (toolchain, machine, date,
                            ns/op, ratios, bytes, and Ir/op with --callgrind)
      --svg FILE            also draw the scaling curves (one set vs observers, observed keys,
                            objects; any scenario family with a numeric parameter) of this package
                            and the alternatives to FILE: log-scale axes, one line per implementation
      --callgrind           also count instructions per operation of every selected scenario with
                            valgrind (an Ir/op column; slow: two valgrind runs per scenario, so
                            combine it with --filter)
      --list                list the scenarios and exit
      -h, --help            show this help

    run SCENARIO:
      Runs exactly that scenario's loop N times (default 1000000) after its setup, with no
      warm-up or sampling, then checks the result. For instruction counts:
        valgrind --tool=callgrind kvo-bench run SCENARIO --iterations 10000
        valgrind --tool=callgrind kvo-bench run SCENARIO --iterations 60000
      Ir/op = (Ir(60000) - Ir(10000)) / 50000.

    compare OLD.json NEW.json:
      Compares two '--json' (or 'gate --json') files scenario by scenario: p50 old → new, the
      change in percent, ratio changes, Ir/op and bytes where present. A scenario regresses when
      its Ir/op (where both files have it, since it does not drift with machine load), else its
      p50, grew by more than PERCENT (default 10); a memory figure when its bytes did.

    gate:
      The CI regression gate: counts Ir/op of the scenarios listed in the thresholds file
      (default Benchmarks/thresholds.json, one scenario per line) with valgrind, 10000 and 60000
      iterations, and fails when one exceeds its threshold by more than the file's tolerance.
      Skipped (exit 0, loudly) on another CPU architecture than the thresholds'; compared with a
      loud warning under another toolchain. valgrind comes from $VALGRIND or the PATH.
        --update            measure and rewrite the thresholds file (toolchain, machine, date)
        --json FILE         also write the measured Ir/op as JSON (readable by 'compare')
        --targets           also time the scenarios that carry one of this package's own targets
                            (e.g. an observed set ≤ 4× a didSet closure) and report met or missed;
                            informative, never fatal (timings drift with load)

    contention:
      Times N threads (default 8) at once, each making --updates updates (default 100000), in
      --rounds rounds (default 15): one progress node updated by every thread (unobserved and
      observed), the leaves of one tree (one per thread, the root observed, so every update takes
      the root's lock too), and a counter behind each lock alone (the package's lock, PlatformLock,
      which progress nodes use; the spinning lock they used before, kept here as a comparison).
      Every row runs on every CPU the process may use, then (Linux only) with all its threads
      pinned to one CPU (sched_setaffinity). Prints the wall and CPU ns per update (CPU: all
      threads, so a waiter that spins counts and one that sleeps does not), median [min–max] over
      the rounds, and fails if an update was lost. Timings drift with load; --quick: 3 rounds of
      20000 updates.

    stress:
      A soak: for --seconds N (default 4; --quick: 1), threads register and remove observers
      while others set observed keys, run batches, set through key-path chains, change the inputs
      of a dependent key, a chain and a tracked observation (observeTracking), update progress
      trees and write a defaults store on a temporary file that two writer processes (this
      executable again) write too. The registry's lock-free read path and its reclamation under
      load, for valgrind's memcheck and the thread sanitizer:
        valgrind --tool=memcheck --leak-check=full kvo-bench stress --quick
      and memory over time (CI runs 'stress --seconds 20'; run 1200 for a 20-minute soak):
      prints malloc's bytes in use about 40 times a run (every N/40 s, 0.25 s to 10 s apart).
      Exits 1, naming what failed, if a check fails: an observer that missed a change or did not
      end on the final value, a progress tree that did not finish, a writer that failed, a store
      that did not converge to the writers' last values and sum of their updates; or, in a run
      of 10 s or more, if the least-squares slope of bytes in use over the second half of the run
      is above the larger of 1 KiB/s and 512 KiB over the half's seconds (51.2 KiB/s for 20 s,
      1 KiB/s from 1024 s): a short run's samples swing and still warm up by less than that; a
      leak per observer, set or defaults write is far above, a rarer one needs a long run.

    EXIT STATUS: 0 on success; 1 if a result check fails, a file cannot be read or written, or
    valgrind is missing or fails; 2 on bad arguments. compare and gate: 2 on a regression, 1 on
    bad arguments or any other error.
    """

enum Command {
    case benchmark(BenchmarkOptions)
    case run(scenario: String, iterations: Int)
    case compare(old: String, new: String, thresholdPercent: Double)
    case gate(GateOptions)
    case contention(ContentionOptions)
    case stress(StressOptions)
    /// A hidden contending process of the etcd section's update throughput.
    case updateDefaults(location: String, key: String, count: Int)
    case massRegistration(implementation: String, objects: Int, observers: Int)
    /// The hidden other process of the cross-process latency section.
    case watchDefaults(file: String, key: String, directory: String?)
    /// A hidden writer process of the stress.
    case soakWriter(file: String, index: Int)
    case list
    case help
}

struct BenchmarkOptions {
    var quick = false
    var filters: [String] = []
    var markdownPath: String?
    var jsonPath: String?
    var svgPath: String?
    var callgrind = false
}

/// Splits arguments into options (with their values, after "=" or as the next argument) and
/// positional arguments, knowing which options take a value.
struct ArgumentReader {
    private var remaining: ArraySlice<String>
    let command: String
    /// How a misuse ends: the benchmark's bad arguments exit 2; compare's and gate's exit 1, since
    /// 2 means a regression there.
    let badArgumentStatus: Int32

    init(_ arguments: ArraySlice<String>, command: String, badArgumentStatus: Int32) {
        self.remaining = arguments
        self.command = command
        self.badArgumentStatus = badArgumentStatus
    }

    func bad(_ message: String) -> Never {
        fail("\(message)\nRun 'kvo-bench --help' for usage.", status: badArgumentStatus)
    }

    /// The next argument as (option, inline value) or (positional, nil), or `nil` at the end.
    mutating func next() -> (argument: String, option: String?, inline: String?)? {
        guard let argument = remaining.popFirst() else { return nil }
        guard argument.hasPrefix("-"), argument != "-" else { return (argument, nil, nil) }
        let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
        return (argument, parts[0], parts.count == 2 ? parts[1] : nil)
    }

    mutating func value(of option: String, inline: String?) -> String {
        if let inline {
            if inline.isEmpty { bad("option '\(option)' needs a value") }
            return inline
        }
        guard let next = remaining.popFirst(), !next.hasPrefix("--"), !next.isEmpty else {
            bad("option '\(option)' needs a value")
        }
        return next
    }

    func flag(_ option: String, inline: String?) {
        if inline != nil { bad("option '\(option)' takes no value") }
    }

    func unexpected(_ argument: String) -> Never {
        bad(
            argument.hasPrefix("-")
                ? "unknown option '\(argument)'\(command.isEmpty ? "" : " for '\(command)'")"
                : "unexpected argument '\(argument)'")
    }
}

func parseArguments(_ arguments: [String]) -> Command {
    if arguments.first == EtcdBench.updateCommand {
        guard arguments.count == 4, let count = Int(arguments[3]), count >= 0 else {
            badArgument("usage: kvo-bench \(EtcdBench.updateCommand) LOCATION KEY N")
        }
        return .updateDefaults(location: arguments[1], key: arguments[2], count: count)
    }
    if arguments.first == MassRegistration.command {
        guard arguments.count == 4, let objects = Int(arguments[2]), objects > 0, let observers = Int(arguments[3]), observers > 0 else {
            badArgument("usage: kvo-bench \(MassRegistration.command) IMPLEMENTATION OBJECTS OBSERVERS")
        }
        return .massRegistration(implementation: arguments[1], objects: objects, observers: observers)
    }
    if arguments.first == DefaultsLatency.watchCommand {
        guard arguments.count == 3 || arguments.count == 4 else {
            badArgument("usage: kvo-bench \(DefaultsLatency.watchCommand) FILE KEY [DIRECTORY]")
        }
        return .watchDefaults(file: arguments[1], key: arguments[2], directory: arguments.count == 4 ? arguments[3] : nil)
    }
    if arguments.first == SoakWriters.command {
        guard arguments.count == 3, let index = Int(arguments[2]), (0..<SoakWriters.count).contains(index) else {
            badArgument("usage: kvo-bench \(SoakWriters.command) FILE INDEX")
        }
        return .soakWriter(file: arguments[1], index: index)
    }
    if arguments.contains(where: { ["-h", "--help", "help"].contains($0) }) { return .help }
    switch arguments.first {
    case "run": return parseRun(arguments.dropFirst())
    case "compare": return parseCompare(arguments.dropFirst())
    case "gate": return parseGate(arguments.dropFirst())
    case "contention": return parseContention(arguments.dropFirst())
    case "stress": return parseStress(arguments.dropFirst())
    default: return parseBenchmark(arguments[...])
    }
}

private func parseBenchmark(_ arguments: ArraySlice<String>) -> Command {
    var reader = ArgumentReader(arguments, command: "", badArgumentStatus: 2)
    var options = BenchmarkOptions()
    var list = false
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--quick": reader.flag("--quick", inline: inline); options.quick = true
        case "--callgrind": reader.flag("--callgrind", inline: inline); options.callgrind = true
        case "--list": reader.flag("--list", inline: inline); list = true
        case "--filter": options.filters.append(reader.value(of: "--filter", inline: inline))
        case "--markdown": options.markdownPath = reader.value(of: "--markdown", inline: inline)
        case "--json": options.jsonPath = reader.value(of: "--json", inline: inline)
        case "--svg": options.svgPath = reader.value(of: "--svg", inline: inline)
        case "--iterations": reader.bad("option '--iterations' is only valid after 'run SCENARIO'")
        default: reader.unexpected(argument)
        }
    }
    if list {
        if options.quick || options.markdownPath != nil || options.callgrind || options.jsonPath != nil
            || options.svgPath != nil || !options.filters.isEmpty
        {
            reader.bad("'--list' cannot be combined with other options")
        }
        return .list
    }
    return .benchmark(options)
}

private func parseRun(_ arguments: ArraySlice<String>) -> Command {
    var reader = ArgumentReader(arguments, command: "run", badArgumentStatus: 2)
    var scenario: String?
    var iterations = 1_000_000
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case nil where scenario == nil: scenario = argument
        case "--iterations": iterations = positive("--iterations", &reader, inline: inline)
        case "--quick", "--markdown", "--list", "--filter", "--json", "--svg", "--callgrind":
            reader.bad("option '\(option!)' cannot be combined with 'run'")
        default: reader.unexpected(argument)
        }
    }
    guard let scenario else { reader.bad("'run' needs a scenario name (see 'kvo-bench --list')") }
    guard Scenarios.named(scenario) != nil else {
        reader.bad("unknown scenario '\(scenario)' (see 'kvo-bench --list')")
    }
    return .run(scenario: scenario, iterations: iterations)
}

private func parseCompare(_ arguments: ArraySlice<String>) -> Command {
    var reader = ArgumentReader(arguments, command: "compare", badArgumentStatus: 1)
    var files: [String] = []
    var threshold = 10.0
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case nil: files.append(argument)
        case "--threshold":
            let text = reader.value(of: "--threshold", inline: inline)
            guard let value = Double(text.hasSuffix("%") ? String(text.dropLast()) : text), value >= 0, value.isFinite else {
                reader.bad("'--threshold' must be a percentage (a non-negative number), not '\(text)'")
            }
            threshold = value
        default: reader.unexpected(argument)
        }
    }
    guard files.count == 2 else {
        reader.bad("'compare' needs two results files, OLD.json and NEW.json (got \(files.count))")
    }
    return .compare(old: files[0], new: files[1], thresholdPercent: threshold)
}

private func parseGate(_ arguments: ArraySlice<String>) -> Command {
    var reader = ArgumentReader(arguments, command: "gate", badArgumentStatus: 1)
    var options = GateOptions()
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--thresholds": options.thresholdsPath = reader.value(of: "--thresholds", inline: inline)
        case "--filter": options.filters.append(reader.value(of: "--filter", inline: inline))
        case "--json": options.jsonPath = reader.value(of: "--json", inline: inline)
        case "--update": reader.flag("--update", inline: inline); options.update = true
        case "--targets": reader.flag("--targets", inline: inline); options.targets = true
        default: reader.unexpected(argument)
        }
    }
    if options.update && !options.filters.isEmpty { reader.bad("'gate --update' measures every gated scenario: drop '--filter'") }
    return .gate(options)
}

/// A positive integer option's value.
private func positive(_ option: String, _ reader: inout ArgumentReader, inline: String?) -> Int {
    let text = reader.value(of: option, inline: inline)
    guard let count = Int(text), count > 0 else { reader.bad("'\(option)' must be a positive integer, not '\(text)'") }
    return count
}

private func parseContention(_ arguments: ArraySlice<String>) -> Command {
    var reader = ArgumentReader(arguments, command: "contention", badArgumentStatus: 2)
    var options = ContentionOptions()
    var quick = false
    var updates: Int?
    var rounds: Int?
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--quick": reader.flag("--quick", inline: inline); quick = true
        case "--threads": options.threads = positive("--threads", &reader, inline: inline)
        case "--updates": updates = positive("--updates", &reader, inline: inline)
        case "--rounds": rounds = positive("--rounds", &reader, inline: inline)
        default: reader.unexpected(argument)
        }
    }
    options.updates = updates ?? (quick ? 20_000 : options.updates)
    options.rounds = rounds ?? (quick ? 3 : options.rounds)
    return .contention(options)
}

private func parseStress(_ arguments: ArraySlice<String>) -> Command {
    var reader = ArgumentReader(arguments, command: "stress", badArgumentStatus: 2)
    var options = StressOptions()
    var seconds: Int?
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--quick": reader.flag("--quick", inline: inline); options.seconds = 1
        case "--seconds": seconds = positive("--seconds", &reader, inline: inline)
        default: reader.unexpected(argument)
        }
    }
    if let seconds { options.seconds = seconds }
    return .stress(options)
}
