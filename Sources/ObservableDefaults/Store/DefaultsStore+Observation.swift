import KeyValueObserving

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
    ///   before the change notification, after the new value is visible.
    /// - Every assignment notifies, equal values included, as in KVO; a value read back from the file
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
        weak let store = self
        let storage = self.storage
        let id = storage.addObserver(key: key.name, wantsPrior: options.contains(.prior)) { [weak storage] record in
            guard let store, let storage else { return }
            let new = options.contains(.new) && !record.isPrior ? storage.value(of: record.new, for: key) : nil
            let old = options.contains(.old) ? storage.value(of: record.old, for: key) : nil
            changeHandler(
                store,
                DefaultsChange(
                    key: key.name, newValue: new, oldValue: old, isPrior: record.isPrior, origin: record.origin,
                    revision: record.revision == 0 ? nil : record.revision))
        }
        let token = KeyValueObservation(invalidating: DefaultsObserverHandle(storage: storage, id: id, key: key.name))
        if options.contains(.initial) {
            let current = options.contains(.new) ? value(for: key) : nil
            changeHandler(self, DefaultsChange(key: key.name, newValue: current, oldValue: nil, origin: .thisProcess))
        }
        return token
    }

    /// The values of `key` as an `AsyncSequence`: with the default `[.initial, .new]`, the current
    /// value, then the value after every change, from this process or another one. The observation
    /// ends when the consuming task is cancelled or the sequence is dropped; the sequence finishes
    /// when the last store on the file is deallocated.
    public func values<Value>(
        for key: DefaultsKey<Value>,
        options: KeyValueObservingOptions = [.initial, .new]
    ) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream()
        var internalOptions = options.union(.new)
        if options.contains(.prior) { internalOptions.insert(.old) }
        let storage = self.storage
        let id = storage.addObserver(
            key: key.name,
            wantsPrior: options.contains(.prior),
            deliver: { [weak storage] record in
                guard let storage else { return }
                continuation.yield(storage.value(of: record.isPrior ? record.old : record.new, for: key))
            },
            finish: { continuation.finish() }
        )
        let token = KeyValueObservation(invalidating: DefaultsObserverHandle(storage: storage, id: id, key: key.name))
        continuation.onTermination = { _ in token.invalidate() }
        if options.contains(.initial) { continuation.yield(value(for: key)) }
        return stream
    }
}

/// What a defaults observation's token ends.
@usableFromInline
final class DefaultsObserverHandle: _Invalidatable {
    weak let storage: DefaultsStorage?
    let id: UInt64
    let key: String?

    @usableFromInline
    init(storage: DefaultsStorage, id: UInt64, key: String?) {
        self.storage = storage
        self.id = id
        self.key = key
    }

    @usableFromInline
    func invalidate() {
        storage?.removeObserver(id: id, key: key)
    }
}
