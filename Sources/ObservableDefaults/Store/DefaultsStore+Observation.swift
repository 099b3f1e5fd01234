import Dispatch
import KeyValueObserving

/// Observing defaults keys: the core's observation API (`KeyValueObservable`) for a `DefaultsKey`,
/// delivered by the core registry (each key is an explicitly notified key of the storage; see
/// `DefaultsStorage+Delivery`), so options, `.prior`, duplicates, sequences and throttling behave as
/// for an `@Observed` property, with where each change came from.
extension DefaultsStore {
    /// Observes `key`, the `observe(_:options:changeHandler:)` of `KeyValueObservable` for a defaults
    /// key. Keep the token: when it is deallocated or invalidated, the observation ends.
    ///
    /// ```swift
    /// let token = store.observe(speed, options: [.old, .new]) { _, change in
    ///     print(change.oldValue!, "→", change.newValue!, change.origin)
    /// }
    /// ```
    ///
    /// - Changes made in this process (through any store on the same file) are delivered
    ///   synchronously, on the thread that made them, after the value is stored; `.prior`
    ///   notifications come before it is stored.
    /// - Changes made by another process are delivered on the store's background queue, one per
    ///   changed key, with `origin == .anotherProcess`; their `.prior` notification comes right
    ///   before the change notification, after the new value is visible. A change of another
    ///   process is not delivered after a later change of the same key.
    /// - Every assignment notifies, equal values included, as in KVO (see
    ///   `observe(_:options:removingDuplicates:changeHandler:)`); a value read back from the file
    ///   that did not change is not reported.
    /// - The handler may read and write the store and add or remove observers.
    ///
    /// The token does not keep the store alive; when the last store on the file is deallocated, the
    /// observation goes quiet.
    @inlinable
    public func observe<Value>(
        _ key: DefaultsKey<Value>,
        options: KeyValueObservingOptions = [],
        changeHandler: @escaping @Sendable (DefaultsStore, DefaultsChange<Value>) -> Void
    ) -> KeyValueObservation {
        _observe(key, options: options, removingDuplicates: false, changeHandler: changeHandler)
    }

    /// Observes `key` like `observe(_:options:changeHandler:)`, but an assignment of a value equal
    /// to the current one does not notify (nor send `.prior`).
    @inlinable
    public func observe<Value: Equatable>(
        _ key: DefaultsKey<Value>,
        options: KeyValueObservingOptions = [],
        removingDuplicates: Bool,
        changeHandler: @escaping @Sendable (DefaultsStore, DefaultsChange<Value>) -> Void
    ) -> KeyValueObservation {
        if let layerStack {
            return _observeLayered(
                layerStack, key, options: options, isDuplicate: removingDuplicates ? Self.equality(of: Value.self) : nil,
                changeHandler: changeHandler)
        }
        return _observe(key, options: options, removingDuplicates: removingDuplicates, changeHandler: changeHandler)
    }

    @inlinable
    func _observe<Value>(
        _ key: DefaultsKey<Value>,
        options: KeyValueObservingOptions,
        removingDuplicates: Bool,
        changeHandler: @escaping @Sendable (DefaultsStore, DefaultsChange<Value>) -> Void
    ) -> KeyValueObservation {
        if let layerStack { return _observeLayered(layerStack, key, options: options, isDuplicate: nil, changeHandler: changeHandler) }
        weak let store = self
        // The change's origin travels in its values: the registry always carries the new one, and
        // the old one for `.prior`.
        var carried = options.union(.new)
        if options.contains(.prior) { carried.insert(.old) }
        let keyPath = DefaultsKeyNames.keyPath(at: key.offset)
        let handler: @Sendable (DefaultsStorage, KeyValueObservedChange<DefaultsStorage.KeyValue>) -> Void = { storage, change in
            guard let store, let value = change.isPrior ? change.oldValue : change.newValue, storage.isCurrent(value) else { return }
            let new = options.contains(.new) && !change.isPrior ? storage.value(after: value, for: key) : nil
            let old = options.contains(.old) ? change.oldValue.map { storage.value(after: $0, for: key) } : nil
            changeHandler(
                store,
                DefaultsChange(
                    key: key.name, newValue: new, oldValue: old, isPrior: change.isPrior, origin: value.origin,
                    revision: value.revision <= 0 ? nil : value.revision,
                    layer: value.entry == nil || value.revision < 0 ? storage.kind(after: value, for: key) : .store))
        }
        return removingDuplicates
            ? storage.observe(keyPath, options: carried, removingDuplicates: true, changeHandler: handler)
            : storage.observe(keyPath, options: carried, changeHandler: handler)
    }

    /// The values of `key` as an `AsyncSequence`, the `values(for:options:buffering:)` of
    /// `KeyValueObservable`: with the default `[.initial, .new]`, the current value, then the value
    /// after every change, from this process or another one. The observation ends when the
    /// consuming task is cancelled or the sequence is dropped; the sequence finishes when the last
    /// store on the file is deallocated.
    public func values<Value>(
        for key: DefaultsKey<Value>,
        options: KeyValueObservingOptions = [.initial, .new],
        buffering: KeyValueObservationBuffering = .unbounded
    ) -> KeyValueObservationValues<Value> {
        if let layerStack { return _valuesLayered(layerStack, for: key, options: options, isDuplicate: nil, buffering: buffering) }
        return storage._values(
            for: DefaultsKeyNames.keyPath(at: key.offset), options: options, isDuplicate: nil, buffering: buffering,
            transform: Self.typedValue(of: key))
    }

    /// `values(for:options:buffering:)` without the values equal to the previous one.
    public func values<Value: Equatable>(
        for key: DefaultsKey<Value>,
        options: KeyValueObservingOptions = [.initial, .new],
        buffering: KeyValueObservationBuffering = .unbounded,
        removingDuplicates: Bool
    ) -> KeyValueObservationValues<Value> {
        if let layerStack {
            return _valuesLayered(
                layerStack, for: key, options: options, isDuplicate: removingDuplicates ? Self.equality(of: Value.self) : nil,
                buffering: buffering)
        }
        let isDuplicate: (@Sendable (DefaultsStorage.KeyValue, DefaultsStorage.KeyValue) -> Bool)? =
            removingDuplicates ? { @Sendable (old, new) in old == new } : nil
        return storage._values(
            for: DefaultsKeyNames.keyPath(at: key.offset), options: options, isDuplicate: isDuplicate, buffering: buffering,
            transform: Self.typedValue(of: key))
    }

    /// The changes of `key` as an `AsyncSequence` of `DefaultsChange`, the `changes(for:)` of
    /// `KeyValueObservable`: with the default `[.old, .new]`, each change's old and new values, where
    /// it came from (this process or another, which layer), from the next change on. The
    /// observation ends when the consuming task is cancelled or the sequence is dropped; the
    /// sequence finishes when the last store on the file is deallocated.
    ///
    /// ```swift
    /// for await change in store.changes(for: speed) where change.isFromAnotherProcess {
    ///     print(change.oldValue!, "→", change.newValue!)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - key: the key to observe.
    ///   - options: as for `observe(_:options:changeHandler:)` (`.initial` gives the current value
    ///     first).
    ///   - buffering: how changes the consumer has not taken yet are kept.
    /// - Returns: the sequence of changes.
    public func changes<Value>(
        for key: DefaultsKey<Value>,
        options: KeyValueObservingOptions = [.old, .new],
        buffering: KeyValueObservationBuffering = .unbounded
    ) -> DefaultsChanges<Value> {
        DefaultsChanges(
            stream: _observationStream(buffering: buffering) { yield in
                observe(key, options: options) { _, change in yield(change) }
            })
    }

    /// Observes `key` for a display or a metrics exporter, the `observe(_:throttledTo:on:handler:)`
    /// of `KeyValueObservable`: at most one delivery per `interval`, always of the latest value, and
    /// always ending with the last one, on `queue`, never twice at once. A first delivery is
    /// scheduled at once with the current value.
    public func observe<Value>(
        _ key: DefaultsKey<Value>,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        _observe(key, throttledTo: interval, on: queue, isDuplicate: nil, scheduler: _DispatchThrottleScheduler(), handler: handler)
    }

    /// `observe(_:throttledTo:on:handler:)` for `Equatable` values: a value equal to the one
    /// delivered last is not delivered again.
    public func observe<Value: Equatable>(
        _ key: DefaultsKey<Value>,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        _observe(
            key, throttledTo: interval, on: queue, isDuplicate: { $0 == $1 }, scheduler: _DispatchThrottleScheduler(), handler: handler)
    }

    /// The values of `key` for a display, as an `AsyncSequence`, the `values(for:throttledTo:)` of
    /// `KeyValueObservable`: the current value first, then the latest value at most once per
    /// `interval`, and always the final one.
    public func values<Value>(for key: DefaultsKey<Value>, throttledTo interval: Duration) -> KeyValueThrottledValues<Value> {
        _values(for: key, throttledTo: interval, isDuplicate: nil, scheduler: _DispatchThrottleScheduler())
    }

    /// `values(for:throttledTo:)` for `Equatable` values: a value equal to the one returned last is
    /// not returned again.
    public func values<Value: Equatable>(for key: DefaultsKey<Value>, throttledTo interval: Duration) -> KeyValueThrottledValues<Value> {
        _values(for: key, throttledTo: interval, isDuplicate: { $0 == $1 }, scheduler: _DispatchThrottleScheduler())
    }

    /// `observe(_:throttledTo:on:handler:)` with its duplicate test and scheduler (a manual clock in
    /// tests).
    package func _observe<Value>(
        _ key: DefaultsKey<Value>,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        scheduler: any _ThrottleScheduler,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        if let layerStack {
            layerStack.forwardStorageChanges()
            return layerStack._observe(
                DefaultsLayerStack.keyPath(at: key.offset), throttledTo: interval, on: queue, isDuplicate: isDuplicate,
                scheduler: scheduler,
                transform: Self.effectiveValue(of: key), handler: handler)
        }
        return storage._observe(
            DefaultsKeyNames.keyPath(at: key.offset), throttledTo: interval, on: queue, isDuplicate: isDuplicate, scheduler: scheduler,
            transform: Self.typedValue(of: key), handler: handler)
    }

    /// `values(for:throttledTo:)` with its duplicate test and scheduler (a manual clock in tests).
    package func _values<Value>(
        for key: DefaultsKey<Value>,
        throttledTo interval: Duration,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        scheduler: any _ThrottleScheduler
    ) -> KeyValueThrottledValues<Value> {
        if let layerStack {
            layerStack.forwardStorageChanges()
            return layerStack._values(
                for: DefaultsLayerStack.keyPath(at: key.offset), throttledTo: interval, isDuplicate: isDuplicate, scheduler: scheduler,
                transform: Self.effectiveValue(of: key))
        }
        return storage._values(
            for: DefaultsKeyNames.keyPath(at: key.offset), throttledTo: interval, isDuplicate: isDuplicate, scheduler: scheduler,
            transform: Self.typedValue(of: key))
    }

    /// `==` as a duplicate test.
    @usableFromInline
    static func equality<Value: Equatable & Sendable>(of _: Value.Type) -> @Sendable (Value, Value) -> Bool {
        { $0 == $1 }
    }

    /// The typed value a sequence or a throttle gets for a `KeyValue`, or `nil` for a change that a
    /// later one of the same key overtook.
    static func typedValue<Value>(of key: DefaultsKey<Value>) -> @Sendable (DefaultsStorage, DefaultsStorage.KeyValue) -> Value? {
        { storage, value in storage.isCurrent(value) ? storage.value(after: value, for: key) : nil }
    }
}

/// The changes of a defaults key, as an `AsyncSequence` (`DefaultsStore.changes(for:options:buffering:)`).
public struct DefaultsChanges<Value: Sendable>: AsyncSequence, Sendable {
    public typealias Element = DefaultsChange<Value>

    let stream: AsyncStream<DefaultsChange<Value>>

    /// The sequence's iterator.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<DefaultsChange<Value>>.AsyncIterator

        public mutating func next() async -> DefaultsChange<Value>? {
            await base.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator())
    }
}
