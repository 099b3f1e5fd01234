#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import KeyValueObserving
import Synchronization

/// The lock of one progress node: guards a few dozen instructions of bookkeeping per update, and
/// every update of a tree takes one per level, so its uncontended cost is most of what an update
/// costs beyond its arithmetic.
///
/// On Linux, an `Atomic` flag: taken with one compare-and-exchange (acquiring) and released with
/// one store (releasing), where a `pthread_mutex_t` costs two calls and about 50 instructions more
/// per level (measured with kvo-bench under callgrind). The thread sanitizer understands the
/// acquire/release pairs exactly (it misreads only `Synchronization.Mutex`). A thread that finds it
/// taken spins briefly and then yields its core until it is free: critical sections are short and
/// never call out, so the wait is short unless the holder was preempted, and yielding lets it run.
/// On Darwin, `os_unfair_lock` (the package's `LockPrimitive`), which the system's scheduler can
/// boost past priority inversions, as a spinning lock cannot.
///
/// Not recursive; never held while calling out (handlers, user closures, another node's lock).
struct _ProgressLock: ~Copyable, @unchecked Sendable {
    // Invariant: `taken` is only changed by `lock()` (false to true, acquiring) and `unlock()`
    // (true to false, releasing), so the accesses it guards are ordered between threads; the
    // Darwin lock's pointer is only passed to the platform lock functions, and freed in `deinit`.
    #if canImport(Darwin)
    private let primitive = LockPrimitive()
    #else
    private let taken = Atomic<Bool>(false)
    #endif

    init() {}

    deinit {
        #if canImport(Darwin)
        primitive.destroy()
        #endif
    }

    @inline(__always)
    func lock() {
        #if canImport(Darwin)
        primitive.lock()
        #else
        if _fastPath(taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged) { return }
        waitAndLock()
        #endif
    }

    @inline(__always)
    func unlock() {
        #if canImport(Darwin)
        primitive.unlock()
        #else
        taken.store(false, ordering: .releasing)
        #endif
    }

    #if !canImport(Darwin)
    /// Spins a little (reading only, so the waiting cores do not fight over the cache line), then
    /// yields the core between attempts.
    @inline(never)
    private func waitAndLock() {
        var attempts = 0
        while true {
            if !taken.load(ordering: .relaxed),
                taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
            {
                return
            }
            attempts &+= 1
            if attempts > 100 { sched_yield() }
        }
    }
    #endif
}
