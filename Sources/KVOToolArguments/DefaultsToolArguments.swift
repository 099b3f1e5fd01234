// kvo-defaults' command line, parsed without running anything (the usage text is kvo-defaults').
import Foundation
import ObservableDefaults
import ObservableDefaultsEtcd

/// What `kvo-defaults`' arguments ask for.
package enum DefaultsToolRequest: Equatable {
    /// `help`, `-h` or `--help`: print the usage.
    case help
    /// A command on a store.
    case command(DefaultsToolCommand)
}

/// One command of `kvo-defaults` on one store, its arguments checked.
package struct DefaultsToolCommand: Equatable {
    package enum Name: String, Equatable {
        case read, write, update, delete, watch
    }

    /// Where the store is.
    package enum Store: Equatable {
        /// The file SUITE.json in the defaults directory.
        case suite(String)
        /// The file at a path.
        case file(String)
        /// Keys under a prefix on an etcd cluster.
        case etcd(EtcdStoreArguments)
    }

    package var name: Name
    package var store: Store
    /// The arguments after the store: KEY for read, delete, update and watch (optional for read
    /// and watch), KEY VALUE pairs for write.
    package var operands: [String]
    package var layers: LayerOptions
    package var timestamps: Bool
    package var timeout: Duration?
    /// `update`'s `--add N`, as given (a JSON number).
    package var addend: String?
    package var replacesCorruptFile: Bool
}

/// Parses kvo-defaults' arguments, without the program's name, as the bytes the process received:
/// an argument that is not valid UTF-8 is a usage error (decoded, it would name another key or
/// file than the one given).
package func parseDefaultsToolArguments(_ arguments: [[UInt8]]) -> Result<DefaultsToolRequest, ToolUsageError> {
    var texts: [String] = []
    for (index, bytes) in arguments.enumerated() {
        // A C string ends at its first NUL: an argument never holds one.
        guard let text = String(validating: bytes.prefix { $0 != 0 }, as: UTF8.self) else {
            return .failure(ToolUsageError("argument \(index + 1) is not valid UTF-8 (keys, values and paths must be UTF-8)"))
        }
        texts.append(text)
    }
    return parseDefaultsToolArguments(texts)
}

/// Parses kvo-defaults' arguments, without the program's name.
package func parseDefaultsToolArguments(_ arguments: [String]) -> Result<DefaultsToolRequest, ToolUsageError> {
    Result { () throws(ToolUsageError) in try parseDefaultsTool(arguments) }
}

private func parseDefaultsTool(_ all: [String]) throws(ToolUsageError) -> DefaultsToolRequest {
    var filePath: String?
    var etcd = EtcdStoreArguments()
    var layerOptions = LayerOptions()
    var timestamps = false
    var timeout: Duration?
    var addend: String?
    var replacesCorruptFile = false
    var positional: [String] = []
    var arguments = all[...]
    while let argument = arguments.popFirst() {
        switch argument {
        case "-h", "--help":
            // Options end at '--'; after it, and as a KEY or VALUE, 'help' is just a word.
            return .help
        case "--file":
            guard let path = arguments.popFirst(), !path.isEmpty else { throw ToolUsageError("'--file' needs a path") }
            filePath = path
        case _ where argument.hasPrefix("--file="):
            let path = String(argument.dropFirst("--file=".count))
            if path.isEmpty { throw ToolUsageError("'--file' needs a path") }
            filePath = path
        case _ where try etcd.parse(argument, &arguments):
            break
        case _ where try layerOptions.parse(argument, &arguments):
            break
        case "--timestamps":
            timestamps = true
        case "--replace-corrupt":
            replacesCorruptFile = true
        case "--timeout":
            guard let text = arguments.popFirst(), let seconds = Double(text), seconds >= 0, seconds.isFinite else {
                throw ToolUsageError("'--timeout' needs a number of seconds")
            }
            // Milliseconds in an Int64: 2^63 ms is about 292 million years.
            guard let milliseconds = Int64(exactly: (seconds * 1000).rounded()) else {
                throw ToolUsageError("'--timeout' \(text) is too long: at most 9223372036854775 seconds")
            }
            timeout = .milliseconds(milliseconds)
        case _ where argument == "--add" || argument.hasPrefix("--add="):
            let value = argument == "--add" ? arguments.popFirst() : String(argument.dropFirst("--add=".count))
            guard let value, case .number? = try? JSONValue.parse(value) else { throw ToolUsageError("'--add' needs a number") }
            addend = value
        case "--":
            positional += arguments
            arguments = []
        case _ where argument.hasPrefix("-") && argument.count > 1 && Double(argument) == nil:
            throw ToolUsageError("unknown option '\(argument)'")
        default:
            positional.append(argument)
        }
    }

    guard let command = positional.first else { throw ToolUsageError("missing command (read, write, update, delete or watch)") }
    positional.removeFirst()
    if command == "help" { return .help }
    guard let name = DefaultsToolCommand.Name(rawValue: command) else { throw ToolUsageError("unknown command '\(command)'") }
    if timestamps, name != .watch { throw ToolUsageError("'--timestamps' only applies to 'watch'") }
    if timeout != nil, name != .write, name != .delete, name != .update, etcd.endpoints == nil {
        throw ToolUsageError("'--timeout' only applies to 'write', 'update' and 'delete' (and to every command with --etcd)")
    }
    if addend != nil, name != .update { throw ToolUsageError("'--add' only applies to 'update'") }
    if replacesCorruptFile, name != .write { throw ToolUsageError("'--replace-corrupt' only applies to 'write'") }
    if layerOptions.reveals, name != .read { throw ToolUsageError("'--reveal' only applies to 'read'") }
    if layerOptions.explains, name != .read { throw ToolUsageError("'--explain' only applies to 'read'") }

    let store: DefaultsToolCommand.Store
    if etcd.hasOptionsWithoutEndpoints {
        throw ToolUsageError("'--prefix', '--user', '--password-file' and '--cacert' need '--etcd URL[,URL...]'")
    }
    if etcd.endpoints != nil {
        if filePath != nil { throw ToolUsageError("'--file' and '--etcd' name two different stores: give one") }
        try etcd.check()
        store = .etcd(etcd)
    } else if let filePath {
        store = .file(filePath)
    } else {
        guard let suite = positional.first else { throw ToolUsageError("'\(command)' needs a SUITE or --file PATH") }
        guard DefaultsStore.isValidSuiteName(suite) else {
            throw ToolUsageError("'\(suite)' is not a valid suite name (a file name: not empty, no '/', not '.' or '..')")
        }
        positional.removeFirst()
        store = .suite(suite)
    }

    func expectOperands(_ range: ClosedRange<Int>, _ names: String) throws(ToolUsageError) {
        if !range.contains(positional.count) {
            throw ToolUsageError(
                positional.count < range.lowerBound
                    ? "'\(command)' needs \(names)" : "unexpected argument '\(positional[range.upperBound])'")
        }
    }
    switch name {
    case .read:
        try expectOperands(0...1, "at most a KEY")
        if layerOptions.explains, positional.isEmpty { throw ToolUsageError("'--explain' needs a KEY") }
    case .write:
        if positional.count < 2 || positional.count % 2 != 0 {
            throw ToolUsageError(positional.isEmpty ? "'write' needs a KEY and a VALUE" : "'write' needs a VALUE after each KEY")
        }
    case .update:
        try expectOperands(1...1, "a KEY")
        if addend == nil { throw ToolUsageError("'update' needs '--add N'") }
    case .delete:
        try expectOperands(1...1, "a KEY")
    case .watch:
        try expectOperands(0...1, "at most a KEY")
    }
    return .command(
        DefaultsToolCommand(
            name: name, store: store, operands: positional, layers: layerOptions, timestamps: timestamps, timeout: timeout,
            addend: addend, replacesCorruptFile: replacesCorruptFile))
}

/// The options that name a store on etcd: `--etcd URL[,URL…] --prefix PREFIX [--user USER]
/// [--password-file PATH] [--cacert PATH]`. The password never comes from the command line (other
/// users can read a process's arguments): it comes from `KVO_ETCD_PASSWORD` or the first line of
/// `--password-file`.
package struct EtcdStoreArguments: Equatable {
    package var endpoints: [URL]?
    package var prefix: String?
    package var user: String?
    package var passwordFile: String?
    package var trustedCertificates: String?

    /// The environment variable the password is read from.
    package static let passwordVariable = "KVO_ETCD_PASSWORD"

    /// Takes `argument` (and its value from `arguments`) if it is one of the etcd options; returns
    /// whether it was.
    mutating func parse(_ argument: String, _ arguments: inout ArraySlice<String>) throws(ToolUsageError) -> Bool {
        let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
        guard ["--etcd", "--prefix", "--user", "--password-file", "--password", "--cacert"].contains(name) else { return false }
        if name == "--password" {
            throw ToolUsageError(
                "the password is not taken from the command line (other users can read it): set \(Self.passwordVariable) or use --password-file"
            )
        }
        let inline = argument.contains("=") ? String(argument.dropFirst(name.count + 1)) : nil
        guard let value = inline ?? arguments.popFirst() else { throw ToolUsageError("'\(name)' needs a value") }
        switch name {
        case "--etcd":
            var urls: [URL] = []
            for text in value.split(separator: ",", omittingEmptySubsequences: false) {
                guard let url = URL(string: String(text)), url.scheme == "http" || url.scheme == "https", url.host?.isEmpty == false else {
                    throw ToolUsageError("'--etcd' needs http or https URLs separated by commas ('\(text)' is not one)")
                }
                if let problem = EtcdClient.problem(with: url) {
                    // The URL is the operator's own argument: quoting it back is safe.
                    throw ToolUsageError("'--etcd' \(text): \(problem)")
                }
                urls.append(url)
            }
            endpoints = urls
        case "--prefix": prefix = value
        case "--user": user = value
        case "--cacert":
            guard !value.isEmpty else { throw ToolUsageError("'--cacert' needs a path") }
            trustedCertificates = value
        default:
            guard !value.isEmpty else { throw ToolUsageError("'--password-file' needs a path") }
            passwordFile = value
        }
        return true
    }

    /// Checks that the options go together (called when `--etcd` is given; without it, none of the
    /// others may be).
    func check() throws(ToolUsageError) {
        if prefix == nil { throw ToolUsageError("'--etcd' needs '--prefix PREFIX' (the key prefix of the store, such as myapp/)") }
        if passwordFile != nil, user == nil { throw ToolUsageError("'--password-file' needs '--user USER'") }
    }

    /// Whether an etcd option other than `--etcd` was given (an error without `--etcd`).
    var hasOptionsWithoutEndpoints: Bool {
        endpoints == nil && (prefix != nil || user != nil || passwordFile != nil || trustedCertificates != nil)
    }
}

/// The options that build a store's layers as a program would (`--arg`, `--env-prefix`,
/// `--directory`), and those about secrets (`--secret`, `--reveal`) and `read --explain`. The tool
/// cannot see another process's arguments or environment: `--arg` gives the arguments, and the
/// environment is the tool's own.
package struct LayerOptions: Equatable {
    package var arguments: [String] = []
    package var environmentPrefix: String?
    package var directory: String?
    package var secrets: [String] = []
    package var reveals = false
    package var explains = false

    /// Takes `argument` (and its value from `rest`) if it is one of these options; returns whether
    /// it was.
    mutating func parse(_ argument: String, _ rest: inout ArraySlice<String>) throws(ToolUsageError) -> Bool {
        let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
        switch name {
        case "--reveal":
            reveals = true
            return true
        case "--explain":
            explains = true
            return true
        case "--arg", "--env-prefix", "--directory", "--secret":
            break
        default:
            return false
        }
        let inline = argument.contains("=") ? String(argument.dropFirst(name.count + 1)) : nil
        guard let value = inline ?? rest.popFirst() else { throw ToolUsageError("'\(name)' needs a value") }
        switch name {
        case "--arg": arguments.append(value)
        case "--env-prefix": environmentPrefix = value
        case "--directory":
            if value.isEmpty { throw ToolUsageError("'--directory' needs a path") }
            directory = value
        default:
            guard !value.isEmpty, DefaultsKey<Int>.isValidName(value) else { throw ToolUsageError("'--secret' needs a key name") }
            secrets.append(value)
        }
        return true
    }

    /// The layers, in the order a program would read them: arguments, environment, directory.
    package var layers: [DefaultsLayer] {
        var layers: [DefaultsLayer] = []
        if !arguments.isEmpty { layers.append(.arguments(arguments)) }
        if let environmentPrefix { layers.append(.environment(prefix: environmentPrefix)) }
        if let directory { layers.append(.directory(URL(fileURLWithPath: directory), watching: .automatic)) }
        return layers
    }

    /// Whether the value of `key` from `layer` is printed as `<redacted>`: a secret key's, and
    /// every value from a directory (where secrets are mounted), unless `--reveal`.
    package func redacts(_ key: String, from layer: DefaultsLayerKind? = nil) -> Bool {
        !reveals && (DefaultsKeyNames.isSecret(key) || layer == .directory)
    }
}
