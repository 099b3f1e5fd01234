import Dispatch

/// The throttle behind `observe(_:throttledTo:on:handler:)` and `values(for:throttledTo:)`, for every
/// observable key and for `ObservableProgress`: changes are coalesced into at most one delivery per
/// interval, always ending on the latest value, an `Equatable` value never delivered twice in a row,
/// one delivery at a time.
///
/// Each change hands the throttle its new value (`notify`), on the thread that made the change: the
/// observed objects are not `Sendable`, so the value is captured there and never read again on the
/// delivery queue. A throttle made with `read` (for `Sendable` objects such as `ObservableProgress`,
/// whose notifications from several threads can arrive out of order) reads the current value when
/// it delivers instead, and falls back to the notified one once the object is gone.
///
/// A delivery goes either to a handler, on the throttle's queue, or to the task waiting in a
/// throttled sequence's `next()` (`Target.demand`): then a value is delivered only when one is
/// asked for, and the interval counts from the previous value taken, so a consumer that falls
/// behind is not handed two values in a row.
package final class _Throttle<Value: Sendable>: @unchecked Sendable {
    // Invariant: `state` is accessed only with `lock` held; every other property is immutable. No
    // handler, `read`, `isDuplicate`, continuation or value's deinit runs with the lock held: what
    // they need is taken out under the lock and used after it.
    private let lock = Lock()
    private var state: State
    private let interval: Duration
    private let queue: DispatchQueue
    private let scheduler: any _ThrottleScheduler
    private let isDuplicate: (@Sendable (Value, Value) -> Bool)?
    private let read: (@Sendable () -> Value?)?
    private let target: Target

    /// Where deliveries go.
    package enum Target: Sendable {
        /// To a handler, on the throttle's queue.
        case handler(@Sendable (Value) -> Void)
        /// To the task waiting in a throttled sequence's `next()`.
        case demand
    }

    package init(
        interval: Duration,
        queue: DispatchQueue,
        scheduler: any _ThrottleScheduler,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        read: (@Sendable () -> Value?)? = nil,
        target: Target
    ) {
        self.interval = interval
        self.queue = queue
        self.scheduler = scheduler
        self.isDuplicate = isDuplicate
        self.read = read
        self.target = target
        if case .demand = target {
            state = State(onDemand: true)
        } else {
            state = State(onDemand: false)
        }
    }

    /// On the thread that made a change: `value` is the new value. Schedules a delivery unless one
    /// is scheduled (or, on demand, none is asked for).
    package func notify(_ value: Value) {
        lock.lock()
        guard !state.isStopped, !state.isEnding else {
            lock.unlock()
            return
        }
        state.isDirty = true
        let replaced = state.latest
        state.latest = value
        let next = state.scheduleIfDue(interval: interval)
        lock.unlock()
        withExtendedLifetime(replaced) {}
        start(next)
    }

    /// The observation ended (its token was invalidated, or the sequence's consumer went away):
    /// nothing more is delivered, a pending delivery is dropped, a waiting task gets `nil`.
    package func stop() {
        lock.lock()
        state.isStopped = true
        let dropped = state.latest
        state.latest = nil
        let waiter = state.waiter
        state.waiter = nil
        lock.unlock()
        withExtendedLifetime(dropped) {}
        waiter?.resume(returning: nil)
    }

    /// The observed object is gone: what is pending is still delivered, then a sequence ends.
    package func end() {
        lock.lock()
        state.isEnding = true
        let ended = state.endIfDone()
        lock.unlock()
        ended?.resume(returning: nil)
    }

    /// From a throttled sequence's `next()`: `waiter` gets the next value, or `nil` at the end.
    package func demand(_ waiter: CheckedContinuation<Value?, Never>) {
        lock.lock()
        if state.isStopped || state.hasEnded {
            lock.unlock()
            waiter.resume(returning: nil)
            return
        }
        guard state.waiter == nil else {
            lock.unlock()
            preconditionFailure("KeyValueThrottledValues: two tasks iterate one throttled sequence at once; make one sequence per consumer")
        }
        state.waiter = waiter
        let next = state.scheduleIfDue(interval: interval)
        let ended = state.endIfDone()
        lock.unlock()
        start(next)
        ended?.resume(returning: nil)
    }

    /// Runs a delivery that was marked scheduled: on the queue when it is due later (or always, for
    /// a handler, which never runs on the updating thread); a waiting task is resumed at once when
    /// it is due now.
    private func start(_ schedule: Schedule) {
        guard case .at(let deadline) = schedule else { return }
        if case .demand = target, deadline.map({ $0 <= scheduler.now() }) ?? true {
            fire()
        } else {
            scheduler.run(on: queue, at: deadline) { self.fire() }
        }
    }

    /// The scheduled delivery: takes the latest value and delivers it unless it repeats the last
    /// one, then schedules the next if changes came in meanwhile.
    private func fire() {
        lock.lock()
        guard state.isDirty, !state.isStopped, !state.onDemand || state.waiter != nil else {
            state.isScheduled = false
            let ended = state.endIfDone()
            lock.unlock()
            ended?.resume(returning: nil)
            return
        }
        state.isDirty = false
        let notified = state.latest
        state.latest = nil
        let previous = state.lastValue
        lock.unlock()
        let value = read?() ?? notified
        var delivered = false
        if let value, !(previous.map { isDuplicate?($0, value) ?? false } ?? false) {
            lock.lock()
            if isDuplicate != nil { state.lastValue = value }
            let waiter = state.waiter
            state.waiter = nil
            lock.unlock()
            withExtendedLifetime(previous) {}
            switch target {
            case .handler(let handler): handler(value)
            case .demand: waiter?.resume(returning: value)
            }
            delivered = true
        }
        lock.lock()
        state.isScheduled = false
        if delivered { state.lastDelivery = scheduler.now() }
        let next = state.scheduleIfDue(interval: interval)
        let ended = state.endIfDone()
        lock.unlock()
        start(next)
        ended?.resume(returning: nil)
    }

    /// A delivery to start, or none.
    private enum Schedule {
        case none
        /// At this deadline; at once if `nil`.
        case at(Duration?)
    }

    /// What the throttle knows, behind its lock.
    private struct State {
        /// Deliveries go to a waiting task (`Target.demand`).
        let onDemand: Bool
        /// The latest value notified and not delivered yet.
        var latest: Value?
        /// A change came in since the last delivery started.
        var isDirty = false
        /// A delivery is scheduled or running: there is never a second.
        var isScheduled = false
        /// Nothing more is delivered.
        var isStopped = false
        /// The object is gone: no more changes will come.
        var isEnding = false
        /// The waiting task was told the sequence ended.
        var hasEnded = false
        /// When the last delivery was made (after its handler returned).
        var lastDelivery: Duration?
        /// The value delivered last, kept only for `isDuplicate`.
        var lastValue: Value?
        /// The task waiting for a value, on demand.
        var waiter: CheckedContinuation<Value?, Never>?

        init(onDemand: Bool) {
            self.onDemand = onDemand
        }

        /// If a change waits, no delivery is scheduled and (on demand) a task is waiting: marks a
        /// delivery scheduled, due `interval` after the last one.
        mutating func scheduleIfDue(interval: Duration) -> Schedule {
            guard isDirty, !isScheduled, !isStopped, !onDemand || waiter != nil else { return .none }
            isScheduled = true
            return .at(lastDelivery.map { $0 + interval })
        }

        /// Once the object is gone and nothing is left to deliver, the waiting task to resume with
        /// `nil` (on demand); later demands get `nil` at once.
        mutating func endIfDone() -> CheckedContinuation<Value?, Never>? {
            guard isEnding, !hasEnded, !isDirty, !isScheduled else { return nil }
            hasEnded = true
            defer { waiter = nil }
            return waiter
        }
    }
}
