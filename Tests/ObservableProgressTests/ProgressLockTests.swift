import Synchronization
import Testing
import TestSupport
@testable import ObservableProgress

/// The locks of progress nodes, taken by real threads: the one the nodes use (`_ProgressLock`) and,
/// on Linux, the alternatives `kvo-bench contention` compares it with.
@Suite("Progress node lock", .tags(.stress))
struct ProgressLockTests {
    @Test func eightThreadsIncrementingUnderTheNodeLockLoseNone() {
        check(Guarded<_ProgressLock>())
    }

    #if !canImport(Darwin)
    @Test func eightThreadsIncrementingUnderTheFutexLockLoseNone() {
        check(Guarded<_FutexLock>())
    }

    @Test func eightThreadsIncrementingUnderTheSpinningLockLoseNone() {
        check(Guarded<_SpinningLock>())
    }
    #endif

    /// 8 threads × 100,000 increments of a plain counter under the lock: none is lost, and no
    /// thread ever finds another inside the critical section.
    func check<L: TestedLock & ~Copyable>(_ guarded: Guarded<L>) {
        TestThread.run(8) { _ in
            for _ in 0..<100_000 { guarded.increment() }
        }
        #expect(guarded.lock.withLock { guarded.count } == 800_000)
        #expect(guarded.overlaps.load(ordering: .relaxed) == 0)
    }
}

protocol TestedLock: ~Copyable, SendableMetatype {
    init()
    func lock()
    func unlock()
}

extension TestedLock where Self: ~Copyable {
    func withLock<Result>(_ body: () -> Result) -> Result {
        lock()
        defer { unlock() }
        return body()
    }
}

extension _ProgressLock: TestedLock {}
#if !canImport(Darwin)
extension _FutexLock: TestedLock {}
extension _SpinningLock: TestedLock {}
#endif

/// A counter behind the lock, with a check of mutual exclusion: `inside` counts the threads in the
/// critical section, which must be 1 for the one that just entered.
final class Guarded<L: TestedLock & ~Copyable>: @unchecked Sendable {
    // Invariant: `count` is only accessed with `lock` held (the test's point is to check that).
    let lock = L()
    var count = 0
    let inside = Atomic<Int>(0)
    let overlaps = Atomic<Int>(0)

    func increment() {
        lock.lock()
        if inside.wrappingAdd(1, ordering: .relaxed).newValue != 1 { overlaps.wrappingAdd(1, ordering: .relaxed) }
        count &+= 1
        inside.wrappingSubtract(1, ordering: .relaxed)
        lock.unlock()
    }
}
