import Dispatch
import Synchronization

/// Which parts of an explicit key's notification `_notifyExplicitKey` sends.
@usableFromInline
package struct _ExplicitNotificationPhases: OptionSet, Sendable {
    @usableFromInline package let rawValue: UInt8
    @inlinable package init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The `.prior` notifications, to the observers that asked for them.
    @inlinable package static var prior: Self { Self(rawValue: 1) }
    /// The change notifications, to every observer.
    @inlinable package static var change: Self { Self(rawValue: 2) }
}

extension KeyValueObservable {
    /// Notifies the observers of the explicitly notified key at `offset` (see
    /// `_ExplicitlyNotifiedKeys`) of the given `phases` of its change from `oldValue` to `newValue`:
    /// the one delivery loop of progress keys and of interned keys (`ObservableDefaults`, whose
    /// key names are runtime strings interned to offsets). A class whose `.prior` must come before
    /// it stores the value (a set of this process) sends `.prior` first, then stores, then sends
    /// `.change`; both phases at once are `_notifyExplicitChange`.
    ///
    /// Sent in separate phases, a key's observers must all be direct (an explicit key's are): the
    /// pending state of indirect observers does not cross from one call to the next. Call it
    /// without holding any lock. `key` is called only if the object has observers of every key.
    @inlinable
    package final func _notifyExplicitKey<Value>(
        offset: Int,
        key: () -> AnyKeyPath,
        from oldValue: Value,
        to newValue: Value,
        phases: _ExplicitNotificationPhases
    ) {
        guard let registry = _kvoRegistry.load(ordering: .acquiring) else { return }
        registry._withUnsafeGuaranteedRef { registry in
            let anyKey = registry.hasAnyKeyObservers ? registry.anyKeySnapshot() : nil
            let mayHaveObservers = registry.mayHaveObservers(atOffset: offset)
            guard anyKey != nil || mayHaveObservers else { return }
            let keyPath = anyKey == nil ? nil : key()
            if phases.contains(.prior), let anyKey, let keyPath { anyKey.willChange(self, keyPath) }
            if mayHaveObservers {
                // The observers borrowed from the published set table, as on the `@Observed` set path.
                let reading = registry.enterReading()
                _ExplicitKeyObservers(registry.observersInReadSection(atOffset: offset, key: key))
                    .notify(self, from: oldValue, to: newValue, phases: phases)
                registry.exitReading(reading)
            }
            if phases.contains(.change), let anyKey, let keyPath { anyKey.didChange(self, keyPath) }
        }
    }

    /// Runs `body` with the observers of the explicitly notified key at `offset`, found once, inside
    /// a read section of the registry: a class that notifies a change in phases around its own
    /// locked section (`.prior`, its store, `.change`) looks them up once for all three. The
    /// observers of every key (the core's any-key observers) are not among them. `body` may take
    /// the class's own lock (a registration never waits for readers) and call handlers.
    @inlinable
    package final func _withExplicitKeyObservers<Result>(
        offset: Int, key: () -> AnyKeyPath, _ body: (_ExplicitKeyObservers) throws -> Result
    ) rethrows -> Result {
        guard let registry = _kvoRegistry.load(ordering: .acquiring) else { return try body(_ExplicitKeyObservers(nil)) }
        return try registry._withUnsafeGuaranteedRef { registry in
            guard registry.mayHaveObservers(atOffset: offset) else { return try body(_ExplicitKeyObservers(nil)) }
            let reading = registry.enterReading()
            defer { registry.exitReading(reading) }
            return try body(_ExplicitKeyObservers(registry.observersInReadSection(atOffset: offset, key: key)))
        }
    }
}

/// The observers of one explicitly notified key, borrowed from the registry's published set table
/// for the length of a read section (`_withExplicitKeyObservers`): not to be kept beyond it.
@usableFromInline
package struct _ExplicitKeyObservers {
    @usableFromInline let observers: _BorrowedObservers?

    @inlinable init(_ observers: _BorrowedObservers?) {
        self.observers = observers
    }

    /// No observers.
    @inlinable package static var none: Self { Self(nil) }

    /// Whether some observer asked for `.prior`.
    @inlinable package var wantsPrior: Bool {
        // A single observer is in the set table alone only if it asked for nothing before the change.
        guard let observers, !observers.isSingle else { return false }
        return observers.snapshot._withUnsafeGuaranteedRef { !$0.isPlain && $0.needsWillChange }
    }

    /// Sends `phases` of the change from `oldValue` to `newValue` of `object`'s key to these
    /// observers, in registration order: the one delivery loop of explicitly notified keys. Called
    /// with `object` of its own class (`Root`), observers registered on that class get the change
    /// from one call of their handler.
    @inlinable
    @inline(__always)
    package func notify<Root: AnyObject, Value>(
        _ object: Root, from oldValue: Value, to newValue: Value, phases: _ExplicitNotificationPhases
    ) {
        guard let observers else { return }
        if observers.isSingle {
            if phases.contains(.change) {
                observers.single._withUnsafeGuaranteedRef { _ObserverSnapshot.deliverAlone(newValue, to: $0, on: object) }
            }
            return
        }
        observers.snapshot._withUnsafeGuaranteedRef { snapshot in
            if snapshot.isPlain {
                if phases.contains(.change) { snapshot.deliverPlain(newValue, on: object) }
            } else {
                let pending =
                    phases.contains(.prior)
                    ? snapshot.willChange(on: object, oldValue: oldValue, newValue: newValue, valueHasChanged: true) : nil
                if phases.contains(.change) { snapshot.didChange(newValue, oldValue: oldValue, pending: pending, on: object) }
            }
        }
    }
}

extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// `values(for:options:buffering:)` of a key whose registered value is not what its sequence
    /// yields (a defaults key: the registry carries the entry, the sequence the typed value):
    /// `transform` turns each value `values(for:)` would yield into the element, or `nil` to skip it.
    package func _values<Value: Sendable, Element: Sendable>(
        for keyPath: KeyPath<Self, Value>,
        options: KeyValueObservingOptions,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        buffering: KeyValueObservationBuffering,
        transform: @escaping @Sendable (Self, Value) -> Element?
    ) -> KeyValueObservationValues<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: buffering.streamPolicy(for: Element.self))
        let sink = _SequenceSink(continuation)
        var internalOptions = options.union(.new)
        if options.contains(.prior) { internalOptions.insert(.old) }
        let token = _observe(keyPath, options: internalOptions, isDuplicate: isDuplicate, fileID: #fileID, line: #line) { object, change in
            guard let value = change.isPrior ? change.oldValue : change.newValue, let element = transform(object, value) else { return }
            sink.yield(element)
        }
        _finish(sink, with: token)
        return KeyValueObservationValues(stream: stream)
    }

    /// `observe(_:throttledTo:on:handler:)` of a key whose registered value is not what the
    /// handler gets (see `_values(for:options:isDuplicate:buffering:transform:)`).
    package func _observe<Value: Sendable, Element: Sendable>(
        _ keyPath: KeyPath<Self, Value>,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        isDuplicate: (@Sendable (Element, Element) -> Bool)?,
        scheduler: any _ThrottleScheduler,
        transform: @escaping @Sendable (Self, Value) -> Element?,
        handler: @escaping @Sendable (Element) -> Void
    ) -> KeyValueObservation {
        precondition(interval >= .zero, "observe(_:throttledTo:on:handler:): the interval must not be negative (got \(interval))")
        let throttle = _Throttle(
            interval: interval, queue: queue, scheduler: scheduler, isDuplicate: isDuplicate, target: .handler(handler))
        let token = _feed(throttle, from: keyPath, transform: transform)
        return KeyValueObservation(ending: token) { throttle.stop() }
    }

    /// `values(for:throttledTo:)` of a key whose registered value is not what the sequence yields
    /// (see `_values(for:options:isDuplicate:buffering:transform:)`).
    package func _values<Value: Sendable, Element: Sendable>(
        for keyPath: KeyPath<Self, Value>,
        throttledTo interval: Duration,
        isDuplicate: (@Sendable (Element, Element) -> Bool)?,
        scheduler: any _ThrottleScheduler,
        transform: @escaping @Sendable (Self, Value) -> Element?
    ) -> KeyValueThrottledValues<Element> {
        precondition(interval >= .zero, "values(for:throttledTo:): the interval must not be negative (got \(interval))")
        let throttle = _Throttle(interval: interval, queue: .global(), scheduler: scheduler, isDuplicate: isDuplicate, target: .demand)
        let token = _feed(throttle, from: keyPath, transform: transform)
        if let registry = token.registry, !registry.onObjectDeinit(id: token.id, { throttle.end() }) {
            throttle.end()
        }
        return KeyValueThrottledValues(source: _ThrottledValuesSource(throttle: throttle, token: token))
    }

    /// Observes `keyPath` and hands `throttle` the current value, then every new one, transformed,
    /// on the thread that made the change.
    private func _feed<Value: Sendable, Element: Sendable>(
        _ throttle: _Throttle<Element>,
        from keyPath: KeyPath<Self, Value>,
        transform: @escaping @Sendable (Self, Value) -> Element?
    ) -> KeyValueObservation {
        _observe(keyPath, options: [.initial, .new], isDuplicate: nil, fileID: #fileID, line: #line) { object, change in
            guard let value = change.newValue, let element = transform(object, value) else { return }
            throttle.notify(element)
        }
    }
}

extension KeyValueObservable {
    /// Whether the explicitly notified key at `offset` may have observers: one atomic load; `false`
    /// is definite. A class that gathers what a notification would carry under its own lock (a
    /// copy of its values) asks first.
    @inlinable
    package final func _mayHaveObservers(atOffset offset: Int) -> Bool {
        guard let registry = _kvoRegistry.load(ordering: .acquiring) else { return false }
        return registry._withUnsafeGuaranteedRef { $0.mayHaveObservers(atOffset: offset) }
    }
}
