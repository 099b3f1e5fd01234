#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif
import Synchronization
import _KeyValueObservingShims

/// The package's one lock: non-copyable and owned by the value it guards, so it is destroyed
/// exactly once, when that value goes (there is no `destroy()` to call, and no copy to call it on).
///
/// Embedded directly where a type guards its own state (the observer registry, a progress node,
/// `Locked`); `Lock` is the same lock in a class, for state that several objects share.
///
/// Not recursive: never call out to user code while holding it. In debug builds, taking it twice on
/// one thread, or unlocking it on a thread that does not hold it, traps with a message instead of
/// deadlocking. No waiter spins without bound: it spins briefly, then sleeps in the kernel.
///
/// Two forms, one interface:
/// - the portable form, everywhere but x86_64 glibc Linux and with `KVO_PORTABLE`: a
///   `pthread_mutex_t` (error-checking in debug builds), `os_unfair_lock` on Darwin;
/// - the fast form (`_kvoFastPathsCompiled`), on x86_64 glibc Linux: a 32-bit word taken with one
///   compare-and-exchange and released with one exchange, where a waiter spins briefly and then
///   sleeps on the word (`futex(2)`), so that the uncontended lock and unlock are inlined rather
///   than two calls into the C library (progress nodes take one per level of every update).
///
/// Not `Synchronization.Mutex`: the thread sanitizer on Linux does not understand that one (its
/// atomics are compiled into the standard library, uninstrumented) and reports false races on
/// correctly locked code; it understands pthread mutexes, and the fast form's acquiring and
/// releasing atomics, which are compiled here.
#if arch(x86_64) && canImport(Glibc) && !KVO_PORTABLE
@usableFromInline
package struct PlatformLock: ~Copyable, @unchecked Sendable {
    // Invariant: `word` is 0 when the lock is free, else `taken`, with `sleepers` set while a waiter
    // may be asleep on it; it is only changed by `lock()` (from 0, acquiring, or adding `sleepers`)
    // and `unlock()` (to 0, releasing), so the accesses it guards are ordered between threads; the
    // kernel only reads it. `owner` (debug builds) is the holder's thread, written by the holder.
    @usableFromInline let word = Atomic<UInt32>(0)
    #if DEBUG
    @usableFromInline let owner = Atomic<UInt>(0)
    #endif

    @usableFromInline static var taken: UInt32 { 1 }
    @usableFromInline static var sleepers: UInt32 { 2 }

    /// Which form this build has (for `kvo-bench contention`).
    package static var form: String { "futex" }

    package init() {}

    @inlinable @inline(__always)
    package func lock() {
        if _slowPath(!word.compareExchange(expected: 0, desired: Self.taken, ordering: .acquiring).exchanged) {
            waitAndLock()
        }
        #if DEBUG
        owner.store(Self.thisThread, ordering: .relaxed)
        #endif
    }

    @inlinable @inline(__always)
    package func unlock() {
        #if DEBUG
        precondition(
            owner.load(ordering: .relaxed) == Self.thisThread && word.load(ordering: .relaxed) != 0,
            "Lock.unlock(): this thread does not hold the lock (unlock it on the thread that locked it, once)")
        owner.store(0, ordering: .relaxed)
        #endif
        if _slowPath(word.exchange(0, ordering: .releasing) & Self.sleepers != 0) {
            wakeOne()
        }
    }

    /// Spins a little (reading only, so that waiters do not fight over the cache line), then marks
    /// the word as slept on and sleeps until it changes, as long as the lock is taken. A thread that
    /// takes the lock after sleeping keeps the mark: another waiter may still be asleep.
    @usableFromInline @inline(never)
    func waitAndLock() {
        #if DEBUG
        precondition(
            owner.load(ordering: .relaxed) != Self.thisThread,
            "Lock.lock(): this thread already holds the lock; it is not recursive (release it before calling code that takes it again)")
        #endif
        for _ in 0..<100 {
            if word.load(ordering: .relaxed) == 0,
                word.compareExchange(expected: 0, desired: Self.taken, ordering: .acquiring).exchanged
            {
                return
            }
        }
        while true {
            let current = word.load(ordering: .relaxed)
            if current == 0 {
                if word.compareExchange(expected: 0, desired: Self.taken | Self.sleepers, ordering: .acquiring).exchanged { return }
                continue
            }
            if current & Self.sleepers == 0,
                !word.compareExchange(expected: current, desired: current | Self.sleepers, ordering: .relaxed).exchanged
            {
                continue
            }
            withUnsafePointer(to: word) { address in
                _kvo_futex_wait(UnsafeMutableRawPointer(mutating: address).assumingMemoryBound(to: UInt32.self), current | Self.sleepers)
            }
        }
    }

    @usableFromInline @inline(never)
    func wakeOne() {
        withUnsafePointer(to: word) { address in
            _kvo_futex_wake_one(UnsafeMutableRawPointer(mutating: address).assumingMemoryBound(to: UInt32.self))
        }
    }

    #if DEBUG
    @usableFromInline static var thisThread: UInt { _ThreadID.current.token }
    #endif
}
#else
@usableFromInline
package struct PlatformLock: ~Copyable, @unchecked Sendable {
    // Invariant: `pointer` is allocated and initialised in `init`, destroyed and freed in `deinit`
    // (once: the type is not copyable), and in between its pointee is only passed to the platform's
    // lock functions, which are thread-safe. A separate allocation because a mutex must not move,
    // and a non-copyable value may.
    #if canImport(Darwin)
    @usableFromInline let pointer: UnsafeMutablePointer<os_unfair_lock>
    /// Which form this build has (for `kvo-bench contention`).
    package static var form: String { "os_unfair_lock" }
    #else
    @usableFromInline let pointer: UnsafeMutablePointer<pthread_mutex_t>
    /// Which form this build has (for `kvo-bench contention`).
    package static var form: String { "pthread_mutex_t" }
    #endif

    package init() {
        pointer = .allocate(capacity: 1)
        #if canImport(Darwin)
        pointer.initialize(to: os_unfair_lock())
        #else
        pointer.initialize(to: pthread_mutex_t())
        #if DEBUG
        // Debug builds check every use (as swift-log's lock does): locking a lock this thread
        // already holds, or unlocking one it does not hold, fails instead of deadlocking or
        // corrupting the lock, and traps below with a message.
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        let error = pthread_mutex_init(pointer, &attributes)
        pthread_mutexattr_destroy(&attributes)
        #else
        let error = pthread_mutex_init(pointer, nil)
        #endif
        precondition(error == 0, "pthread_mutex_init failed with error \(error)")
        #endif
    }

    deinit {
        #if !canImport(Darwin)
        pthread_mutex_destroy(pointer)
        #endif
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }

    @inlinable
    package func lock() {
        #if canImport(Darwin)
        os_unfair_lock_lock(pointer)
        #else
        let error = pthread_mutex_lock(pointer)
        // Checked where the mutex is error-checking (debug builds): a plain mutex, initialised here,
        // reports no error (POSIX leaves a misuse of it undefined rather than reported).
        #if DEBUG
        precondition(
            error == 0,
            error == EDEADLK
                ? "Lock.lock(): this thread already holds the lock; it is not recursive (release it before calling code that takes it again)"
                : "pthread_mutex_lock failed with error \(error)")
        #else
        _ = error
        #endif
        #endif
    }

    @inlinable
    package func unlock() {
        #if canImport(Darwin)
        os_unfair_lock_unlock(pointer)
        #else
        let error = pthread_mutex_unlock(pointer)
        #if DEBUG
        precondition(
            error == 0,
            error == EPERM
                ? "Lock.unlock(): this thread does not hold the lock (unlock it on the thread that locked it, once)"
                : "pthread_mutex_unlock failed with error \(error)")
        #else
        _ = error
        #endif
        #endif
    }
}
#endif

extension PlatformLock {
    /// Runs `body` with the lock held. `body` must not call out to code that could take the lock again.
    @inlinable
    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A `PlatformLock` in a class, for a lock that several objects share by reference (a defaults
/// store's storage and its backends).
package final class Lock: Sendable {
    @usableFromInline let primitive = PlatformLock()

    package init() {}

    @inlinable
    package func lock() {
        primitive.lock()
    }

    @inlinable
    package func unlock() {
        primitive.unlock()
    }

    /// Runs `body` with the lock held. `body` must not call out to code that could take the lock again.
    @inlinable
    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        try primitive.withLock(body)
    }
}

/// A value and the `PlatformLock` that guards it, in one object: the package's one lock wrapper,
/// for values shared with `@Sendable` closures or between threads (the modules, the command-line
/// tool and the tests use it).
@usableFromInline
package final class Locked<Value>: @unchecked Sendable {
    // Invariant: `value` is only accessed inside `withLock`, with `lock` held.
    private let lock = PlatformLock()
    private var value: Value

    @usableFromInline
    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` on the value with the lock held. `body` must not take the lock again.
    @usableFromInline
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// The value now (a copy, read under the lock).
    package var current: Value {
        withLock { $0 }
    }
}
