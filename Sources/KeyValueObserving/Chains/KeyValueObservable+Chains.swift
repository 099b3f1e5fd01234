import Synchronization

extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Observes a value reached through an observable intermediate, `first` then `second`: the
    /// `player.currentItem?.status` of Foundation's key-path observation.
    ///
    /// ```swift
    /// let token = player.observe(\.currentItem, \.status, options: [.initial, .new]) { player, change in
    ///     print(change.newValue as Any)   // nil while there is no item
    /// }
    /// ```
    ///
    /// The handler runs after every assignment to any segment (the intermediate included), equal
    /// values included, as for a single key; use `.prior`/`.old` to compare. When the intermediate is
    /// replaced, the observation moves to the new object: changes of the old one are no longer
    /// reported, and it is not retained. A nil intermediate gives a nil value.
    ///
    /// - Returns: The token; keep it.
    @inlinable
    public func observe<Intermediate: KeyValueObservable, Value>(
        _ first: KeyPath<Self, Intermediate?>,
        _ second: KeyPath<Intermediate, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value?>) -> Void
    ) -> KeyValueObservation {
        _observeChain(
            segments: [
                .step(first, fileID: fileID, line: line) { $0 },
                .step(second, fileID: fileID, line: line) { _ in nil },
            ],
            value: { root in root[keyPath: first]?[keyPath: second] },
            options: options,
            changeHandler: changeHandler
        )
    }

    /// Observes a value reached through an observable intermediate that is never nil.
    @inlinable
    public func observe<Intermediate: KeyValueObservable, Value>(
        _ first: KeyPath<Self, Intermediate>,
        _ second: KeyPath<Intermediate, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        _observeChain(
            segments: [
                .step(first, fileID: fileID, line: line) { $0 },
                .step(second, fileID: fileID, line: line) { _ in nil },
            ],
            value: { root in root[keyPath: first][keyPath: second] },
            options: options,
            changeHandler: changeHandler
        )
    }

    /// Observes a value reached through two observable intermediates, either of which may be nil.
    @inlinable
    public func observe<First: KeyValueObservable, Second: KeyValueObservable, Value>(
        _ first: KeyPath<Self, First?>,
        _ second: KeyPath<First, Second?>,
        _ third: KeyPath<Second, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value?>) -> Void
    ) -> KeyValueObservation {
        _observeChain(
            segments: [
                .step(first, fileID: fileID, line: line) { $0 },
                .step(second, fileID: fileID, line: line) { $0 },
                .step(third, fileID: fileID, line: line) { _ in nil },
            ],
            value: { root in root[keyPath: first]?[keyPath: second]?[keyPath: third] },
            options: options,
            changeHandler: changeHandler
        )
    }

    /// Observes a value reached through two observable intermediates that are never nil.
    @inlinable
    public func observe<First: KeyValueObservable, Second: KeyValueObservable, Value>(
        _ first: KeyPath<Self, First>,
        _ second: KeyPath<First, Second>,
        _ third: KeyPath<Second, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        _observeChain(
            segments: [
                .step(first, fileID: fileID, line: line) { $0 },
                .step(second, fileID: fileID, line: line) { $0 },
                .step(third, fileID: fileID, line: line) { _ in nil },
            ],
            value: { root in root[keyPath: first][keyPath: second][keyPath: third] },
            options: options,
            changeHandler: changeHandler
        )
    }

    @inlinable
    func _observeChain<Value>(
        segments: [_ChainSegment],
        value: @escaping (Self) -> Value,
        options: KeyValueObservingOptions,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        // The reader only runs on the thread changing the chain, like the handler.
        nonisolated(unsafe) let value = value
        let state = _ChainValueState<Value>()
        let initial = value(self)
        state.lastValue.withLock { $0 = initial }
        let chain = _ChainObserver(
            root: self,
            segments: segments,
            wantsPrior: options.contains(.prior),
            willChange: { root in
                guard options.contains(.prior) else { return }
                let root = unsafeDowncast(root, to: Self.self)
                let old = options.contains(.old) ? state.lastValue.withLock { $0 } : nil
                changeHandler(root, KeyValueObservedChange(settingNew: nil, old: old, isPrior: true))
            },
            didChange: { root in
                let root = unsafeDowncast(root, to: Self.self)
                let new = value(root)
                let old = state.lastValue.withLock { last in
                    defer { last = new }
                    return last
                }
                changeHandler(root, KeyValueObservedChange(
                    settingNew: options.contains(.new) ? new : nil,
                    old: options.contains(.old) ? old : nil
                ))
            }
        )
        if options.contains(.initial) {
            changeHandler(self, KeyValueObservedChange(settingNew: options.contains(.new) ? initial : nil, old: nil))
        }
        // An id in the root's registry (with no entry), so that sequences built on the chain can
        // finish when the root is deallocated.
        let registry = _registryCreatingIfNeeded()
        return KeyValueObservation(registry: registry, id: registry.makeID(), parts: [chain])
    }
}

/// The value a chain observer delivered last, for `.old`.
@usableFromInline
final class _ChainValueState<Value>: Sendable {
    @usableFromInline let lastValue = _Locked<Value?>(nil)

    @usableFromInline
    init() {}
}
