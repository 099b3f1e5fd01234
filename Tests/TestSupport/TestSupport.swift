import KeyValueObserving

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Helpers shared by the test targets.

// Values shared with `@Sendable` handlers use the package's `Locked` (KeyValueObserving).

extension Locked where Value: RangeReplaceableCollection {
    package func append(_ element: Value.Element) {
        withLock { $0.append(element) }
    }
}

/// Counts calls to a handler.
package typealias Counter = Locked<Int>

extension Locked where Value == Int {
    /// Adds one and returns the new count.
    @discardableResult
    package func increment() -> Int {
        withLock { count -> Int in
            count += 1
            return count
        }
    }
}

/// A real OS thread, joined explicitly.
public final class TestThread: @unchecked Sendable {
    // Invariant: `thread` is written once in init before any other access and read only by `join()`.
    private var thread: pthread_t

    public init(_ body: @escaping @Sendable () -> Void) {
        final class Box {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        #if canImport(Glibc)
        var thread = pthread_t()
        #else
        var thread: pthread_t?
        #endif
        let result = pthread_create(
            &thread, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, box)
        precondition(result == 0, "pthread_create failed with error \(result)")
        #if canImport(Glibc)
        self.thread = thread
        #else
        self.thread = thread!
        #endif
    }

    public func join() {
        let result = pthread_join(thread, nil)
        precondition(result == 0, "pthread_join failed with error \(result)")
    }

    /// Runs `count` threads, each with its index, and waits for all of them.
    public static func run(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let threads = (0..<count).map { index in TestThread { body(index) } }
        threads.forEach { $0.join() }
    }
}

/// An identifier of the calling thread that can be compared across threads.
public func currentThreadID() -> UInt {
    #if canImport(Glibc)
    return UInt(pthread_self())
    #else
    return UInt(bitPattern: pthread_self())
    #endif
}

/// An object whose deallocation a `weak` reference reveals.
public final class Canary: Sendable {
    public init() {}
}

/// A small deterministic random number generator (SplitMix64), so a failing run's choices repeat.
public struct SplitMix: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
