#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A mistake found at registration that Foundation's KVO makes silently.
public struct KeyValueObservingDiagnostic: @unchecked Sendable, CustomStringConvertible {
    // Invariant: every stored property is immutable; key-path objects are immutable and safe to share.
    /// What is wrong.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        let name: String

        /// The observed key is not `@Observed` and reads no `@Observed` property: nothing can ever
        /// notify its observers.
        public static let unobservableKey = Kind(name: "unobservableKey")

        /// The observed key is computed from `@Observed` properties but is not itself `@Observed`:
        /// changes of its inputs do not notify its observers.
        public static let undeclaredDependencies = Kind(name: "undeclaredDependencies")

        public var description: String { name }
    }

    /// What is wrong.
    public let kind: Kind
    /// The type of the observed object.
    public let objectType: Any.Type
    /// The key that was observed.
    public let keyPath: AnyKeyPath
    /// The `@Observed` keys the observed key read at registration (empty for `.unobservableKey`).
    public let reads: [AnyKeyPath]
    /// Where `observe` was called.
    public let fileID: String
    public let line: UInt
    /// One line that names the key and the fix.
    public let message: String

    public var description: String { message }
}

/// Where diagnostics go. By default each distinct diagnostic (per type, key and call site) is printed
/// once to standard error; install a handler to collect them instead, globally or for the duration
/// of a closure (tests use the latter).
///
/// ```swift
/// KeyValueObservingDiagnostics.withHandler({ print("KVO:", $0.message) }) {
///     token = player.observe(\.balance) { _, _ in }   // `balance` is not @Observed
/// }
/// ```
public enum KeyValueObservingDiagnostics {
    private static let lock = Lock()
    // Invariant: only read and written with `lock` held.
    nonisolated(unsafe) private static var globalHandler: (@Sendable (KeyValueObservingDiagnostic) -> Void)?
    // Invariant: only read and written with `lock` held.
    nonisolated(unsafe) private static var printed: Set<String> = []

    @TaskLocal
    private static var scopedHandler: (@Sendable (KeyValueObservingDiagnostic) -> Void)?

    /// Replaces the process-wide handler; `nil` restores the default (one line on standard error).
    public static func setHandler(_ handler: (@Sendable (KeyValueObservingDiagnostic) -> Void)?) {
        lock.withLock { globalHandler = handler }
    }

    /// Runs `operation` with `handler` receiving the diagnostics raised by it (on this thread or task,
    /// and the child tasks it creates), instead of the process-wide handler.
    public static func withHandler<Result>(
        _ handler: @escaping @Sendable (KeyValueObservingDiagnostic) -> Void,
        operation: () throws -> Result
    ) rethrows -> Result {
        try $scopedHandler.withValue(handler, operation: operation)
    }

    static func report(_ diagnostic: KeyValueObservingDiagnostic) {
        if let handler = scopedHandler {
            handler(diagnostic)
            return
        }
        let (handler, isFirst): ((@Sendable (KeyValueObservingDiagnostic) -> Void)?, Bool) = lock.withLock {
            let id = "\(diagnostic.kind)|\(diagnostic.objectType)|\(diagnostic.keyPath)|\(diagnostic.fileID):\(diagnostic.line)"
            return (globalHandler, printed.insert(id).inserted)
        }
        if let handler {
            handler(diagnostic)
        } else if isFirst {
            var line = "KeyValueObserving: \(diagnostic.message)\n"
            line.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
        }
    }
}
