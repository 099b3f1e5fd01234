import Foundation

/// A read-only source of values that a `DefaultsStore` reads through before its own back end: the
/// command line, the environment, a directory of files (Kubernetes' and Docker's mounted Secrets and
/// ConfigMaps), or a `DefaultsMemoryLayer`.
///
/// A store is made with an ordered list of layers: the first answers first. Reads go down the list,
/// then to the back end (the file or etcd), then to the registered defaults
/// (`DefaultsStore.register(_:)`), then to the key's own default. Writes always go to the back end.
///
/// ```swift
/// let store = DefaultsStore(
///     suiteName: "com.example.player",
///     layers: [
///         .arguments(CommandLine.arguments.dropFirst()),   // --playback-speed=1.5
///         .environment(prefix: "PLAYER"),                    // PLAYER_PLAYBACK_SPEED=1.25
///         .directory(URL(fileURLWithPath: "/etc/player")),  // /etc/player/playbackSpeed
///     ])
/// ```
///
/// Text values (arguments, environment, files) are decoded for the key's type (see the
/// "Configuration layers and secrets" article): a value that does not decode is reported once,
/// naming the layer and the key but not the value, and the next layer answers.
///
/// A layer can be secret as a whole (`isSecret`): every value it holds is redacted wherever the
/// library prints it, for any key, declared secret or not. A directory layer is secret unless told
/// otherwise, because mounted Kubernetes and Docker secrets live there; the other layers are not.
public struct DefaultsLayer: Sendable {
    enum Source: Sendable {
        case arguments([String])
        case environment(prefix: String, variables: [String: String]?)
        case directory(path: String, watching: DefaultsStore.Watching)
        case memory(DefaultsMemoryLayer)
    }

    let source: Source

    /// Whether every value this layer holds is secret: redacted in descriptions, dumps, mirrors,
    /// errors and `kvo-defaults`' output, whatever the key (typed reads still return it).
    public let isSecret: Bool

    /// The command-line arguments `arguments` (for example `CommandLine.arguments.dropFirst()`):
    /// `--name=value`, or `--name value` when the value does not start with `--`; a bare `--name`
    /// reads as `true` for a `Bool` key. Parsing stops at `--`; the last occurrence of a flag wins;
    /// flags no key reads are ignored. A key named `playbackSpeed` reads `--playback-speed` and
    /// `--playbackSpeed`.
    ///
    /// A secret passed on the command line is visible to every user of the machine (in `/proc` and
    /// `ps`): pass secrets in a file of a directory layer instead.
    ///
    /// - Parameters:
    ///   - arguments: the arguments, without the program's name.
    ///   - isSecret: whether every value the layer holds is secret (see `isSecret`).
    public static func arguments(_ arguments: some Sequence<String>, isSecret: Bool = false) -> DefaultsLayer {
        DefaultsLayer(source: .arguments(Array(arguments)), isSecret: isSecret)
    }

    /// Environment variables named `PREFIX_KEY_NAME`: the key's name in upper snake case after the
    /// prefix and an underscore (`playbackSpeed` with prefix `PLAYER` reads `PLAYER_PLAYBACK_SPEED`;
    /// a run of capitals stays one word: `maxHTTPConnections` reads `PLAYER_MAX_HTTP_CONNECTIONS`).
    /// The variables are read once, when the store is made; two keys that map to one variable are
    /// reported to the store's error handler.
    ///
    /// - Parameters:
    ///   - prefix: the variables' prefix, with or without its trailing `_`; empty for none.
    ///   - variables: the variables to read; `nil` (the default) for this process's environment.
    ///   - isSecret: whether every value the layer holds is secret (see `isSecret`).
    public static func environment(prefix: String, variables: [String: String]? = nil, isSecret: Bool = false) -> DefaultsLayer {
        DefaultsLayer(source: .environment(prefix: prefix, variables: variables), isSecret: isSecret)
    }

    /// A directory of files, one per key, named as the key (`playbackSpeed`) or in kebab case
    /// (`playback-speed`), as Kubernetes mounts a Secret or a ConfigMap and Docker mounts its
    /// secrets. Each file's contents, with one trailing newline removed, is the key's value. The
    /// directory is watched (inotify on Linux, kqueue on macOS), the atomic `..data` symlink swap
    /// Kubernetes makes on an update included: observers of a key hear of a change of its file.
    /// Names starting with `.` are skipped; a directory that does not exist holds nothing until it
    /// appears.
    ///
    /// The layer is secret by default (`isSecret`): mounted secrets live in such directories. Pass
    /// `isSecret: false` for a ConfigMap, whose values may be printed.
    ///
    /// ```swift
    /// .directory(URL(fileURLWithPath: "/run/secrets"))                       // secret
    /// .directory(URL(fileURLWithPath: "/etc/myapp/config"), isSecret: false)  // a ConfigMap
    /// ```
    ///
    /// - Parameters:
    ///   - directory: the directory (a `file:` URL).
    ///   - watching: how changes are noticed: `.automatic`, or `.polling(interval:)` for a network
    ///     file system.
    ///   - isSecret: whether every value the layer holds is secret (see `isSecret`); `true` unless
    ///     told otherwise.
    public static func directory(_ directory: URL, watching: DefaultsStore.Watching = .automatic, isSecret: Bool = true) -> DefaultsLayer {
        precondition(directory.isFileURL, "DefaultsLayer.directory: \(directory) is not a file URL")
        var path = directory.standardizedFileURL.path
        if !path.hasPrefix("/") { path = FileManager.default.currentDirectoryPath + "/" + path }
        return DefaultsLayer(source: .directory(path: path, watching: watching), isSecret: isSecret)
    }

    /// A layer that code changes: `layer[key] = value` answers for `key` in every store made with it
    /// and notifies their observers, on the setting thread.
    ///
    /// - Parameters:
    ///   - layer: the layer (one layer can serve several stores).
    ///   - isSecret: whether every value the layer holds is secret (see `isSecret`).
    public static func memory(_ layer: DefaultsMemoryLayer, isSecret: Bool = false) -> DefaultsLayer {
        DefaultsLayer(source: .memory(layer), isSecret: isSecret)
    }

    /// What kind of layer this is.
    public var kind: DefaultsLayerKind {
        switch source {
        case .arguments: .arguments
        case .environment: .environment
        case .directory: .directory
        case .memory: .memory
        }
    }
}

/// Where a key's value comes from: one of the store's layers, its back end, its registered defaults
/// or the key's own default.
public enum DefaultsLayerKind: String, Sendable, Hashable, CustomStringConvertible {
    /// The command line (`DefaultsLayer.arguments(_:isSecret:)`).
    case arguments
    /// The environment (`DefaultsLayer.environment(prefix:variables:isSecret:)`).
    case environment
    /// A directory of files (`DefaultsLayer.directory(_:watching:isSecret:)`).
    case directory
    /// A `DefaultsMemoryLayer` (`DefaultsLayer.memory(_:isSecret:)`).
    case memory
    /// The store's writable back end: its file, or its etcd prefix.
    case store
    /// The registered defaults (`DefaultsStore.register(_:)`).
    case registered
    /// The key's own default (`DefaultsKey.defaultValue`).
    case defaultValue

    /// The kind's name (`"environment"`).
    public var description: String { rawValue }

    /// Its code in `DefaultsChange`'s flags: 0 is `.store`.
    @usableFromInline var code: UInt64 {
        switch self {
        case .store: 0
        case .arguments: 1
        case .environment: 2
        case .directory: 3
        case .memory: 4
        case .registered: 5
        case .defaultValue: 6
        }
    }

    init(code: UInt64) {
        switch code {
        case 1: self = .arguments
        case 2: self = .environment
        case 3: self = .directory
        case 4: self = .memory
        case 5: self = .registered
        case 6: self = .defaultValue
        default: self = .store
        }
    }
}
