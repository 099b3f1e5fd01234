import Dispatch

extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Observes `keyPath` for a display or a metrics exporter: at most one delivery per
    /// `interval`, always of the latest value, and always ending with the last one. The handler runs
    /// on `queue`, never on the thread that made the change, and never twice at once (even on a
    /// concurrent queue), so a loop that sets the property a million times cannot flood it.
    ///
    /// ```swift
    /// let token = server.observe(\.requestCount, throttledTo: .seconds(1), on: exporterQueue) { count in
    ///     gauge.record(count)
    /// }
    /// ```
    ///
    /// Works for every key `observe(_:options:changeHandler:)` accepts: `@Observed` properties,
    /// dependent keys, key paths through observable intermediates, explicitly notified keys. A
    /// first delivery is scheduled at once with the current value (like `.initial`). After a
    /// delivery, the next comes no sooner than `interval` after the previous handler returned;
    /// changes in between are coalesced into the latest. The value is captured on the thread that
    /// made the change (the object is not `Sendable`, so it is never read on `queue`), and must
    /// therefore be `Sendable`.
    ///
    /// - Parameters:
    ///   - keyPath: The key to observe.
    ///   - interval: The least time between two deliveries; not negative.
    ///   - queue: Where the handler runs.
    ///   - handler: Called with the latest value.
    ///   - fileID: The caller's file, named in diagnostics; leave the default.
    ///   - line: The caller's line, named in diagnostics; leave the default.
    /// - Returns: The token. Keep it: when it is invalidated or deallocated, observation stops and
    ///   a pending delivery is dropped.
    /// - Complexity: Each change costs the observer's notification plus O(1) under a lock.
    public func observe<Value: Sendable>(
        _ keyPath: KeyPath<Self, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        fileID: String = #fileID,
        line: UInt = #line,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        _observe(
            keyPath, throttledTo: interval, on: queue, isDuplicate: nil, scheduler: _DispatchThrottleScheduler(), fileID: fileID,
            line: line, handler: handler)
    }

    /// `observe(_:throttledTo:on:handler:)` for `Equatable` values: a value equal to the one
    /// delivered last is not delivered again.
    ///
    /// ```swift
    /// let token = service.observe(\.state, throttledTo: .milliseconds(500), on: logQueue) { state in
    ///     log.info("state: \(state)")   // never the same state twice in a row
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - keyPath: The key to observe.
    ///   - interval: The least time between two deliveries; not negative.
    ///   - queue: Where the handler runs.
    ///   - handler: Called with the latest value, when it differs from the one delivered last.
    ///   - fileID: The caller's file, named in diagnostics; leave the default.
    ///   - line: The caller's line, named in diagnostics; leave the default.
    /// - Returns: The token; keep it.
    /// - Complexity: Each change costs the observer's notification plus O(1) under a lock.
    public func observe<Value: Equatable & Sendable>(
        _ keyPath: KeyPath<Self, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        fileID: String = #fileID,
        line: UInt = #line,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        _observe(
            keyPath, throttledTo: interval, on: queue, isDuplicate: { $0 == $1 }, scheduler: _DispatchThrottleScheduler(), fileID: fileID,
            line: line, handler: handler)
    }

    /// The values of `keyPath` for a display, as an `AsyncSequence`: the current value first, then
    /// the latest value at most once per `interval`, and always the final one.
    ///
    /// ```swift
    /// for await count in server.values(for: \.requestCount, throttledTo: .seconds(1)) {
    ///     print(count)   // at most once a second, in this task
    /// }
    /// ```
    ///
    /// The values are delivered in the consuming task, so on its actor (`@MainActor` code iterating
    /// gets them on the main actor). The interval counts from the previous value taken, so a
    /// consumer that falls behind gets the latest value when it asks, not a backlog. The value is
    /// captured on the thread that made the change. The sequence finishes when the object is
    /// deallocated; observation ends when the loop ends or the task is cancelled.
    ///
    /// - Parameters:
    ///   - keyPath: The key to observe.
    ///   - interval: The least time between two values; not negative.
    ///   - fileID: The caller's file, named in diagnostics; leave the default.
    ///   - line: The caller's line, named in diagnostics; leave the default.
    /// - Returns: The sequence; registration happens when this method is called.
    public func values<Value: Sendable>(
        for keyPath: KeyPath<Self, Value> & Sendable,
        throttledTo interval: Duration,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueThrottledValues<Value> {
        _values(for: keyPath, throttledTo: interval, isDuplicate: nil, scheduler: _DispatchThrottleScheduler(), fileID: fileID, line: line)
    }

    /// `values(for:throttledTo:)` for `Equatable` values: a value equal to the one returned last is
    /// not returned again (the sequence waits for the next change instead).
    ///
    /// ```swift
    /// for await state in service.values(for: \.state, throttledTo: .milliseconds(200)) {
    ///     statusLine.text = "\(state)"
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - keyPath: The key to observe.
    ///   - interval: The least time between two values; not negative.
    ///   - fileID: The caller's file, named in diagnostics; leave the default.
    ///   - line: The caller's line, named in diagnostics; leave the default.
    /// - Returns: The sequence; registration happens when this method is called.
    public func values<Value: Equatable & Sendable>(
        for keyPath: KeyPath<Self, Value> & Sendable,
        throttledTo interval: Duration,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueThrottledValues<Value> {
        _values(
            for: keyPath, throttledTo: interval, isDuplicate: { $0 == $1 }, scheduler: _DispatchThrottleScheduler(), fileID: fileID,
            line: line)
    }

    /// `observe(_:throttledTo:on:handler:)` with its parts exposed: the duplicate test, the
    /// scheduler (a manual clock in tests) and, for `Sendable` objects, a read of the current value
    /// at delivery (see `_Throttle`).
    package func _observe<Value: Sendable>(
        _ keyPath: KeyPath<Self, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        readingAtDelivery read: (@Sendable () -> Value?)? = nil,
        scheduler: any _ThrottleScheduler,
        fileID: String = #fileID,
        line: UInt = #line,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        precondition(interval >= .zero, "observe(_:throttledTo:on:handler:): the interval must not be negative (got \(interval))")
        let throttle = _Throttle(
            interval: interval, queue: queue, scheduler: scheduler, isDuplicate: isDuplicate, read: read, target: .handler(handler))
        let token = _feed(throttle, from: keyPath, fileID: fileID, line: line)
        return KeyValueObservation(ending: token) { throttle.stop() }
    }

    /// `values(for:throttledTo:)` with its parts exposed (see `_observe(_:throttledTo:on:…)`).
    package func _values<Value: Sendable>(
        for keyPath: KeyPath<Self, Value> & Sendable,
        throttledTo interval: Duration,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        readingAtDelivery read: (@Sendable () -> Value?)? = nil,
        scheduler: any _ThrottleScheduler,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueThrottledValues<Value> {
        precondition(interval >= .zero, "values(for:throttledTo:): the interval must not be negative (got \(interval))")
        // Deliveries due later run on a global queue; all they do is resume the waiting task.
        let throttle = _Throttle(
            interval: interval, queue: .global(), scheduler: scheduler, isDuplicate: isDuplicate, read: read, target: .demand)
        let token = _feed(throttle, from: keyPath, fileID: fileID, line: line)
        let source = _ThrottledValuesSource(throttle: throttle, token: token)
        if let registry = token.registry, !registry.onObjectDeinit(id: token.id, { throttle.end() }) {
            throttle.end()
        }
        return KeyValueThrottledValues(source: source)
    }

    /// Observes `keyPath` and hands `throttle` the current value, then every new one, on the thread
    /// that made the change.
    private func _feed<Value: Sendable>(
        _ throttle: _Throttle<Value>,
        from keyPath: KeyPath<Self, Value> & Sendable,
        fileID: String,
        line: UInt
    ) -> KeyValueObservation {
        observe(keyPath, options: [.initial, .new], fileID: fileID, line: line) { object, change in
            // A to-many change carries only the elements it touched: the whole value is read here,
            // on the thread that made the change.
            guard let value = change.kind == .setting ? change.newValue : object[keyPath: keyPath] else { return }
            throttle.notify(value)
        }
    }
}
