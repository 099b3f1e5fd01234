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
    /// returned; values in between are coalesced into the latest. For `Equatable` values (every
    /// progress key), a value equal to the one delivered last is not delivered again.
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
        _ keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        throttledObservation(keyPath, interval: interval, queue: queue, isDuplicate: nil, handler: handler)
    }

    /// `observe(_:throttledTo:on:handler:)` for `Equatable` values (all the progress keys): a value
    /// equal to the one delivered last is not delivered again.
    public func observe<Value: Equatable & Sendable>(
        _ keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        throttledObservation(keyPath, interval: interval, queue: queue, isDuplicate: { $0 == $1 }, handler: handler)
    }

    private func throttledObservation<Value: Sendable>(
        _ keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        interval: Duration,
        queue: DispatchQueue,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        precondition(interval >= .zero, "ObservableProgress.observe(_:throttledTo:on:handler:): the interval must not be negative (got \(interval))")
        // Notifications only wake the throttle; each delivery reads the value then. With several
        // threads updating the tree, notifications may arrive out of order, and the value they carry
        // could be older than the last one set: the value read at delivery never is.
        let throttle = _Throttle(interval: interval, queue: queue, isDuplicate: isDuplicate, handler: handler) { [weak self] in
            self?[keyPath: keyPath]
        }
        let token = observe(keyPath, options: [.initial]) { _, _ in
            throttle.wake()
        }
        return KeyValueObservation(ending: token) { throttle.stop() }
    }

    /// The values of `keyPath` for a display, as an `AsyncSequence`: the current value first, then
    /// at most one value per `interval`, always the latest, and always the final one. The values
    /// are delivered in the consuming task, so on its actor (`@MainActor` code iterating gets them on
    /// the main actor). The sequence finishes when the progress is deallocated; observation ends
    /// when the loop ends or the task is cancelled.
    public func values<Value: Sendable>(
        for keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration
    ) -> ThrottledProgressValues<Value> {
        throttledValues(keyPath, interval: interval, isDuplicate: nil)
    }

    /// `values(for:throttledTo:)` for `Equatable` values (all the progress keys): a value equal to
    /// the one returned last is not returned again.
    public func values<Value: Equatable & Sendable>(
        for keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration
    ) -> ThrottledProgressValues<Value> {
        throttledValues(keyPath, interval: interval, isDuplicate: { $0 == $1 })
    }

    private func throttledValues<Value: Sendable>(
        _ keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        interval: Duration,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?
    ) -> ThrottledProgressValues<Value> {
        precondition(interval >= .zero, "ObservableProgress.values(for:throttledTo:): the interval must not be negative (got \(interval))")
        return ThrottledProgressValues(
            base: values(for: keyPath, options: [.initial, .new], buffering: .newest(1)),
            interval: interval,
            progress: self,
            keyPath: keyPath,
            isDuplicate: isDuplicate
        )
    }
}

/// The values of a progress key, at most one per interval (`ObservableProgress.values(for:throttledTo:)`).
public struct ThrottledProgressValues<Value: Sendable>: AsyncSequence {
    public typealias Element = Value
    let base: KeyValueObservationValues<Value>
    let interval: Duration
    weak var progress: ObservableProgress?
    let keyPath: KeyPath<ObservableProgress, Value> & Sendable
    let isDuplicate: (@Sendable (Value, Value) -> Bool)?

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: KeyValueObservationValues<Value>.AsyncIterator
        let interval: Duration
        var lastDelivery: ContinuousClock.Instant?
        weak var progress: ObservableProgress?
        let keyPath: KeyPath<ObservableProgress, Value> & Sendable
        let isDuplicate: (@Sendable (Value, Value) -> Bool)?
        var last: Value?

        /// Waits out the interval since the previous value, then waits for a change (the base keeps
        /// only the newest while the consumer waits) and returns the value the key has now: with
        /// several updating threads, the notified value may be older than the current one. A value
        /// equal to the last one returned (`Equatable` values) waits for the next change instead.
        public mutating func next() async -> Value? {
            if let lastDelivery {
                try? await Task.sleep(until: lastDelivery.advanced(by: interval), clock: .continuous)
            }
            while true {
                guard let notified = await base.next() else { return nil }
                let value = progress?[keyPath: keyPath] ?? notified
                if let last, let isDuplicate, isDuplicate(last, value) { continue }
                lastDelivery = .now
                last = value
                return value
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            base: base.makeAsyncIterator(),
            interval: interval,
            lastDelivery: nil,
            progress: progress,
            keyPath: keyPath,
            isDuplicate: isDuplicate,
            last: nil
        )
    }
}

/// The state of one throttled observer: whether a change is waiting to be delivered, and whether a
/// delivery is scheduled. One delivery at a time: the next is scheduled only when the previous
/// returns. Each delivery reads the value when it runs.
final class _Throttle<Value: Sendable>: @unchecked Sendable {
    // Invariant: `isDirty`, `isScheduled`, `isStopped`, `lastDelivery` and `lastValue` are accessed only with
    // `lock` held; the other properties are immutable. The handler and `read` run without the lock.
    private let lock = Lock()
    private var isDirty = false
    private var isScheduled = false
    private var isStopped = false
    private var lastDelivery: DispatchTime?
    /// The value delivered last, for `isDuplicate`.
    private var lastValue: Value?
    private let isDuplicate: (@Sendable (Value, Value) -> Bool)?
    private let interval: Duration
    private let queue: DispatchQueue
    private let handler: @Sendable (Value) -> Void
    /// The current value, or `nil` once the progress is gone.
    private let read: @Sendable () -> Value?

    init(
        interval: Duration,
        queue: DispatchQueue,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        handler: @escaping @Sendable (Value) -> Void,
        read: @escaping @Sendable () -> Value?
    ) {
        self.isDuplicate = isDuplicate
        self.interval = interval
        self.queue = queue
        self.handler = handler
        self.read = read
    }

    /// On the updating thread: notes that the value changed, and schedules a delivery unless one is.
    func wake() {
        lock.lock()
        isDirty = true
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
        lock.unlock()
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
        let deliver = isDirty && !isStopped
        isDirty = false
        let previous = lastValue
        lock.unlock()
        if deliver, let value = read() {
            // Two wake-ups may read the same value (the last change can land between one delivery's
            // read and the next wake-up): an equal value is not delivered twice.
            if let previous, let isDuplicate, isDuplicate(previous, value) {
                // Nothing new.
            } else {
                lock.lock()
                lastValue = value
                lock.unlock()
                handler(value)
            }
        }
        lock.lock()
        let now = DispatchTime.now()
        lastDelivery = now
        let again = isDirty && !isStopped
        isScheduled = again
        lock.unlock()
        if again { schedule(after: now) }
    }
}
