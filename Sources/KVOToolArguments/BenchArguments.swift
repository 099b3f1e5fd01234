// kvo-bench's command line, parsed without running anything (the usage text is kvo-bench's).

/// The hidden commands kvo-bench runs as its own other processes.
package enum BenchHiddenCommands {
    /// A contending process of the etcd section's update throughput.
    package static let updateDefaults = "_update-defaults"
    /// A process of the mass-registration section.
    package static let massRegistration = "_mass-registration"
    /// The other process of the cross-process latency section.
    package static let watchDefaults = "_watch-defaults"
    /// A writer process of the stress.
    package static let soakWriter = "_soak-writer"
    /// How many writer processes the stress starts (their indices are 0 up to it).
    package static let soakWriterCount = 2
}

/// What `kvo-bench`'s arguments ask for.
package enum BenchCommand: Equatable {
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

package struct BenchmarkOptions: Equatable {
    package var quick = false
    package var filters: [String] = []
    package var markdownPath: String?
    package var jsonPath: String?
    package var svgPath: String?
    package var callgrind = false

    package init() {}
}

/// Splits arguments into options (with their values, after "=" or as the next argument) and
/// positional arguments, knowing which options take a value.
struct ArgumentReader {
    private var remaining: ArraySlice<String>
    let command: String

    init(_ arguments: ArraySlice<String>, command: String) {
        self.remaining = arguments
        self.command = command
    }

    /// A usage error: status 2 in every command (`compare` and `gate` exit 3 on a regression).
    func bad(_ message: String) -> ToolUsageError {
        ToolUsageError(message, status: 2)
    }

    /// The next argument as (option, inline value) or (positional, nil), or `nil` at the end.
    mutating func next() -> (argument: String, option: String?, inline: String?)? {
        guard let argument = remaining.popFirst() else { return nil }
        guard argument.hasPrefix("-"), argument != "-" else { return (argument, nil, nil) }
        // "--json=" has an empty value (refused), not none: the next argument is not its value.
        let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        return (argument, parts[0], parts.count == 2 ? parts[1] : nil)
    }

    mutating func value(of option: String, inline: String?) throws(ToolUsageError) -> String {
        if let inline {
            if inline.isEmpty { throw bad("option '\(option)' needs a value") }
            return inline
        }
        guard let next = remaining.popFirst(), !next.hasPrefix("--"), !next.isEmpty else {
            throw bad("option '\(option)' needs a value")
        }
        return next
    }

    func flag(_ option: String, inline: String?) throws(ToolUsageError) {
        if inline != nil { throw bad("option '\(option)' takes no value") }
    }

    func unexpected(_ argument: String) -> ToolUsageError {
        bad(
            argument.hasPrefix("-")
                ? "unknown option '\(argument)'\(command.isEmpty ? "" : " for '\(command)'")"
                : "unexpected argument '\(argument)'")
    }
}

/// The command `arguments` (without the program's name) ask for, or the usage error they make;
/// `scenarioExists` says whether `run` may name a scenario. Runs nothing.
package func parseBenchArguments(_ arguments: [String], scenarioExists: (String) -> Bool) -> Result<BenchCommand, ToolUsageError> {
    Result { () throws(ToolUsageError) in try parseBenchCommand(arguments, scenarioExists: scenarioExists) }
}

private func parseBenchCommand(_ arguments: [String], scenarioExists: (String) -> Bool) throws(ToolUsageError) -> BenchCommand {
    if arguments.first == BenchHiddenCommands.updateDefaults {
        guard arguments.count == 4, let count = Int(arguments[3]), count >= 0 else {
            throw ToolUsageError("usage: kvo-bench \(BenchHiddenCommands.updateDefaults) LOCATION KEY N", status: 2)
        }
        return .updateDefaults(location: arguments[1], key: arguments[2], count: count)
    }
    if arguments.first == BenchHiddenCommands.massRegistration {
        guard arguments.count == 4, let objects = Int(arguments[2]), objects > 0, let observers = Int(arguments[3]), observers > 0 else {
            throw ToolUsageError("usage: kvo-bench \(BenchHiddenCommands.massRegistration) IMPLEMENTATION OBJECTS OBSERVERS", status: 2)
        }
        return .massRegistration(implementation: arguments[1], objects: objects, observers: observers)
    }
    if arguments.first == BenchHiddenCommands.watchDefaults {
        guard arguments.count == 3 || arguments.count == 4 else {
            throw ToolUsageError("usage: kvo-bench \(BenchHiddenCommands.watchDefaults) FILE KEY [DIRECTORY]", status: 2)
        }
        return .watchDefaults(file: arguments[1], key: arguments[2], directory: arguments.count == 4 ? arguments[3] : nil)
    }
    if arguments.first == BenchHiddenCommands.soakWriter {
        guard arguments.count == 3, let index = Int(arguments[2]), (0..<BenchHiddenCommands.soakWriterCount).contains(index) else {
            throw ToolUsageError("usage: kvo-bench \(BenchHiddenCommands.soakWriter) FILE INDEX", status: 2)
        }
        return .soakWriter(file: arguments[1], index: index)
    }
    if arguments.contains(where: { ["-h", "--help", "help"].contains($0) }) { return .help }
    switch arguments.first {
    case "run": return try parseRun(arguments.dropFirst(), scenarioExists: scenarioExists)
    case "compare": return try parseCompare(arguments.dropFirst())
    case "gate": return try parseGate(arguments.dropFirst())
    case "contention": return try parseContention(arguments.dropFirst())
    case "stress": return try parseStress(arguments.dropFirst())
    default: return try parseBenchmark(arguments[...])
    }
}

private func parseBenchmark(_ arguments: ArraySlice<String>) throws(ToolUsageError) -> BenchCommand {
    var reader = ArgumentReader(arguments, command: "")
    var options = BenchmarkOptions()
    var list = false
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--quick": try reader.flag("--quick", inline: inline); options.quick = true
        case "--callgrind": try reader.flag("--callgrind", inline: inline); options.callgrind = true
        case "--list": try reader.flag("--list", inline: inline); list = true
        case "--filter": options.filters.append(try reader.value(of: "--filter", inline: inline))
        case "--markdown": options.markdownPath = try reader.value(of: "--markdown", inline: inline)
        case "--json": options.jsonPath = try reader.value(of: "--json", inline: inline)
        case "--svg": options.svgPath = try reader.value(of: "--svg", inline: inline)
        case "--iterations": throw reader.bad("option '--iterations' is only valid after 'run SCENARIO'")
        default: throw reader.unexpected(argument)
        }
    }
    if list {
        if options.quick || options.markdownPath != nil || options.callgrind || options.jsonPath != nil
            || options.svgPath != nil || !options.filters.isEmpty
        {
            throw reader.bad("'--list' cannot be combined with other options")
        }
        return .list
    }
    return .benchmark(options)
}

private func parseRun(_ arguments: ArraySlice<String>, scenarioExists: (String) -> Bool) throws(ToolUsageError) -> BenchCommand {
    var reader = ArgumentReader(arguments, command: "run")
    var scenario: String?
    var iterations = 1_000_000
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case nil where scenario == nil: scenario = argument
        case "--iterations": iterations = try positive("--iterations", &reader, inline: inline)
        case "--quick", "--markdown", "--list", "--filter", "--json", "--svg", "--callgrind":
            throw reader.bad("option '\(option!)' cannot be combined with 'run'")
        default: throw reader.unexpected(argument)
        }
    }
    guard let scenario else { throw reader.bad("'run' needs a scenario name (see 'kvo-bench --list')") }
    guard scenarioExists(scenario) else {
        throw reader.bad("unknown scenario '\(scenario)' (see 'kvo-bench --list')")
    }
    return .run(scenario: scenario, iterations: iterations)
}

private func parseCompare(_ arguments: ArraySlice<String>) throws(ToolUsageError) -> BenchCommand {
    var reader = ArgumentReader(arguments, command: "compare")
    var files: [String] = []
    var threshold = 10.0
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case nil: files.append(argument)
        case "--threshold":
            let text = try reader.value(of: "--threshold", inline: inline)
            guard let value = Double(text.hasSuffix("%") ? String(text.dropLast()) : text), value >= 0, value.isFinite else {
                throw reader.bad("'--threshold' must be a percentage (a non-negative number), not '\(text)'")
            }
            threshold = value
        default: throw reader.unexpected(argument)
        }
    }
    guard files.count == 2 else {
        throw reader.bad("'compare' needs two results files, OLD.json and NEW.json (got \(files.count))")
    }
    return .compare(old: files[0], new: files[1], thresholdPercent: threshold)
}

private func parseGate(_ arguments: ArraySlice<String>) throws(ToolUsageError) -> BenchCommand {
    var reader = ArgumentReader(arguments, command: "gate")
    var options = GateOptions()
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--thresholds": options.thresholdsPath = try reader.value(of: "--thresholds", inline: inline)
        case "--filter": options.filters.append(try reader.value(of: "--filter", inline: inline))
        case "--json": options.jsonPath = try reader.value(of: "--json", inline: inline)
        case "--update": try reader.flag("--update", inline: inline); options.update = true
        case "--targets": try reader.flag("--targets", inline: inline); options.targets = true
        default: throw reader.unexpected(argument)
        }
    }
    if options.update && !options.filters.isEmpty { throw reader.bad("'gate --update' measures every gated scenario: drop '--filter'") }
    return .gate(options)
}

/// A positive integer option's value.
private func positive(_ option: String, _ reader: inout ArgumentReader, inline: String?) throws(ToolUsageError) -> Int {
    let text = try reader.value(of: option, inline: inline)
    guard let count = Int(text), count > 0 else { throw reader.bad("'\(option)' must be a positive integer, not '\(text)'") }
    return count
}

private func parseContention(_ arguments: ArraySlice<String>) throws(ToolUsageError) -> BenchCommand {
    var reader = ArgumentReader(arguments, command: "contention")
    var options = ContentionOptions()
    var quick = false
    var updates: Int?
    var rounds: Int?
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--quick": try reader.flag("--quick", inline: inline); quick = true
        case "--threads": options.threads = try positive("--threads", &reader, inline: inline)
        case "--updates": updates = try positive("--updates", &reader, inline: inline)
        case "--rounds": rounds = try positive("--rounds", &reader, inline: inline)
        default: throw reader.unexpected(argument)
        }
    }
    options.updates = updates ?? (quick ? 20_000 : options.updates)
    options.rounds = rounds ?? (quick ? 3 : options.rounds)
    return .contention(options)
}

private func parseStress(_ arguments: ArraySlice<String>) throws(ToolUsageError) -> BenchCommand {
    var reader = ArgumentReader(arguments, command: "stress")
    var options = StressOptions()
    var seconds: Int?
    while case let (argument, option, inline)? = reader.next() {
        switch option {
        case "--quick": try reader.flag("--quick", inline: inline); options.seconds = 1
        case "--seconds": seconds = try positive("--seconds", &reader, inline: inline)
        default: throw reader.unexpected(argument)
        }
    }
    if let seconds { options.seconds = seconds }
    return .stress(options)
}

/// `kvo-bench gate`'s options.
package struct GateOptions: Equatable {
    package var thresholdsPath = "Benchmarks/thresholds.json"
    package var filters: [String] = []
    package var jsonPath: String?
    package var update = false
    /// Also time the scenarios that carry a target and report whether they met it (never fatal).
    package var targets = false

    package init() {}
}

/// `kvo-bench contention`'s options.
package struct ContentionOptions: Equatable {
    package var threads = 8
    package var updates = 100_000
    package var rounds = 15

    package init() {}
}

/// `kvo-bench stress`'s options.
package struct StressOptions: Equatable {
    package var seconds = 4

    package init() {}
}
