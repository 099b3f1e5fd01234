import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
    USAGE: kvo-bench [--quick] [--filter SUBSTRING]... [--markdown] [--json FILE]
           kvo-bench run SCENARIO [--iterations N]
           kvo-bench --list | --help

    Measures the set path and registration of KeyValueObserving against baselines run in the
    same process, and prints ns/op (p50, p90, p99 over repeated samples) with the ratio of each
    scenario's p50 to its baseline's p50. Samples are taken in rounds (one batch of every
    scenario per round) so machine noise hits a scenario and its baseline alike. Missed targets
    are reported, never fatal. The defaults store's cross-process notification latency
    (defaults-cross-process-latency) follows the tables, in its own section, when kvo-defaults
    is built next to kvo-bench.

    OPTIONS:
      --quick               CI smoke mode: few, short samples (the whole run takes about a second)
      --filter SUBSTRING    only scenarios whose name contains SUBSTRING (repeatable); the
                            baselines they are compared with run too
      --markdown            print the tables as Markdown
      --json FILE           also write the results as JSON to FILE
      --list                list the scenarios and exit
      -h, --help            show this help

    run SCENARIO:
      Runs exactly that scenario's loop N times (default 1000000) after its setup, with no
      warm-up or sampling, then checks the result. For instruction counts:
        valgrind --tool=callgrind kvo-bench run SCENARIO --iterations 10000
        valgrind --tool=callgrind kvo-bench run SCENARIO --iterations 60000
      Ir/op = (Ir(60000) - Ir(10000)) / 50000.

    EXIT STATUS: 0 on success, 1 if a result check fails or the JSON cannot be written, 2 on bad
    arguments.
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
    case benchmark(quick: Bool, filters: [String], markdown: Bool, jsonPath: String?)
    case run(scenario: String, iterations: Int)
    case list
    case help
}

func parseArguments(_ arguments: [String]) -> Command {
    var remaining = arguments[...]
    var quick = false
    var markdown = false
    var filters: [String] = []
    var jsonPath: String?
    var iterations: Int?
    var runScenario: String?
    var list = false

    /// The value of `option`: after "=" in the same argument, or the next argument.
    func value(of option: String, inline: String?) -> String {
        if let inline { return inline }
        guard let next = remaining.popFirst(), !next.hasPrefix("--") || next == "--" else {
            badArgument("option '\(option)' needs a value")
        }
        return next
    }

    if remaining.first == "run" {
        remaining.removeFirst()
        guard let name = remaining.popFirst(), !name.hasPrefix("-") else {
            badArgument("'run' needs a scenario name (see 'kvo-bench --list')")
        }
        runScenario = name
    }
    while let argument = remaining.popFirst() {
        let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
        let option = argument.hasPrefix("--") ? parts[0] : argument
        let inline = argument.hasPrefix("--") && parts.count == 2 ? parts[1] : nil
        switch option {
        case "-h", "--help", "help":
            return .help
        case "--quick" where inline == nil && runScenario == nil:
            quick = true
        case "--markdown" where inline == nil && runScenario == nil:
            markdown = true
        case "--list" where inline == nil && runScenario == nil:
            list = true
        case "--filter" where runScenario == nil:
            let filter = value(of: option, inline: inline)
            if filter.isEmpty { badArgument("'--filter' needs a non-empty substring") }
            filters.append(filter)
        case "--json" where runScenario == nil:
            let path = value(of: option, inline: inline)
            if path.isEmpty { badArgument("'--json' needs a file path") }
            jsonPath = path
        case "--iterations" where runScenario != nil:
            let text = value(of: option, inline: inline)
            guard let count = Int(text), count > 0 else {
                badArgument("'--iterations' must be a positive integer, not '\(text)'")
            }
            iterations = count
        case "--quick", "--markdown", "--list", "--filter", "--json", "--iterations":
            if inline != nil, ["--quick", "--markdown", "--list"].contains(option) {
                badArgument("option '\(option)' takes no value (got '\(argument)')")
            }
            badArgument(runScenario == nil
                ? "option '\(option)' is only valid after 'run SCENARIO'"
                : "option '\(option)' cannot be combined with 'run'")
        default:
            badArgument(argument.hasPrefix("-") ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
        }
    }

    if let runScenario {
        guard Scenarios.named(runScenario) != nil else {
            badArgument("unknown scenario '\(runScenario)' (see 'kvo-bench --list')")
        }
        return .run(scenario: runScenario, iterations: iterations ?? 1_000_000)
    }
    if list {
        if quick || markdown || jsonPath != nil || !filters.isEmpty {
            badArgument("'--list' cannot be combined with other options")
        }
        return .list
    }
    return .benchmark(quick: quick, filters: filters, markdown: markdown, jsonPath: jsonPath)
}

// MARK: Commands

func listScenarios() {
    let all = Scenarios.list
    let width = all.map(\.name.count).max()!
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

func benchmark(quick: Bool, filters: [String], markdown: Bool, jsonPath: String?) -> Never {
    let all = Scenarios.list
    var selected = all
    if !filters.isEmpty {
        let matching = Set(all.filter { scenario in filters.contains { scenario.name.contains($0) } }.map(\.name))
        if matching.isEmpty, !filters.contains(where: { DefaultsLatency.name.contains($0) }) {
            badArgument("no scenario name contains \(filters.map { "'\($0)'" }.joined(separator: " or ")) (see 'kvo-bench --list')")
        }
        let needed = matching.union(all.filter { matching.contains($0.name) }.flatMap(\.dependencies))
        selected = all.filter { needed.contains($0.name) }
    }

    let plan: SamplingPlan = quick ? .quick : .full
    let showProgress = isatty(2) != 0
    let measurements: [String: Measurement]
    do throws(CheckFailure) {
        measurements = try measure(selected, plan: plan) { if showProgress { printError($0) } }
    } catch {
        fail(error.description, status: 1)
    }

    let rows = makeRows(selected, measurements)
    let machine = Machine.current()
    let method = "ns/op: p50 / p90 / p99 of \(plan.samples) interleaved samples of ~\(plan.sampleNanoseconds / 1_000_000) ms "
        + "after \(plan.warmUpNanoseconds / 1_000_000) ms of warm-up\(quick ? " (--quick)" : "")"
        + "\(plan.samples < 100 ? " (p99 = slowest sample)" : ""); "
        + "ratio = p50 / baseline p50, same run"
    if markdown {
        print(markdownReport(rows), terminator: "")
        print("_\(method). \(compiledWith), release build; \(machine.description)._")
    } else {
        print("kvo-bench — \(method)")
        print("\(compiledWith), release build; \(machine.description)\n")
        print(textReport(rows), terminator: "")
    }
    if filters.isEmpty || filters.contains(where: { DefaultsLatency.name.contains($0) }) {
        print(DefaultsLatency.report(quick: quick, markdown: markdown), terminator: "")
    }

    if let jsonPath {
        do {
            let data = try jsonReport(rows, plan: plan, mode: quick ? "quick" : "full")
            try (data + Data("\n".utf8)).write(to: URL(fileURLWithPath: jsonPath))
        } catch {
            fail("cannot write JSON to '\(jsonPath)': \(error)", status: 1)
        }
        if !markdown { print("results written to \(jsonPath)") }
    }
    exit(0)
}

switch parseArguments(Array(CommandLine.arguments.dropFirst())) {
case .help:
    print(usage)
case .list:
    listScenarios()
case .run(let scenario, let iterations):
    runOnce(scenario, iterations: iterations)
case .benchmark(let quick, let filters, let markdown, let jsonPath):
    benchmark(quick: quick, filters: filters, markdown: markdown, jsonPath: jsonPath)
}
