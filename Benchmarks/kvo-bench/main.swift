import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    USAGE: kvo-bench [--quick] [--filter SUBSTRING]... [--markdown] [--json FILE] [--svg FILE] [--callgrind]
           kvo-bench run SCENARIO [--iterations N]
           kvo-bench compare OLD.json NEW.json [--threshold PERCENT]
           kvo-bench gate [--thresholds FILE] [--filter SUBSTRING]... [--json FILE] [--update]
           kvo-bench --list | --help

    Measures the set path and registration of KeyValueObserving against baselines run in the
    same process, and prints ns/op (p50, p90, p99 over repeated samples) with the ratio of each
    scenario's p50 to its baseline's p50, and a memory table (bytes per object, observer and
    observed key, from the allocator's statistics). Samples are taken in rounds (one batch of
    every scenario per round) so machine noise hits a scenario and its baseline alike. Missed
    targets are reported, never fatal. The defaults store's cross-process notification latency
    (defaults-cross-process-latency) follows the tables, in its own section, when kvo-defaults
    is built next to kvo-bench.

    OPTIONS:
      --quick               CI smoke mode: few, short samples (the whole run takes a few seconds)
      --filter SUBSTRING    only scenarios whose name contains SUBSTRING (repeatable); the
                            baselines they are compared with run too
      --markdown            print the tables as Markdown
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

    EXIT STATUS: 0 on success; 1 if a result check fails, a file cannot be read or written, or
    valgrind is missing or fails; 2 on bad arguments. compare and gate: 2 on a regression, 1 on
    bad arguments or any other error.
    """

func printError(_ message: String) {
    var line = "kvo-bench: \(message)\n"
    line.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

func fail(_ message: String, status: Int32) -> Never {
    printError(message)
    exit(status)
}

func badArgument(_ message: String) -> Never {
    fail("\(message)\nRun 'kvo-bench --help' for usage.", status: 2)
}

// MARK: Arguments

enum Command {
    case benchmark(BenchmarkOptions)
    case run(scenario: String, iterations: Int)
    case compare(old: String, new: String, thresholdPercent: Double)
    case gate(thresholdsPath: String, filters: [String], jsonPath: String?, update: Bool)
    case list
    case help
}

struct BenchmarkOptions {
    var quick = false
    var filters: [String] = []
    var markdown = false
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
        bad(argument.hasPrefix("-")
            ? "unknown option '\(argument)'\(command.isEmpty ? "" : " for '\(command)'")"
            : "unexpected argument '\(argument)'")
    }
}

func parseArguments(_ arguments: [String]) -> Command {
    if arguments.contains(where: { ["-h", "--help", "help"].contains($0) }) { return .help }
    switch arguments.first {
    case "run": return parseRun(arguments.dropFirst())
    case "compare": return parseCompare(arguments.dropFirst())
    case "gate": return parseGate(arguments.dropFirst())
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
        case "--markdown": reader.flag("--markdown", inline: inline); options.markdown = true
        case "--callgrind": reader.flag("--callgrind", inline: inline); options.callgrind = true
        case "--list": reader.flag("--list", inline: inline); list = true
        case "--filter": options.filters.append(reader.value(of: "--filter", inline: inline))
        case "--json": options.jsonPath = reader.value(of: "--json", inline: inline)
        case "--svg": options.svgPath = reader.value(of: "--svg", inline: inline)
        case "--iterations": reader.bad("option '--iterations' is only valid after 'run SCENARIO'")
        default: reader.unexpected(argument)
        }
    }
    if list {
        if options.quick || options.markdown || options.callgrind || options.jsonPath != nil
            || options.svgPath != nil || !options.filters.isEmpty {
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
        case "--iterations":
            let text = reader.value(of: "--iterations", inline: inline)
            guard let count = Int(text), count > 0 else {
                reader.bad("'--iterations' must be a positive integer, not '\(text)'")
            }
            iterations = count
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
    var thresholdsPath = "Benchmarks/thresholds.json"
    var filters: [String] = []
    var jsonPath: String?
    var update = false
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--thresholds": thresholdsPath = reader.value(of: "--thresholds", inline: inline)
        case "--filter": filters.append(reader.value(of: "--filter", inline: inline))
        case "--json": jsonPath = reader.value(of: "--json", inline: inline)
        case "--update": reader.flag("--update", inline: inline); update = true
        default: reader.unexpected(argument)
        }
    }
    if update && !filters.isEmpty { reader.bad("'gate --update' measures every gated scenario: drop '--filter'") }
    return .gate(thresholdsPath: thresholdsPath, filters: filters, jsonPath: jsonPath, update: update)
}

// MARK: Commands

func listScenarios() {
    let all = Scenarios.list
    let memory = Scenarios.memoryScenarios(quick: false)
    let width = (all.map(\.name.count) + memory.map(\.name.count)).max()!
    for group in Scenario.Group.allCases {
        print(group.rawValue)
        for scenario in all where scenario.group == group {
            let padding = String(repeating: " ", count: width - scenario.name.count)
            var line = "  \(scenario.name)\(padding)  \(scenario.summary)"
            if let baseline = scenario.baseline { line += " [vs \(baseline)]" }
            switch scenario.target {
            case .ratioAtMost(let limit)?: line += " (target ≤ \(formatNumber(limit))×)"
            case .nanosecondsAtMost(let limit)?: line += " (target ≤ \(formatNumber(limit)) ns)"
            case nil: break
            }
            print(line)
        }
    }
    print("Memory")
    for scenario in memory {
        let padding = String(repeating: " ", count: width - scenario.name.count)
        print("  \(scenario.name)\(padding)  bytes per \(scenario.unit): \(scenario.summary)"
            + (scenario.baseline.map { " [vs \($0)]" } ?? ""))
    }
}

func runOnce(_ name: String, iterations: Int) -> Never {
    let scenario = Scenarios.named(name)!
    let workload = scenario.makeWorkload()
    do throws(CheckFailure) {
        try runChecked(scenario, workload, iterations: iterations)
    } catch {
        fail(error.description, status: 1)
    }
    withExtendedLifetime(workload) {}
    print("\(name): \(iterations) iterations, result check passed")
    exit(0)
}

func benchmark(_ options: BenchmarkOptions) -> Never {
    let all = Scenarios.list
    var selected = all
    var memoryScenarios = Scenarios.memoryScenarios(quick: options.quick)
    let filters = options.filters
    if !filters.isEmpty {
        let matching = Set(all.filter { scenario in filters.contains { scenario.name.contains($0) } }.map(\.name))
        let matchingMemory = Set(memoryScenarios.filter { scenario in filters.contains { scenario.name.contains($0) } }.map(\.name))
        if matching.isEmpty && matchingMemory.isEmpty, !filters.contains(where: { DefaultsLatency.name.contains($0) }) {
            badArgument("no scenario name contains \(filters.map { "'\($0)'" }.joined(separator: " or ")) (see 'kvo-bench --list')")
        }
        let needed = matching.union(all.filter { matching.contains($0.name) }.flatMap(\.dependencies))
        selected = all.filter { needed.contains($0.name) }
        let neededMemory = matchingMemory.union(memoryScenarios.filter { matchingMemory.contains($0.name) }.compactMap(\.baseline))
        memoryScenarios = memoryScenarios.filter { neededMemory.contains($0.name) }
    }
    var counter: InstructionCounter?
    if options.callgrind {
        guard let valgrind = InstructionCounter.findValgrind() else {
            fail("--callgrind needs valgrind, which is not on the PATH (Debian/Ubuntu: apt-get install -y valgrind; or set VALGRIND)", status: 1)
        }
        counter = InstructionCounter(valgrind: valgrind)
    }

    let plan: SamplingPlan = options.quick ? .quick : .full
    let showProgress = isatty(2) != 0
    // Memory first, on the main thread, before any scenario starts a thread or a task.
    let memory = memoryScenarios.isEmpty ? nil : measureMemory(memoryScenarios)
    let measurements: [String: Measurement]
    do throws(CheckFailure) {
        measurements = try measure(selected, plan: plan) { if showProgress { printError($0) } }
    } catch {
        fail(error.description, status: 1)
    }

    var rows = makeRows(selected, measurements)
    if var counter {
        for index in rows.indices where rows[index].scenario.countsInstructions {
            // As many iterations as take ~0.2 s natively (at most 60,000): heavy scenarios would
            // otherwise take minutes under valgrind.
            let long = min(60_000, max(60, Int(200_000_000 / max(rows[index].measurement.p50, 1))))
            counter.longIterations = long
            counter.shortIterations = long / 6
            printError("counting instructions of \(rows[index].scenario.name) (\(counter.shortIterations) and \(long) iterations)")
            do throws(InstructionCounter.Failure) {
                rows[index].instructionsPerOp = try counter.instructionsPerOp(rows[index].scenario.name)
            } catch {
                printError("warning: no instruction count for \(rows[index].scenario.name): \(error)")
            }
        }
    }

    let machine = Machine.current()
    let method = "ns/op: p50 / p90 / p99 of \(plan.samples) interleaved samples of ~\(plan.sampleNanoseconds / 1_000_000) ms "
        + "after \(plan.warmUpNanoseconds / 1_000_000) ms of warm-up\(options.quick ? " (--quick)" : "")"
        + "\(plan.samples < 100 ? " (p99 = slowest sample)" : ""); "
        + "ratio = p50 / baseline p50, same run"
        + (options.callgrind ? "; Ir/op: callgrind, (Ir(long) − Ir(short)) / (long − short) iterations" : "")
    if options.markdown {
        print(markdownReport(rows), terminator: "")
        if let memory { print(memoryMarkdownReport(memory), terminator: "") }
        print("_\(method). \(compiledWith), release build; \(machine.description)._")
    } else {
        print("kvo-bench — \(method)")
        print("\(compiledWith), release build; \(machine.description)\n")
        print(textReport(rows), terminator: "")
        if let memory { print(memoryTextReport(memory), terminator: "") }
    }
    if memory == nil && !memoryScenarios.isEmpty {
        printError("memory: not measured (no allocator statistics on this platform)")
    }
    if filters.isEmpty || filters.contains(where: { DefaultsLatency.name.contains($0) }) {
        print(DefaultsLatency.report(quick: options.quick, markdown: options.markdown), terminator: "")
    }

    if let jsonPath = options.jsonPath {
        do {
            let data = try jsonReport(rows, memory: memory, plan: plan, mode: options.quick ? "quick" : "full")
            try (data + Data("\n".utf8)).write(to: URL(fileURLWithPath: jsonPath))
        } catch {
            fail("cannot write JSON to '\(jsonPath)': \(error)", status: 1)
        }
        if !options.markdown { print("results written to \(jsonPath)") }
    }
    if let svgPath = options.svgPath {
        let date = ISO8601DateFormatter().string(from: Date()).prefix(10)
        let subtitle = "\(date), \(toolchainVersion() ?? compiledWith), release build; \(machine.description)"
            + (options.quick ? "; --quick" : "")
        guard let svg = scalingChartSVG(rows, subtitle: subtitle) else {
            fail("--svg: the selected scenarios draw no curve (no family with two parameter values); "
                + "drop --filter or select a family, e.g. --filter observers-", status: 1)
        }
        do {
            try Data(svg.utf8).write(to: URL(fileURLWithPath: svgPath))
        } catch {
            fail("cannot write SVG to '\(svgPath)': \(error)", status: 1)
        }
        if !options.markdown { print("chart written to \(svgPath)") }
    }
    exit(0)
}

func compare(old: String, new: String, thresholdPercent: Double) -> Never {
    let results: (ResultsFile, ResultsFile)
    do throws(ResultsFileError) {
        results = (try readResultsFile(old), try readResultsFile(new))
    } catch {
        fail(error.description, status: 1)
    }
    let comparison = compareResults(old: results.0, new: results.1)
    print(comparisonReport(comparison, oldPath: old, newPath: new, thresholdPercent: thresholdPercent), terminator: "")
    exit(comparison.regressions(thresholdPercent: thresholdPercent).isEmpty ? 0 : 2)
}

/// What `gate --json` writes: readable by `compare`.
private struct GateJSON: Encodable {
    struct Figure: Encodable {
        let name: String
        let instructionsPerOp: Double
    }

    let date: String
    let toolchain: String
    let machine: Machine
    let mode = "callgrind"
    let unit = "instructions per op"
    let scenarios: [Figure]
}

func gate(thresholdsPath: String, filters: [String], jsonPath: String?, update: Bool) -> Never {
    let thresholds: Thresholds
    do throws(ResultsFileError) {
        thresholds = try readThresholds(thresholdsPath)
    } catch {
        fail("\(error) (run from the package root, or pass --thresholds FILE)", status: 1)
    }
    guard let valgrind = InstructionCounter.findValgrind() else {
        fail("gate: valgrind is not installed (Debian/Ubuntu: apt-get install -y valgrind; or set VALGRIND=/path/to/valgrind)", status: 1)
    }
    let counter = InstructionCounter(valgrind: valgrind)
    let verdict: GateVerdict
    let measured: [(name: String, instructionsPerOp: Double)]
    do throws(InstructionCounter.Failure) {
        (verdict, measured) = try runGate(thresholds: thresholds, thresholdsPath: thresholdsPath, counter: counter, only: filters)
    } catch {
        fail("gate: \(error)", status: 1)
    }
    if let jsonPath {
        let report = GateJSON(
            date: ISO8601DateFormatter().string(from: Date()), toolchain: toolchainVersion() ?? compiledWith,
            machine: .current(), scenarios: measured.map { .init(name: $0.name, instructionsPerOp: ($0.instructionsPerOp * 10).rounded() / 10) }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            try (encoder.encode(report) + Data("\n".utf8)).write(to: URL(fileURLWithPath: jsonPath))
        } catch {
            fail("cannot write JSON to '\(jsonPath)': \(error)", status: 1)
        }
    }
    if update {
        guard verdict != .skipped else { fail("gate --update: nothing measured on this architecture", status: 1) }
        let text = thresholdsFile(measured, tolerancePercent: thresholds.tolerancePercent, valgrindVersion: counter.version())
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: thresholdsPath))
        } catch {
            fail("cannot write '\(thresholdsPath)': \(error)", status: 1)
        }
        print("thresholds rewritten: \(thresholdsPath)")
        exit(0)
    }
    exit(verdict == .regressed ? 2 : 0)
}

switch parseArguments(Array(CommandLine.arguments.dropFirst())) {
case .help:
    print(usage)
case .list:
    listScenarios()
case .run(let scenario, let iterations):
    runOnce(scenario, iterations: iterations)
case .benchmark(let options):
    benchmark(options)
case .compare(let old, let new, let thresholdPercent):
    compare(old: old, new: new, thresholdPercent: thresholdPercent)
case .gate(let thresholdsPath, let filters, let jsonPath, let update):
    gate(thresholdsPath: thresholdsPath, filters: filters, jsonPath: jsonPath, update: update)
}
