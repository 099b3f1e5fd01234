import KeyValueObserving
import Synchronization
import Testing
import TestSupport
@testable import ObservableProgress

/// The lock of progress nodes (the package's one lock, `PlatformLock`), taken by real threads.
@Suite("Progress node lock", .tags(.stress))
struct ProgressLockTests {
    @Test func eightThreadsIncrementingUnderTheNodeLockLoseNone() {
        check(Guarded<PlatformLock>())
    }

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

extension PlatformLock: TestedLock {}

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
