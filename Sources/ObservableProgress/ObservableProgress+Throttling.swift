import Dispatch
import KeyValueObserving

extension ObservableProgress {
    /// Observes `keyPath` for a display: at most one delivery per `interval`, always of the latest
    /// value, and always ending with the final one. The handler runs on `queue`, never on the
    /// updating thread, and never twice at once (even on a concurrent queue), so a loop that updates
    /// per byte cannot flood it.
    ///
    /// ```swift
    /// let token = download.observe(\.fractionCompleted, throttledTo: .milliseconds(100), on: .main) { fraction in
    ///     progressBar.value = fraction
    /// }
    /// ```
    ///
    /// The throttle of every observable key (`KeyValueObservable`'s `observe(_:throttledTo:on:handler:)`),
    /// with one difference: a progress is `Sendable`, and with several threads updating a tree its
    /// notifications may arrive out of order, so each delivery reads the value the progress has then
    /// rather than the one the last notification carried. A first delivery is scheduled at once
    /// (like `.initial`). After a delivery, the next comes no sooner than `interval` after the
    /// previous handler returned; values in between are coalesced into the latest. For `Equatable`
    /// values (every progress key), a value equal to the one delivered last is not delivered again.
    ///
    /// - Parameters:
    ///   - keyPath: The progress key to observe.
    ///   - interval: The least time between two deliveries; not negative.
    ///   - queue: Where the handler runs.
    ///   - handler: Called with the latest value.
    /// - Returns: The token. Keep it: when it is invalidated or deallocated, observation stops and a
    ///   pending delivery is dropped.
    public func observe<Value: Sendable>(
        _ keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        observe(keyPath, throttledTo: interval, on: queue, isDuplicate: nil, scheduler: _DispatchThrottleScheduler(), handler: handler)
    }

    /// `observe(_:throttledTo:on:handler:)` for `Equatable` values (all the progress keys): a value
    /// equal to the one delivered last is not delivered again.
    public func observe<Value: Equatable & Sendable>(
        _ keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        observe(
            keyPath, throttledTo: interval, on: queue, isDuplicate: { $0 == $1 }, scheduler: _DispatchThrottleScheduler(), handler: handler)
    }

    /// The values of `keyPath` for a display, as an `AsyncSequence`: the current value first, then
    /// at most one value per `interval`, always the latest, and always the final one. The values
    /// are delivered in the consuming task, so on its actor (`@MainActor` code iterating gets them
    /// on the main actor); like the handler form, each value is read from the progress when it is
    /// taken. The sequence finishes when the progress is deallocated; observation ends when the loop
    /// ends or the task is cancelled.
    public func values<Value: Sendable>(
        for keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration
    ) -> KeyValueThrottledValues<Value> {
        values(for: keyPath, throttledTo: interval, isDuplicate: nil, scheduler: _DispatchThrottleScheduler())
    }

    /// `values(for:throttledTo:)` for `Equatable` values (all the progress keys): a value equal to
    /// the one returned last is not returned again.
    public func values<Value: Equatable & Sendable>(
        for keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration
    ) -> KeyValueThrottledValues<Value> {
        values(for: keyPath, throttledTo: interval, isDuplicate: { $0 == $1 }, scheduler: _DispatchThrottleScheduler())
    }

    /// The throttled observation on `scheduler` (a manual clock in tests), reading at delivery.
    package func observe<Value: Sendable>(
        _ keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        scheduler: any _ThrottleScheduler,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        _observe(
            keyPath, throttledTo: interval, on: queue, isDuplicate: isDuplicate, readingAtDelivery: currentValue(of: keyPath),
            scheduler: scheduler, handler: handler)
    }

    /// The throttled sequence on `scheduler` (a manual clock in tests), reading at delivery.
    package func values<Value: Sendable>(
        for keyPath: KeyPath<ObservableProgress, Value> & Sendable,
        throttledTo interval: Duration,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        scheduler: any _ThrottleScheduler
    ) -> KeyValueThrottledValues<Value> {
        _values(
            for: keyPath, throttledTo: interval, isDuplicate: isDuplicate, readingAtDelivery: currentValue(of: keyPath),
            scheduler: scheduler)
    }

    /// Reads `keyPath` when a throttled delivery runs; `nil` once the progress is gone (the
    /// throttle then delivers the value last notified).
    private func currentValue<Value: Sendable>(of keyPath: KeyPath<ObservableProgress, Value> & Sendable) -> @Sendable () -> Value? {
        { [weak self] in self?[keyPath: keyPath] }
    }
}

/// The values of a progress key, at most one per interval (`ObservableProgress.values(for:throttledTo:)`):
/// the throttled sequence of every observable key.
@available(*, deprecated, renamed: "KeyValueThrottledValues")
public typealias ThrottledProgressValues<Value: Sendable> = KeyValueThrottledValues<Value>
