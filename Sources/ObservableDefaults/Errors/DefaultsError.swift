#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// A problem with a defaults file, an etcd cluster or a stored value, reported to a store's error
/// handler (see `DefaultsStore.init(fileURL:watching:layers:secrets:errorHandler:)`) and thrown by
/// `DefaultsStore.flush()`.
///
/// None of these stops the store: it keeps the last good values in memory and keeps serving reads
/// and writes, so a broken file, a full disk or an unreachable cluster never crashes the program.
/// `location` says which file or which etcd cluster and prefix the problem concerns.
public struct DefaultsError: Error, Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// What went wrong.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        let name: String

        /// The file is not valid JSON or not a JSON object. `line`, `column` and `byteOffset` say
        /// where; the values read before stay in memory (`keepsLastGoodValues` says whether there
        /// were any). The store never replaces a file it cannot parse: its changes stay in memory
        /// (`flush()` and `update` throw this) and are written, merged over the file's keys, as soon
        /// as the file parses again; or, if asked with `DefaultsStore.replaceCorruptFile()`, after
        /// the broken file was copied aside (`corruptCopyPath`). For a store on etcd: the value of
        /// `key` is not valid JSON (someone wrote it without this library); it affects that key only:
        /// the key keeps its last good value (if it had one) until a valid one is written, a `set`
        /// or removal of the key replaces it, and `update` of it throws this error.
        public static let corruptFile = Kind(name: "corruptFile")
        /// The file holds a value for `key` that does not decode as the key's type; the key's default
        /// was returned. `found` is the value in the file.
        public static let typeMismatch = Kind(name: "typeMismatch")
        /// The file or its directory could not be read (`errno` says why).
        public static let readFailed = Kind(name: "readFailed")
        /// The file could not be written (read-only or missing directory, full disk: `errno` says
        /// which). The changes stay in memory and are written by the next successful write.
        public static let writeFailed = Kind(name: "writeFailed")
        /// A value could not be encoded as JSON: NaN or ±infinity inside it (JSON has neither), or
        /// its `Encodable` conformance threw. `key` names the key.
        public static let encodingFailed = Kind(name: "encodingFailed")
        /// The path names something the store refuses to read or write: not a regular file (a FIFO,
        /// a device, a directory, a socket), or a symbolic link whose target does not exist (nothing
        /// is created through a link). Nothing is read from or written to it.
        public static let unsupportedFile = Kind(name: "unsupportedFile")
        /// The file holds a key twice in one object (`line`, `column` and `byteOffset` point at the
        /// later one). The last value is used; since a write keeps only that one, the file is copied
        /// aside (`corruptCopyPath`) before this process writes it.
        public static let duplicateKey = Kind(name: "duplicateKey")
        /// A suite name that cannot name a file (`DefaultsStore(validatingSuiteName:)`); `path` is
        /// the file it would have named.
        public static let invalidSuiteName = Kind(name: "invalidSuiteName")
        /// (etcd) No member of the cluster answered in time: every endpoint refused the connection,
        /// was unknown or timed out. Changes stay in memory and are sent when a member answers.
        public static let unreachable = Kind(name: "unreachable")
        /// (etcd) The user name or password was refused. `reason` names the user, never the password.
        public static let authenticationFailed = Kind(name: "authenticationFailed")
        /// (etcd) The user may not read or write the store's prefix (etcd's role permissions).
        public static let permissionDenied = Kind(name: "permissionDenied")
        /// (etcd) The cluster answered with an error, or with a reply that is not etcd's (`reason`
        /// says which); a change it refused is dropped and the store reads the prefix again.
        public static let remoteFailed = Kind(name: "remoteFailed")
        /// (etcd) An endpoint cannot name an etcd member: not an `http` or `https` URL with a host,
        /// a URL with a user or password in it (give those as credentials), or `https` when the
        /// system's OpenSSL or the trusted certificates file cannot be loaded.
        public static let invalidEndpoint = Kind(name: "invalidEndpoint")
        /// The process exited with changes that were never written (or acknowledged): the last
        /// write failed (a file that does not parse, an unwritable directory, no etcd member
        /// answering). `reason` says how many, which keys and why; `key` names the key if there is
        /// one. Reported once, at exit.
        public static let changesLost = Kind(name: "changesLost")
        /// One of the store's layers (`DefaultsLayer`) holds a value of `key` that does not decode
        /// for its type (the next layer answers; `found` is the text, unless the key is secret), or
        /// cannot be read as a whole (an unreadable file in a directory layer, two keys that map to
        /// one environment variable). The reason names the layer; it never holds a value.
        public static let layerProblem = Kind(name: "layerProblem")
        /// A configuration type (`DefaultsStore.decode(_:strictly:)`) does not decode:
        /// `configurationProblems` lists each property that failed (a value missing, or one that
        /// does not decode, with the layer and the key), never a secret's value.
        public static let invalidConfiguration = Kind(name: "invalidConfiguration")

        public var description: String { name }
    }

    /// What went wrong.
    public let kind: Kind
    /// Where the values concerned live: a file, or an etcd cluster and prefix.
    public let location: DefaultsLocation
    /// The defaults file concerned, or `nil` for a store on etcd (see `location`).
    public var path: String? {
        if case .file(let path) = location { path } else { nil }
    }
    /// The key concerned, for `.typeMismatch` and `.encodingFailed`.
    public let key: String?
    /// For `.corruptFile` and `.duplicateKey`: the line (1-based) of the problem.
    public let line: Int?
    /// For `.corruptFile` and `.duplicateKey`: the column (1-based, in bytes) of the problem.
    public let column: Int?
    /// For `.corruptFile` and `.duplicateKey`: the byte offset (0-based) of the problem.
    public let byteOffset: Int?
    /// For `.typeMismatch` and `.layerProblem`: the value found, as JSON (in the file, etcd) or as
    /// text (a layer); `<redacted>` for a secret key (declared with `secrets:` or
    /// `DefaultsKey.isSecret`) or a value of a secret layer (`DefaultsLayer.isSecret`), and then
    /// `reason` quotes no part of it either.
    public let found: String?
    /// For `.readFailed` and `.writeFailed`: the system error number.
    public let errno: Int32?
    /// For `.corruptFile` and `.duplicateKey`: where the file was copied before it was overwritten,
    /// once it was.
    public let corruptCopyPath: String?
    /// The cause in words.
    public let reason: String
    /// For `.corruptFile`: whether the store holds values read from an earlier, good version of the
    /// file (`false` when the file was already broken when the store opened it).
    public internal(set) var keepsLastGoodValues = true
    /// For `.invalidConfiguration`: each property that failed, in the order the type decodes them.
    public internal(set) var configurationProblems: [DefaultsConfigurationProblem] = []

    /// An error about the store at `location` (a back end's errors, and those of values of any store).
    package init(
        _ kind: Kind,
        location: DefaultsLocation,
        key: String? = nil,
        line: Int? = nil,
        column: Int? = nil,
        byteOffset: Int? = nil,
        found: String? = nil,
        isSecret: Bool = false,
        errno: Int32? = nil,
        corruptCopyPath: String? = nil,
        reason: String
    ) {
        self.kind = kind
        self.location = location
        self.key = key
        self.line = line
        self.column = column
        self.byteOffset = byteOffset
        self.errno = errno
        self.corruptCopyPath = corruptCopyPath
        // A secret's value is never kept: not as `found`, not quoted in the reason (a decoding
        // error's description can quote the value it refused).
        if let found, isSecret || key.map(DefaultsKeyNames.isSecret) == true {
            self.found = DefaultsKeyNames.redacted
            self.reason = Self.redacting(found, in: reason)
        } else {
            self.found = found
            self.reason = reason
        }
    }

    /// `reason` with every occurrence of `found` (JSON or text), and of the string it encodes,
    /// replaced by `<redacted>`.
    static func redacting(_ found: String, in reason: String) -> String {
        var candidates = [found]
        if case .string(let text)? = try? JSONValue.parse(found) { candidates.append(text) }
        var reason = reason
        for candidate in candidates where !candidate.isEmpty {
            reason = reason.replacing(candidate, with: DefaultsKeyNames.redacted)
        }
        return reason
    }

    /// The lock file is held by another process: the write did not start (it is tried again).
    static func lockContention(path: String, lockPath: String) -> DefaultsError {
        DefaultsError(
            .writeFailed, location: .file(path: path), errno: EWOULDBLOCK, reason: "the lock file \(lockPath) is held by another process")
    }

    /// Whether this is `lockContention`: not a failure, a reason to try again shortly.
    var isLockContention: Bool {
        kind == .writeFailed && errno == EWOULDBLOCK
    }

    /// A broken file seen under the lock file that may be another program's in-place rewrite (truncate,
    /// then write, taking no lock) caught half-way: the write did not start (it looks again shortly).
    static func suspectedCorruption(path: String) -> DefaultsError {
        DefaultsError(
            .corruptFile, location: .file(path: path), errno: EBUSY,
            reason: "the file is broken, perhaps half-way through another program's rewrite")
    }

    /// Whether this is `suspectedCorruption`: not reported, a reason to look again shortly.
    var isSuspectedCorruption: Bool {
        kind == .corruptFile && errno == EBUSY
    }

    /// `found` and `reason` as printed: redacted again if the key was declared secret after the
    /// error was made (secrecy only grows).
    private var shown: (found: String?, reason: String) {
        guard let found, found != DefaultsKeyNames.redacted, let key, DefaultsKeyNames.isSecret(key) else { return (found, reason) }
        return (DefaultsKeyNames.redacted, Self.redacting(found, in: reason))
    }

    /// One line naming the file (or the etcd cluster and prefix), the place or key, and the cause.
    public var description: String {
        let (found, reason) = shown
        let path = location.description
        switch kind {
        case .corruptFile where self.path == nil:
            return "\(path): the value of key '\(key ?? "")' is not valid JSON: \(reason); write or delete the key to replace it"
        case .corruptFile:
            let kept = keepsLastGoodValues ? "; keeping the last good values" : ""
            let copy = corruptCopyPath.map { "; the broken file was copied to \($0) and replaced" } ?? ""
            return "\(path)\(place): corrupt defaults file: \(reason)\(kept)\(copy)"
        case .typeMismatch:
            return "\(path): value of key '\(key ?? "")' is \(found ?? "?"), \(reason); using the key's default"
        case .encodingFailed:
            return "\(path): cannot encode the value of key '\(key ?? "")': \(reason)"
        case .duplicateKey:
            let copy = corruptCopyPath.map { "; the file was copied to \($0) before this process rewrote it" } ?? ""
            return "\(path)\(place): \(reason)\(copy)"
        case .unsupportedFile:
            return "\(path): not usable as a defaults file: \(reason)"
        case .invalidSuiteName:
            return reason
        case .changesLost, .layerProblem:
            return "\(path): \(reason)"
        case .invalidConfiguration:
            return "\(path): \(reason):" + configurationProblems.map { "\n  - \($0)" }.joined()
        case .unreachable, .authenticationFailed, .permissionDenied, .remoteFailed, .invalidEndpoint:
            let about = key.map { " (key '\($0)')" } ?? ""
            return "\(path)\(about): \(reason)"
        default:
            return "\(path): \(kind == .writeFailed ? "cannot write" : "cannot read") defaults file: \(reason)"
        }
    }

    /// What `dump` and `Mirror` show: the fields, with a secret's value redacted as in `description`.
    public var customMirror: Mirror {
        let (found, reason) = shown
        return Mirror(
            self,
            children: [
                "kind": kind, "location": location, "key": key as Any, "line": line as Any, "column": column as Any,
                "byteOffset": byteOffset as Any, "found": found as Any, "errno": errno as Any, "corruptCopyPath": corruptCopyPath as Any,
                "reason": reason, "keepsLastGoodValues": keepsLastGoodValues, "configurationProblems": configurationProblems,
            ],
            displayStyle: .struct)
    }

    /// `:LINE:COLUMN (byte OFFSET)` where the error has a place in the file, else empty.
    private var place: String {
        line.map { ":\($0):\(column ?? 0) (byte \(byteOffset ?? 0))" } ?? ""
    }
}
