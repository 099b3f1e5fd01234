import KVOToolArguments

/// The tools' command lines (`Sources/KVOToolArguments`): the pure parses `kvo-defaults` and
/// `kvo-bench` call before they run anything. A target only parses: a valid command line is never
/// run.
///
/// Input format (both targets): the arguments, without the program's name, separated by NUL bytes
/// (`read\0--file\0/tmp/a.json\0key`); two NULs in a row make an empty argument, an empty input is
/// no argument at all.
enum ToolArgumentsTargets {
    /// The arguments of an input, as bytes.
    static func arguments(_ bytes: [UInt8]) -> [[UInt8]] {
        bytes.isEmpty ? [] : bytes.split(separator: 0, omittingEmptySubsequences: false).map(Array.init)
    }

    /// `kvo-defaults-arguments`: `parseDefaultsToolArguments`, given the arguments' bytes as the
    /// process receives them.
    ///
    /// Checked: no trap; every command line is help, a command or a usage error (exit status 2)
    /// with a message; the bytes parse as their text does when they are UTF-8, and an argument
    /// that is not is refused naming it; and a command holds what its usage says: read and watch at
    /// most a KEY, delete a KEY, update a KEY and `--add`, write KEY VALUE pairs; `--timestamps` only
    /// on watch, `--replace-corrupt` only on write, `--reveal` and `--explain` only on read, a
    /// suite a valid suite name, etcd endpoints with a prefix.
    @Sendable static func defaults(_ bytes: [UInt8]) throws(FuzzFailure) {
        let raw = arguments(bytes)
        let parsed = parseDefaultsToolArguments(raw)
        let texts = raw.map { String(validating: $0, as: UTF8.self) }
        if let invalid = texts.firstIndex(of: nil) {
            let expected = ToolUsageError("argument \(invalid + 1) is not valid UTF-8 (keys, values and paths must be UTF-8)")
            try require(parsed == .failure(expected), "argument \(invalid + 1) is not UTF-8, and the parse gives \(parsed)")
            return
        }
        let fromText = parseDefaultsToolArguments(texts.map { $0 ?? "" })
        try require(parsed == fromText, "the bytes parse as \(parsed), the text as \(fromText)")
        switch parsed {
        case .failure(let error):
            try require(!error.message.isEmpty && error.status == 2, "a usage error without a message or not of status 2: \(error)")
        case .success(.help):
            break
        case .success(.command(let command)):
            try check(command)
        }
    }

    static func check(_ command: DefaultsToolCommand) throws(FuzzFailure) {
        let count = command.operands.count
        switch command.name {
        case .read, .watch: try require(count <= 1, "\(command.name) with \(count) operands")
        case .delete: try require(count == 1, "delete with \(count) operands")
        case .update:
            try require(count == 1 && command.addend != nil, "update with \(count) operands, addend \(String(describing: command.addend))")
        case .write: try require(count >= 2 && count % 2 == 0, "write with \(count) operands")
        }
        try require(!command.timestamps || command.name == .watch, "--timestamps on \(command.name)")
        try require(!command.replacesCorruptFile || command.name == .write, "--replace-corrupt on \(command.name)")
        try require(command.addend == nil || command.name == .update, "--add on \(command.name)")
        try require(
            (!command.layers.reveals && !command.layers.explains) || command.name == .read, "--reveal or --explain on \(command.name)")
        switch command.store {
        case .suite(let suite):
            try require(!suite.isEmpty && !suite.contains("/") && suite != "." && suite != "..", "the suite name \(suite.debugDescription)")
        case .file(let path):
            try require(!path.isEmpty, "an empty --file path")
        case .etcd(let etcd):
            try require(etcd.endpoints?.isEmpty == false && etcd.prefix != nil, "etcd without endpoints or a prefix: \(etcd)")
        }
    }

    /// The scenarios `kvo-bench-arguments` knows (the real list is kvo-bench's own).
    static let scenarios: Set<String> = ["set", "set-observed", "defaults-read"]

    /// `kvo-bench-arguments`: `parseBenchArguments`, given the arguments as `CommandLine.arguments`
    /// gives them (an invalid UTF-8 sequence reads as U+FFFD), with the scenarios `set`,
    /// `set-observed` and `defaults-read`.
    ///
    /// Checked: no trap; every command line is a command or a usage error with a message, of exit
    /// status 2 in every command (`compare` and `gate` exit 3 on a regression); and a command
    /// holds what its usage says: `run` names a known scenario, counts are positive, a threshold is
    /// a finite non-negative percentage, `--list` goes with no other argument (it may be repeated),
    /// `gate --update` has no filter.
    @Sendable static func bench(_ bytes: [UInt8]) throws(FuzzFailure) {
        let texts = arguments(bytes).map { String(decoding: $0, as: UTF8.self) }
        switch parseBenchArguments(texts, scenarioExists: scenarios.contains) {
        case .failure(let error):
            try require(!error.message.isEmpty, "a usage error without a message")
            try require(error.status == 2, "status \(error.status) for \(texts.first ?? "no command"): \(error.message)")
        case .success(let command):
            try check(command, arguments: texts)
        }
    }

    static func check(_ command: BenchCommand, arguments: [String]) throws(FuzzFailure) {
        switch command {
        case .run(let scenario, let iterations):
            try require(scenarios.contains(scenario) && iterations > 0, "run \(scenario) \(iterations)")
        case .compare(_, _, let threshold):
            try require(threshold >= 0 && threshold.isFinite, "a threshold of \(threshold)")
        case .contention(let options):
            try require(options.threads > 0 && options.updates > 0 && options.rounds > 0, "contention \(options)")
        case .stress(let options):
            try require(options.seconds > 0, "stress for \(options.seconds) s")
        case .gate(let options):
            try require(!options.update || options.filters.isEmpty, "gate --update with filters")
        case .list:
            // `--list` may be repeated (as `--quick` may), never combined with another argument.
            try require(arguments.allSatisfy { $0 == "--list" }, "--list with other arguments: \(arguments)")
        case .updateDefaults(_, _, let count):
            try require(count >= 0, "an update count of \(count)")
        case .massRegistration(_, let objects, let observers):
            try require(objects > 0 && observers > 0, "mass registration of \(objects) objects, \(observers) observers")
        case .soakWriter(_, let index):
            try require(index >= 0 && index < BenchHiddenCommands.soakWriterCount, "a soak writer of index \(index)")
        case .help, .benchmark, .watchDefaults:
            break
        }
    }
}
