import Dispatch
import KeyValueObserving

extension ObservableProgress {
    /// Observes `keyPath` for a display: at most one delivery per `interval`, always of the latest
    /// value, and always ending with the final one. The handler runs on `queue`, never on the
    /// updating thread, and never twice at once (even on a concurrent queue), so a loop that updates
    /// per byte cannot flood it.
    ///
    /// A first delivery is scheduled at once (like `.initial`), with whatever value is latest when
    /// it runs. After a delivery, the next comes no sooner than `interval` after the previous handler
    /// returned; values in between are coalesced into the latest.
    ///
    /// ```swift
    /// let token = download.observe(\.fractionCompleted, throttledTo: .milliseconds(100), on: .main) { fraction in
    ///     progressBar.value = fraction
    /// }
    /// ```
    ///
    /// Keep the token: when it is invalidated or deallocated, observation stops and a pending
    /// delivery is dropped.
    public func observe<Value: Sendable>(
        _ keyPath: KeyPath<ObservableProgress, Value>,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        precondition(interval >= .zero, "ObservableProgress.observe(_:throttledTo:on:handler:): the interval must not be negative (got \(interval))")
        let throttle = _Throttle(interval: interval, queue: queue, handler: handler)
        let token = observe(keyPath, options: [.initial, .new]) { _, change in
            throttle.receive(change.newValue!)
        }
        return KeyValueObservation(ending: token) { throttle.stop() }
    }

    /// The values of `keyPath` for a display, as an `AsyncSequence`: the current value first, then
    /// at most one value per `interval`, always the latest, and always the final one. The values
    /// are delivered in the consuming task, so on its actor (`@MainActor` code iterating gets them on
    /// the main actor). The sequence finishes when the progress is deallocated; observation ends
    /// when the loop ends or the task is cancelled.
    public func values<Value: Sendable>(
        for keyPath: KeyPath<ObservableProgress, Value>,
        throttledTo interval: Duration
    ) -> ThrottledProgressValues<Value> {
        precondition(interval >= .zero, "ObservableProgress.values(for:throttledTo:): the interval must not be negative (got \(interval))")
        return ThrottledProgressValues(base: values(for: keyPath, options: [.initial, .new], buffering: .newest(1)), interval: interval)
    }
}

/// The values of a progress key, at most one per interval (`ObservableProgress.values(for:throttledTo:)`).
public struct ThrottledProgressValues<Value: Sendable>: AsyncSequence {
    public typealias Element = Value
    let base: KeyValueObservationValues<Value>
    let interval: Duration

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: KeyValueObservationValues<Value>.AsyncIterator
        let interval: Duration
        var lastDelivery: ContinuousClock.Instant?

        /// Waits out the interval since the previous value, then takes the newest value (the base
        /// keeps only the newest while the consumer waits).
        public mutating func next() async -> Value? {
            if let lastDelivery {
                try? await Task.sleep(until: lastDelivery.advanced(by: interval), clock: .continuous)
            }
            guard let value = await base.next() else { return nil }
            lastDelivery = .now
            return value
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), interval: interval, lastDelivery: nil)
    }
}

/// The state of one throttled observer: the latest value not yet delivered, and whether a delivery
/// is scheduled. One delivery at a time: the next is scheduled only when the previous returns.
final class _Throttle<Value: Sendable>: @unchecked Sendable {
    // Invariant: `latest`, `isScheduled`, `isStopped` and `lastDelivery` are accessed only with
    // `lock` held; the other properties are immutable. The handler runs without the lock.
    private let lock = Lock()
    private var latest: Value?
    private var isScheduled = false
    private var isStopped = false
    private var lastDelivery: DispatchTime?
    private let interval: Duration
    private let queue: DispatchQueue
    private let handler: @Sendable (Value) -> Void

    init(interval: Duration, queue: DispatchQueue, handler: @escaping @Sendable (Value) -> Void) {
        self.interval = interval
        self.queue = queue
        self.handler = handler
    }

    /// On the updating thread: keeps `value` as the latest, and schedules a delivery unless one is.
    func receive(_ value: Value) {
        lock.lock()
        latest = value
        guard !isScheduled, !isStopped else {
            lock.unlock()
            return
        }
        isScheduled = true
        let previous = lastDelivery
        lock.unlock()
        schedule(after: previous)
    }

    func stop() {
        lock.lock()
        isStopped = true
        let dropped = latest.take()
        lock.unlock()
        withExtendedLifetime(dropped) {}
    }

    private func schedule(after previous: DispatchTime?) {
        guard let previous else {
            queue.async { self.fire() }
            return
        }
        let components = interval.components
        let nanoseconds = components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
        queue.asyncAfter(deadline: previous + .nanoseconds(Int(nanoseconds))) { self.fire() }
    }

    private func fire() {
        lock.lock()
        let value = isStopped ? nil : latest.take()
        lock.unlock()
        if let value { handler(value) }
        lock.lock()
        let now = DispatchTime.now()
        lastDelivery = now
        let again = latest != nil && !isStopped
        isScheduled = again
        lock.unlock()
        if again { schedule(after: now) }
    }
}
