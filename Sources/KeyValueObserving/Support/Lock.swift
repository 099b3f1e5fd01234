#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A mutual-exclusion lock over `pthread_mutex_t` (`os_unfair_lock` on Darwin).
///
/// We use our own lock rather than `Synchronization.Mutex` because the thread sanitizer on Linux does
/// not understand `Mutex` (futex based) and reports false races on correctly locked code, while it
/// does understand pthread mutexes. The lock is not recursive: never call out to user code while
/// holding it. In debug builds the mutex is error-checking (`PTHREAD_MUTEX_ERRORCHECK`), so taking
/// it twice on one thread, or unlocking it on a thread that does not hold it, traps with a message
/// instead of deadlocking.
package final class Lock: @unchecked Sendable {
    // Invariant: `primitive` is allocated in `init`, destroyed in `deinit` and otherwise only
    // touched by `lock()`/`unlock()`, which are themselves thread-safe.
    @usableFromInline
    let primitive: LockPrimitive

    package init() {
        primitive = LockPrimitive()
    }

    deinit {
        primitive.destroy()
    }

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
        primitive.lock()
        defer { primitive.unlock() }
        return try body()
    }
}

/// The raw lock, for types that embed it to save an allocation and an indirection. The owner calls
/// `destroy()` exactly once, in its `deinit`.
@usableFromInline
package struct LockPrimitive: @unchecked Sendable {
    // Invariant: the pointee is only accessed through the platform lock functions, which are
    // thread-safe; the pointer itself never changes after init.
    #if canImport(Darwin)
    @usableFromInline let pointer: UnsafeMutablePointer<os_unfair_lock>
    #else
    @usableFromInline let pointer: UnsafeMutablePointer<pthread_mutex_t>
    #endif

    package init() {
        #if canImport(Darwin)
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: os_unfair_lock())
        #else
        pointer = .allocate(capacity: 1)
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

    package func destroy() {
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
        precondition(
            error == 0,
            error == EDEADLK
                ? "Lock.lock(): this thread already holds the lock; it is not recursive (release it before calling code that takes it again)"
                : "pthread_mutex_lock failed with error \(error)")
        #endif
    }

    @inlinable
    package func unlock() {
        #if canImport(Darwin)
        os_unfair_lock_unlock(pointer)
        #else
        let error = pthread_mutex_unlock(pointer)
        precondition(
            error == 0,
            error == EPERM
                ? "Lock.unlock(): this thread does not hold the lock (unlock it on the thread that locked it, once)"
                : "pthread_mutex_unlock failed with error \(error)")
        #endif
    }
}

/// A value behind a `Lock`: the package's one lock wrapper, for values shared with `@Sendable`
/// closures or between threads (the modules, the command-line tool and the tests use it).
@usableFromInline
package final class Locked<Value>: @unchecked Sendable {
    // Invariant: `value` is only accessed inside `withLock`, with `lock` held.
    private let lock = Lock()
    private var value: Value

    @usableFromInline
    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` on the value with the lock held. `body` must not take the lock again.
    @usableFromInline
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }

    /// The value now (a copy, read under the lock).
    package var current: Value {
        withLock { $0 }
    }
}
