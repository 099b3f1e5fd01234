import Dispatch
import KeyValueObserving

/// A clock for throttles that moves only when a test says so: `advance(by:)` runs the deliveries
/// that fall due, in deadline order, each on its queue, and returns when they have run. No test
/// sleeps to see a throttle work.
package final class ManualThrottleScheduler: _ThrottleScheduler, @unchecked Sendable {
    // Invariant: `current`, `scheduled`, `order` and `waiters` are accessed only with `lock` held;
    // the scheduled work and resumed tasks run without it.
    private let lock = Lock()
    private var current: Duration = .zero
    private var scheduled: [(deadline: Duration, order: Int, queue: DispatchQueue, work: @Sendable () -> Void)] = []
    private var order = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    package init() {}

    package func now() -> Duration {
        lock.withLock { current }
    }

    package func run(on queue: DispatchQueue, at deadline: Duration?, _ work: @escaping @Sendable () -> Void) {
        let resumed = lock.withLock {
            scheduled.append((max(deadline ?? current, current), order, queue, work))
            order += 1
            defer { waiters = [] }
            return waiters
        }
        for waiter in resumed { waiter.resume() }
    }

    /// The deliveries scheduled and not run yet.
    package var scheduledCount: Int {
        lock.withLock { scheduled.count }
    }

    /// Returns once a delivery is scheduled (at once if one is): a test waits with it for a task
    /// that will ask a throttled sequence for its next value.
    package func waitUntilScheduled() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let ready = lock.withLock {
                if !scheduled.isEmpty { return true }
                waiters.append(waiter)
                return false
            }
            if ready { waiter.resume() }
        }
    }

    /// Moves the clock forward by `duration`, running every delivery due by then (those they
    /// schedule included), each on its queue, one after the other.
    package func advance(by duration: Duration = .zero) {
        let target = lock.withLock { current + duration }
        while true {
            let due = lock.withLock { () -> (queue: DispatchQueue, work: @Sendable () -> Void)? in
                let next = scheduled.indices
                    .filter { scheduled[$0].deadline <= target }
                    .min { (scheduled[$0].deadline, scheduled[$0].order) < (scheduled[$1].deadline, scheduled[$1].order) }
                guard let next else {
                    current = target
                    return nil
                }
                let item = scheduled.remove(at: next)
                current = max(current, item.deadline)
                return (item.queue, item.work)
            }
            guard let due else { return }
            due.queue.sync(execute: due.work)
        }
    }
}
