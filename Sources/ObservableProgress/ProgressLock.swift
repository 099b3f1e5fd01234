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
/// On Linux, `_SpinningLock`: an `Atomic` flag taken with one compare-and-exchange (acquiring) and
/// released with one store (releasing); a thread that finds it taken spins briefly, then yields its
/// core (`sched_yield`) between attempts: critical sections are short and never call out, so the
/// wait is short unless the holder was preempted, and yielding lets it run. The thread sanitizer
/// understands the acquire/release pairs exactly (it misreads only `Synchronization.Mutex`). On
/// Darwin, `os_unfair_lock` (the package's `LockPrimitive`), which the system's scheduler can boost
/// past priority inversions, as a spinning lock cannot.
///
/// Chosen by measurement, against a lock that sleeps in the kernel (`_FutexLock`) and the package's
/// pthread `Lock`, each built into the nodes in turn (`-Xswiftc -DKVO_PROGRESS_LOCK_FUTEX`,
/// `-DKVO_PROGRESS_LOCK_PTHREAD`, to measure again):
/// - on the gate (`kvo-bench gate`: progress-leaf-unobserved, -increment and -observed-root, against
///   Benchmarks/thresholds.json) the futex lock costs more per level (its release is an exchange
///   and a test where this one's is a store) and goes over the thresholds; the pthread lock costs
///   two calls more per level and goes far over them;
/// - timed with `kvo-bench contention` (8 threads, 2 cores, 2026-12-02; wall ns per update, medians
///   of 15 rounds, ranges wide on a shared machine): one node unobserved, spin 8–13, futex 11–24,
///   pthread 41–45; observed, spin 45–106, futex 42–105, pthread 102–110; the leaves of an observed
///   tree, spin 41–150, futex 86–150, pthread 111; the lock alone, spin 5–6 and futex 5–11 (CPU
///   time the same: the spinning waiters did not burn more), pthread 12–35.
/// The spinning lock wins or ties everywhere, so it stays.
///
/// Not recursive; never held while calling out (handlers, user closures, another node's lock).
package struct _ProgressLock: ~Copyable, @unchecked Sendable {
    // Invariant: the wrapped lock is only taken and released through `lock()` and `unlock()`;
    // the Darwin (or pthread) lock's pointer is only passed to the platform lock functions, and
    // freed in `deinit`.
    #if canImport(Darwin) || KVO_PROGRESS_LOCK_PTHREAD
    @usableFromInline let primitive = LockPrimitive()
    /// Which lock the nodes of this build use (for `kvo-bench contention`).
    package static var implementation: String { "pthread" }
    #elseif KVO_PROGRESS_LOCK_FUTEX
    @usableFromInline let primitive = _FutexLock()
    package static var implementation: String { "futex" }
    #else
    @usableFromInline let primitive = _SpinningLock()
    package static var implementation: String { "spin" }
    #endif

    package init() {}

    #if canImport(Darwin) || KVO_PROGRESS_LOCK_PTHREAD
    deinit {
        primitive.destroy()
    }
    #endif

    @inlinable @inline(__always)
    package func lock() {
        primitive.lock()
    }

    @inlinable @inline(__always)
    package func unlock() {
        primitive.unlock()
    }
}

#if !canImport(Darwin)
/// A lock in one `Atomic<UInt32>` that waits in the kernel, measured against `_SpinningLock` by
/// `kvo-bench contention` (see `_ProgressLock`): 0 free, 1 taken, 2 taken with
/// (possibly) a sleeping waiter (Drepper's "Futexes are tricky", mutex 2). Taken with one
/// compare-and-exchange (acquiring), released with one exchange (releasing), which calls the kernel
/// only when a waiter may be asleep.
package struct _FutexLock: ~Copyable, @unchecked Sendable {
    // Invariant: `word` is only changed by `lock()` (acquiring) and `unlock()` (releasing), so the
    // accesses it guards are ordered between threads; the kernel only reads it (FUTEX_WAIT).
    @usableFromInline let word = Atomic<UInt32>(0)

    package init() {}

    @inlinable @inline(__always)
    package func lock() {
        if _fastPath(word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged) { return }
        waitAndLock()
    }

    @inlinable @inline(__always)
    package func unlock() {
        if _slowPath(word.exchange(0, ordering: .releasing) == 2) { wake() }
    }

    /// Spins a little (reading only), then marks the lock contended and sleeps until it is free.
    @usableFromInline @inline(never)
    func waitAndLock() {
        for _ in 0..<64 {
            if word.load(ordering: .relaxed) == 0,
                word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged
            {
                return
            }
        }
        while word.exchange(2, ordering: .acquiring) != 0 {
            withUnsafePointer(to: word) { _ = _Futex.call(UnsafeMutableRawPointer(mutating: $0), _Futex.waitPrivate, 2) }
        }
    }

    @usableFromInline @inline(never)
    func wake() {
        withUnsafePointer(to: word) { _ = _Futex.call(UnsafeMutableRawPointer(mutating: $0), _Futex.wakePrivate, 1) }
    }
}

/// The futex system call: `syscall(SYS_futex, address, operation, value, nil)`. `syscall` is
/// variadic, which Swift does not import; on Linux's x86-64 and arm64 calling conventions, integer
/// and pointer arguments of a variadic call are passed as in a plain call, so the function is
/// called through a plain C function type.
enum _Futex {
    typealias Call = @convention(c) (Int, UnsafeMutableRawPointer, Int32, UInt32, UnsafeRawPointer?) -> Int

    static let waitPrivate: Int32 = 128  // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
    static let wakePrivate: Int32 = 129  // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
    #if arch(x86_64)
    static let number = 202
    #elseif arch(arm64) || arch(riscv64)
    static let number = 98
    #endif

    // Read-only after its lazy, thread-safe initialisation.
    private static let syscall: Call = unsafeBitCast(dlsym(nil, "syscall")!, to: Call.self)

    static func call(_ address: UnsafeMutableRawPointer, _ operation: Int32, _ value: UInt32) -> Int {
        syscall(number, address, operation, value, nil)
    }
}

/// The lock of progress nodes on Linux (see `_ProgressLock`): an `Atomic` flag taken with one
/// compare-and-exchange and released with one store; a thread that finds it taken spins briefly
/// and then calls `sched_yield` between attempts.
package struct _SpinningLock: ~Copyable, @unchecked Sendable {
    // Invariant: `taken` is only changed by `lock()` (false to true, acquiring) and `unlock()`
    // (true to false, releasing), so the accesses it guards are ordered between threads.
    @usableFromInline let taken = Atomic<Bool>(false)

    package init() {}

    @inlinable @inline(__always)
    package func lock() {
        if _fastPath(taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged) { return }
        waitAndLock()
    }

    @inlinable @inline(__always)
    package func unlock() {
        taken.store(false, ordering: .releasing)
    }

    /// Spins a little (reading only, so the waiting cores do not fight over the cache line), then
    /// yields the core between attempts.
    @usableFromInline @inline(never)
    func waitAndLock() {
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
}
#endif
