#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// Where diagnostics (`KeyValueObservingDiagnostic`) go. By default each distinct diagnostic (per
/// type and key, however many call sites register it) is printed once to standard error, naming the
/// first call site; install a handler to collect them instead, globally or for the duration of a
/// closure (tests use the latter).
///
/// ```swift
/// KeyValueObservingDiagnosticCenter.withHandler({ print("KVO:", $0.message) }) {
///     token = player.observe(\.balance) { _, _ in }   // `balance` is not @Observed
/// }
/// ```
public enum KeyValueObservingDiagnosticCenter {
    /// The process-wide handler, and the diagnostics already printed (without a handler).
    private static let state = Locked<(globalHandler: (@Sendable (KeyValueObservingDiagnostic) -> Void)?, printed: Set<String>)>(
        (nil, []))

    @TaskLocal
    private static var scopedHandler: (@Sendable (KeyValueObservingDiagnostic) -> Void)?

    /// Replaces the process-wide handler; `nil` restores the default (one line on standard error).
    public static func setHandler(_ handler: (@Sendable (KeyValueObservingDiagnostic) -> Void)?) {
        state.withLock { $0.globalHandler = handler }
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
        let (handler, isFirst): ((@Sendable (KeyValueObservingDiagnostic) -> Void)?, Bool) = state.withLock {
            let id = "\(diagnostic.kind)|\(diagnostic.objectType)|\(diagnostic.keyPath)"
            return ($0.globalHandler, $0.printed.insert(id).inserted)
        }
        if let handler {
            handler(diagnostic)
        } else if isFirst {
            writeLineToStandardError("KeyValueObserving: \(diagnostic.message)")
        }
    }
}

/// The former name of `KeyValueObservingDiagnosticCenter`, one letter away from the diagnostic itself.
@available(*, deprecated, renamed: "KeyValueObservingDiagnosticCenter")
public typealias KeyValueObservingDiagnostics = KeyValueObservingDiagnosticCenter
