extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Announces that the value of `keyPath` is about to change, for state the `@Observed` wrapper
    /// cannot see (a dictionary, a C buffer, another object), or for keys whose automatic
    /// notification the class turned off (`automaticallyNotifiesObservers(for:)`).
    ///
    /// Observers that asked for `.prior` are notified now; the others when you call
    /// `didChangeValue(for:)` with the same key, on the same thread, after changing the value. Pairs
    /// nest (innermost first), as in Foundation:
    ///
    /// ```swift
    /// func setSetting(_ value: String, for name: String) {
    ///     willChangeValue(for: \.settings)
    ///     storage[name] = value
    ///     didChangeValue(for: \.settings)
    /// }
    /// ```
    ///
    /// Observers of dependent keys that list `keyPath` among their inputs are notified too.
    public func willChangeValue<Value>(for keyPath: KeyPath<Self, Value>, fileID: String = #fileID, line: UInt = #line) {
        let registry = _registryCreatingIfNeeded()
        let slots = _ObservationRoute.manualNotificationSlots(for: keyPath, of: self, in: registry)
        let snapshots = slots.compactMap { registry.snapshot(for: $0) }
        let needsOld = snapshots.contains { $0.needsOld }
        let oldValue: Value? = needsOld ? self[keyPath: keyPath] : nil
        registry.anyKeySnapshot()?.willChange(self, keyPath)
        let pending = snapshots.map { $0.willChange(on: self, oldValue: oldValue) }
        registry.pushPendingChange(
            _ObserverRegistry.PendingChange(
                keyPath: keyPath,
                fileID: fileID,
                line: line,
                snapshots: snapshots,
                oldValue: oldValue,
                pending: pending
            ))
    }

    /// Announces that the value of `keyPath` has changed, notifying its observers (see
    /// `willChangeValue(for:)`).
    ///
    /// A call without a matching `willChangeValue(for:)` on this thread, or one that does not close
    /// the innermost pending key, notifies nobody and is reported through
    /// `KeyValueObservingDiagnosticCenter`.
    public func didChangeValue<Value>(for keyPath: KeyPath<Self, Value>, fileID: String = #fileID, line: UInt = #line) {
        guard let registry = _existingRegistry, let change = registry.innermostPendingChange() else {
            KeyValueObservingDiagnosticCenter.report(
                KeyValueObservingDiagnostic(
                    kind: .unbalancedChangeNotification,
                    objectType: type(of: self),
                    keyPath: keyPath,
                    detail: "didChangeValue(for:) without a matching willChangeValue(for:) on this thread; "
                        + "no notification was sent. Fix: call willChangeValue(for:) before changing the value.",
                    fileID: fileID,
                    line: line
                ))
            return
        }
        guard _sameKey(change.keyPath, keyPath) else {
            KeyValueObservingDiagnosticCenter.report(
                KeyValueObservingDiagnostic(
                    kind: .unbalancedChangeNotification,
                    objectType: type(of: self),
                    keyPath: keyPath,
                    detail: "didChangeValue(for:) while the innermost pending willChangeValue(for:) on this thread is "
                        + "for \(KeyValueObservingDiagnostic.describe(change.keyPath)); no notification was sent. "
                        + "Fix: close nested changes innermost first.",
                    fileID: fileID,
                    line: line
                ))
            return
        }
        registry.popPendingChange()
        let newValue = self[keyPath: keyPath]
        let oldValue = change.oldValue.map { $0 as! Value }
        for (snapshot, pending) in zip(change.snapshots, change.pending) {
            snapshot.didChange(newValue, oldValue: oldValue, pending: pending, on: self)
        }
        registry.anyKeySnapshot()?.didChange(self, keyPath)
    }
}

extension _ObservationRoute {
    /// The slots whose observers a manual notification of `keyPath` reaches: its own (observers of
    /// keys that are not `@Observed`, dependent keys, and dependents listing it as an input) and, for
    /// an `@Observed` property, the property's. Reports nothing: any key may be notified manually.
    static func manualNotificationSlots<Root: KeyValueObservable, Value>(
        for keyPath: KeyPath<Root, Value>,
        of object: Root,
        in registry: _ObserverRegistry
    ) -> [_SlotKey] {
        var slots: [_SlotKey] = [.keyPath(keyPath)]
        if let known = _ObservedKeyCache.lookUp(keyPath, in: type(of: object)) {
            slots.append(.observedProperty(known.canonical, isZeroSized: known.isZeroSized))
            return slots
        }
        let reads = registry.probe { _ = object[keyPath: keyPath] }
        if let read = reads.first, reads.allSatisfy({ _sameKey($0.key, read.key) }),
            read.key == keyPath || (isInherited(read.key, by: keyPath) && keyPath is ReferenceWritableKeyPath<Root, Value>)
        {
            slots.append(.observedProperty(read.key, isZeroSized: read.isZeroSized))
        }
        return slots
    }
}
