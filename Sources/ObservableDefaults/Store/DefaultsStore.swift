import Foundation
import KeyValueObserving

/// A defaults store, observable across instances and across processes: the `UserDefaults` that
/// server and command-line Swift lacks on Linux. It keeps its values in a file (the initializers
/// here), or, with the `ObservableDefaultsEtcd` library, under a prefix of an etcd cluster shared by
/// many machines (`DefaultsStore(etcd:prefix:credentials:trustedCertificates:timeout:maximumReplySize:layers:secrets:errorHandler:)`), with the same
/// keys, observation, `update`, `batch` and `snapshot()`. What follows describes the file; `location`
/// says which back end a store uses.
///
/// ```swift
/// let speed = DefaultsKey("playbackSpeed", default: 1.0)
/// let store = DefaultsStore(suiteName: "com.example.player")   // ~/.config/com.example.player.json
/// let token = store.observe(speed, options: [.initial, .new]) { _, change in
///     print(change.newValue!, change.isFromAnotherProcess)
/// }
/// store[speed] = 1.5                                             // observers called now, on this thread
/// ```
///
/// - Storage: one JSON object per suite, keys sorted, pretty-printed, each value its JSON encoding,
///   so the file can be read and edited by hand.
/// - Sharing: every store of this process on the same file shares one in-memory storage; a write
///   through one is visible through the others and notifies their observers synchronously.
/// - Persistence: automatic and batched off the caller's thread (a write joins the changes of the
///   next few milliseconds); `flush()` waits until the changes are durable. Pending changes are also
///   written when the process exits normally (`exit()` or a return from `main`, from any thread); a
///   process killed by a signal (SIGTERM, SIGKILL) does not run that, so call `flush()` first.
/// - Other processes: their writes are seen by watching the file (inotify on Linux, kqueue on macOS,
///   polling where neither works) and reported per key with old and new values and
///   `origin == .anotherProcess`. Writes lock a separate lock file, re-read the file, merge only the
///   keys this process changed, and replace the file atomically, so no process loses another's
///   updates and no reader sees a torn file.
/// - Changes made as one: `update(_:_:)` changes a key atomically across threads and processes
///   (under the file lock, durable when it returns); `batch(_:)` applies several keys at once and
///   writes them in one rename; `observeChanges(_:)` hears of each change (a reload of another
///   process's write included) once, with every key it changed; `snapshot()` reads them all at one
///   instant.
/// - Errors (a corrupt file, a value of the wrong type, an unwritable directory, a full disk, a NaN)
///   go to the error handler, once per cause; the store keeps working with the last good values.
///   It never replaces a file it cannot parse: its changes wait in memory until the file parses
///   again (`replaceCorruptFile()` replaces it after copying it aside).
///
/// `DefaultsStore` is `Sendable`: use it from any thread.
public final class DefaultsStore: Sendable {
    /// How the store notices other processes' writes.
    public enum Watching: Sendable, Hashable {
        /// inotify (Linux) or kqueue (macOS) on the file's directory; while the directory does not
        /// exist, on its nearest existing ancestor until it appears; polling if the kernel cannot
        /// watch the directory.
        case automatic
        /// Check the file every `interval` (for network file systems, which do not report changes).
        case polling(interval: Duration)
    }

    @usableFromInline package let storage: DefaultsStorage
    /// The store's layers above its back end (`DefaultsLayer`), or `nil` for a store without any.
    @usableFromInline package let layerStack: DefaultsLayerStack?
    private let errorHandlerID: UInt64?

    /// The file the store reads and writes, or `nil` for a store on etcd (see `location`).
    public var fileURL: URL? {
        storage.fileBackend.map { URL(fileURLWithPath: $0.file.path) }
    }

    /// Where the store keeps its values: a file, or an etcd cluster and prefix.
    public var location: DefaultsLocation { storage.backend.location }

    /// A store for the suite `suiteName`: the file `suiteName.json` in `directory`, by default in
    /// `defaultDirectory()` (`$XDG_CONFIG_HOME`, else `~/.config`, on Linux; `~/Library/Preferences`
    /// on macOS). Nothing is created until the first write, which makes the file and any missing
    /// directory.
    ///
    /// The suite name must be valid (see `isValidSuiteName(_:)`): an invalid one traps, as a
    /// programmer error. For a name that comes from input (a command line, a configuration file),
    /// use `init(validatingSuiteName:directory:watching:layers:secrets:errorHandler:)`, which throws instead.
    ///
    /// - Parameters:
    ///   - suiteName: a file name without its extension: not empty, no `/`, not `.` or `..`.
    ///   - directory: where the suite's file lives.
    ///   - watching: how other processes' writes are noticed.
    ///   - layers: read-only layers read before the file, the first first (see `DefaultsLayer`).
    ///   - secrets: the names of the keys whose values are secret, declared before the store reads
    ///     anything: never printed by the library (descriptions, dumps, mirrors, errors, standard
    ///     error), and a file this store creates is readable by its owner only (mode 0600). Secrecy
    ///     is process-wide and only grows (see `DefaultsKey.isSecret`).
    ///   - errorHandler: called with each problem (corrupt file, value of the wrong type, failed
    ///     write), on the thread that met it, once per distinct cause (a cause `flush()` or `update`
    ///     threw counts as told; once the problem is over, a new one is told again); with no
    ///     handler, problems are printed to standard error.
    public convenience init(
        suiteName: String,
        directory: URL? = nil,
        watching: Watching = .automatic,
        layers: [DefaultsLayer] = [],
        secrets: [String] = [],
        errorHandler: (@Sendable (DefaultsError) -> Void)? = nil
    ) {
        precondition(
            Self.isValidSuiteName(suiteName),
            "DefaultsStore(suiteName:): '\(suiteName)' is not a valid suite name (it must be a file name: not empty, no '/', not '.' or '..')"
        )
        let directory = directory ?? Self.defaultDirectory()
        self.init(
            fileURL: directory.appendingPathComponent(suiteName + ".json"), watching: watching, layers: layers, secrets: secrets,
            errorHandler: errorHandler)
    }

    /// A store for the suite `suiteName`, or an error if `suiteName` cannot name a suite: the
    /// throwing form of `init(suiteName:directory:watching:layers:secrets:errorHandler:)`, for names that come
    /// from input.
    ///
    /// ```swift
    /// let store = try DefaultsStore(validatingSuiteName: arguments.suite)
    /// ```
    ///
    /// - Parameters:
    ///   - suiteName: a file name without its extension (see `isValidSuiteName(_:)`).
    ///   - directory: where the suite's file lives; by default `defaultDirectory()`.
    ///   - watching: how other processes' writes are noticed.
    ///   - layers: read-only layers read before the file, the first first (see `DefaultsLayer`).
    ///   - secrets: the names of the keys whose values are secret (see
    ///     `init(fileURL:watching:layers:secrets:errorHandler:)`).
    ///   - errorHandler: called with each problem met later (see `init(fileURL:watching:layers:secrets:errorHandler:)`).
    /// - Throws: `DefaultsError` of kind `.invalidSuiteName` if `suiteName` is not valid.
    public convenience init(
        validatingSuiteName suiteName: String,
        directory: URL? = nil,
        watching: Watching = .automatic,
        layers: [DefaultsLayer] = [],
        secrets: [String] = [],
        errorHandler: (@Sendable (DefaultsError) -> Void)? = nil
    ) throws(DefaultsError) {
        let directory = directory ?? Self.defaultDirectory()
        guard Self.isValidSuiteName(suiteName) else {
            throw DefaultsError(
                .invalidSuiteName, location: .file(path: directory.appendingPathComponent(suiteName + ".json").path),
                reason:
                    "'\(suiteName)' is not a valid suite name (it must be a file name without its extension: not empty, no '/', no NUL, not '.' or '..')"
            )
        }
        self.init(
            suiteName: suiteName, directory: directory, watching: watching, layers: layers, secrets: secrets, errorHandler: errorHandler)
    }

    /// A store for the file at `fileURL`, created with its missing directories by the first write:
    /// opening, reading and observing a store create nothing (no directory, lock file or file).
    ///
    /// ```swift
    /// let store = DefaultsStore(
    ///     fileURL: URL(fileURLWithPath: "/srv/myapp/settings.json"),
    ///     watching: .polling(interval: .seconds(2)),
    ///     layers: [.directory(URL(fileURLWithPath: "/run/secrets"))],
    ///     secrets: ["apiToken", "dbPassword"],
    ///     errorHandler: { error in print("settings:", error) }
    /// )
    /// ```
    ///
    /// - Parameters:
    ///   - fileURL: the file (a `file:` URL; a relative path is taken from the current directory).
    ///   - watching: how other processes' writes are noticed.
    ///   - layers: read-only layers read before the file, the first first (see `DefaultsLayer`):
    ///     the command line, the environment, a directory of files, a `DefaultsMemoryLayer`.
    ///   - secrets: the names of the keys whose values are secret, declared before the store reads
    ///     anything: never printed by the library (descriptions, dumps, mirrors, errors, standard
    ///     error), and a file this store creates is readable by its owner only (mode 0600). Secrecy
    ///     is process-wide and only grows (see `DefaultsKey.isSecret`).
    ///   - errorHandler: called with each problem (corrupt file, value of the wrong type, failed
    ///     write), on the thread that met it, once per distinct cause (a cause `flush()` or `update`
    ///     threw counts as told; once the problem is over, a new one is told again); with no
    ///     handler, problems are printed to standard error.
    public convenience init(
        fileURL: URL, watching: Watching = .automatic, layers: [DefaultsLayer] = [], secrets: [String] = [],
        errorHandler: (@Sendable (DefaultsError) -> Void)? = nil
    ) {
        precondition(fileURL.isFileURL, "DefaultsStore(fileURL:): \(fileURL) is not a file URL")
        // Before anything is read: a problem met while loading must not print a secret.
        DefaultsKeyNames.markSecret(secrets)
        var path = fileURL.standardizedFileURL.path
        if !path.hasPrefix("/") {
            path = FileManager.default.currentDirectoryPath + "/" + path
        }
        var interval: Duration?
        if case .polling(let every) = watching { interval = every }
        let (storage, problems) = DefaultsStorageRegistry.storage(forPath: path, pollingInterval: interval)
        if !secrets.isEmpty { storage.fileBackend?.createsPrivateFile() }
        self.init(storage: storage, problems: problems, layers: layers, errorHandler: errorHandler)
    }

    /// A store on `storage` (of any back end) read through `layers`, telling `errorHandler` (or
    /// standard error) the `problems` met while opening it; their causes count as reported (see
    /// `DefaultsStorage.reportOnce`).
    package init(
        storage: DefaultsStorage, problems: [DefaultsError], layers: [DefaultsLayer] = [],
        errorHandler: (@Sendable (DefaultsError) -> Void)?
    ) {
        self.storage = storage
        self.layerStack = layers.isEmpty ? nil : DefaultsLayerStack(layers: layers, storage: storage, errorHandler: errorHandler)
        self.errorHandlerID = errorHandler.map { storage.addErrorHandler($0) }
        if errorHandler == nil { storage.countStoreWithoutHandler(1) }
        for problem in problems {
            storage.noteReported(problem)
            if let errorHandler { errorHandler(problem) } else { DefaultsStorage.printToStandardError(problem) }
        }
    }

    deinit {
        if let errorHandlerID { storage.removeErrorHandler(id: errorHandlerID) } else { storage.countStoreWithoutHandler(-1) }
    }

    /// Whether `name` can name a suite: a file name without its extension, so not empty, without
    /// `/` or NUL, and neither `.` nor `..`. Dots elsewhere are fine (`com.example.player`).
    ///
    /// `init(suiteName:)` traps on an invalid name; check a name from input with this first, or use
    /// `init(validatingSuiteName:)`, which throws.
    ///
    /// ```swift
    /// DefaultsStore.isValidSuiteName("com.example.player")   // true
    /// DefaultsStore.isValidSuiteName("../etc/passwd")        // false
    /// ```
    public static func isValidSuiteName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\u{0}")
    }

    // MARK: Values

    /// The value of `key`: its default while the key is absent.
    @inlinable
    public subscript<Value>(key: DefaultsKey<Value>) -> Value {
        get { value(for: key) }
        set { set(newValue, for: key) }
    }

    /// The value of `key`, or its default while the key is absent or when the file holds a value that
    /// does not decode as `Value` (reported to the error handler).
    @inlinable
    public func value<Value>(for key: DefaultsKey<Value>) -> Value {
        // Through the layers if the store has any (optional chaining borrows the stack, where a
        // binding would retain it).
        if let value = layerStack?.value(for: key) { return value }
        // A tracked observation's evaluation records the read (one load and a test otherwise).
        storage._reportExplicitRead(offset: key.offset, key: { DefaultsStorage._keyPath(at: key.offset) }, of: Void.self)
        return storage.value(for: key)
    }

    /// Whether the key has a value (set here or found in the file), as opposed to reading its default.
    public func hasValue<Value>(for key: DefaultsKey<Value>) -> Bool {
        storage._reportExplicitRead(offset: key.offset, key: { DefaultsStorage._keyPath(at: key.offset) }, of: Void.self)
        return storage.entry(for: key.name) != nil
    }

    /// Sets the value of `key`. The observers of `key` in this process (through any store on the
    /// same file) are called before this returns, on this thread; the file is written shortly after,
    /// off this thread (`flush()` waits for it).
    ///
    /// A value that JSON cannot hold (NaN or ±infinity, anywhere inside it) is stored in memory and
    /// reported to the error handler now (`.encodingFailed`, once while the key keeps such a value);
    /// it is not written, and `flush()` throws `.encodingFailed` naming the key until the key gets a
    /// value that can be written.
    @inlinable
    public func set<Value>(_ value: Value, for key: DefaultsKey<Value>) {
        if DefaultsStorage.isPlainlyEncodable(value) {
            storage.set(DefaultsStorage.Entry(typed: value, json: nil), for: key.name, offset: key.offset)
        } else {
            storage.setEncoding(value, for: key.name, offset: key.offset)
        }
    }

    /// Removes `key` from the store: it reads as its default again (observers see the default as the
    /// new value).
    public func removeValue<Value>(for key: DefaultsKey<Value>) {
        storage.set(nil, for: key.name, offset: key.offset)
    }

    /// Removes every key from the store.
    public func reset() {
        storage.removeAll()
    }

    /// Writes this process's pending changes to the file and returns when they are durable (file and
    /// directory fsynced), with another process's concurrent changes kept. On etcd: sends them and
    /// returns when etcd acknowledged every one, trying again while no member answers; once none
    /// answered for the store's timeout it throws `.unreachable`, and the changes it names are given
    /// up for good (never applied later; their keys take etcd's values again).
    ///
    /// - Throws: `DefaultsError`: `.writeFailed` if the file cannot be written (the changes stay in
    ///   memory and pending, and the next write or flush retries them); `.corruptFile` if the file
    ///   does not parse (nothing is written: the changes stay pending until it parses again, or
    ///   `replaceCorruptFile()`); `.encodingFailed` naming a
    ///   key whose value cannot be written as JSON (NaN or infinity inside it), after writing the
    ///   other changes.
    public func flush() throws(DefaultsError) {
        try storage.flush()
    }

    /// Replaces a file that does not parse with this store's last good values and pending changes,
    /// after copying it aside; returns the copy's path. If the file parses, this is `flush()`, and
    /// returns `nil`.
    ///
    /// A store never replaces a file it cannot parse on its own: a typo in a hand-edited file would
    /// cost every other key in it. It keeps its changes in memory instead (its observers saw them),
    /// reports `.corruptFile` once, and writes them, merged over the file's keys, as soon as the file
    /// parses again. This is the explicit choice to replace the file now (every write did so before):
    /// the broken file is kept beside it as `NAME.json.corrupt-YYYYMMDD-HHMMSS`, with
    /// the same permissions, and the error handler hears of it.
    ///
    /// ```swift
    /// do {
    ///     try store.flush()
    /// } catch where error.kind == .corruptFile {
    ///     let copy = try store.replaceCorruptFile()   // the operator said so
    /// }
    /// ```
    ///
    /// On etcd, where a value that is not JSON affects only its key, this is `flush()`.
    ///
    /// - Returns: where the broken file was copied, or `nil` if it parsed (or there was none).
    /// - Throws: `DefaultsError`: `.writeFailed` if the copy or the new file cannot be written
    ///   (nothing is replaced; the changes stay pending); the other errors of `flush()`.
    @discardableResult
    public func replaceCorruptFile() throws(DefaultsError) -> String? {
        try replaceCorruptFile(timeout: nil, notice: nil)
    }
}
