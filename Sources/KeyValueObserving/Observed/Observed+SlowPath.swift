import Synchronization

// The locked set path of `Observed._setObserved`: a slow-path flag is set or the property is
// zero-sized.

extension Observed {
    /// The locked path of a set: everything the lock-free one does not do. The object has observers
    /// of every key (told before the key's own observers, with `.prior`, and after them), an open
    /// batch (on this thread, the change is announced at the first change of the key and delivered
    /// when the batch ends), a silenced setter (a to-many mutation sends its own notification), or
    /// the property is zero-sized (found by key path: zero-sized properties may share an offset).
    ///
    /// What the set needs is found under one lock (`slowPathLookup`); `key` is only called when no
    /// slot names the property. The handlers run after unlocking.
    @inlinable
    @inline(never)
    static func _setSlowPath(
        _ newValue: Value,
        on object: KeyValueObservable,
        storage: UnsafeMutablePointer<Observed<Value>>,
        storageOffset: Int,
        key: () -> AnyKeyPath,
        registry: Unmanaged<_ObserverRegistry>
    ) {
        let flags = registry._withUnsafeGuaranteedRef { $0.slowPathFlags.load(ordering: .acquiring) }
        let isZeroSized = MemoryLayout<Value>.size == 0
        // No storage is at offset -1.
        let offset = isZeroSized ? -1 : storageOffset
        let namingOffset: Int? = isZeroSized ? nil : storageOffset
        var changedKey: AnyKeyPath? = isZeroSized || flags & _SlowPath.silencedSetter != 0 ? key() : nil
        var snapshot: _ObserverSnapshot?
        var anyKey: _AnyKeySnapshot?
        let found = registry._withUnsafeGuaranteedRef {
            $0.slowPathLookup(offset: offset, flags: flags, key: &changedKey, snapshot: &snapshot, anyKey: &anyKey)
        }
        if found.needsLearning {
            snapshot = registry._withUnsafeGuaranteedRef { $0.snapshot(forStorageAt: storageOffset, key: key) }
        }
        // Whether anyone hears of the set: not when it only stores, has no observers at all, or its
        // class turned automatic notification off for the key.
        var keyPath: AnyKeyPath?
        if !found.storesOnly, snapshot != nil || anyKey != nil || found.batch != nil {
            let named = changedKey ?? key()
            var notifies = snapshot?.notifiesAutomatically ?? found.notifies
            if notifies == nil {
                // The class's answer, asked once per key and object (user code: outside the lock).
                let answer = type(of: object).automaticallyNotifiesObservers(for: named)
                if !isZeroSized {
                    registry._withUnsafeGuaranteedRef { $0.rememberAutomaticNotification(offset: offset, key: named, notifies: answer) }
                }
                notifies = answer
            }
            if notifies == true { keyPath = named }
        }
        // Before the store.
        var oldValue: Value?
        var pending: ContiguousArray<Any?>?
        if let keyPath {
            if let batch = found.batch {
                batch._withUnsafeGuaranteedRef { batch in
                    // Observers of every key hear of the batch's first change only.
                    let isFirst = !batch.anyKeyPriorSent
                    let needsWillChange = snapshot?.needsWillChange ?? false
                    // A key a slot names needs no copy of its own unless values are kept for it.
                    let recordedKey = offset >= 0 && found.slotIndex >= 0 && !needsWillChange ? nil : keyPath
                    let extra = _recordBatchedChange(
                        in: batch, offset: offset, storage: storage, slotIndex: found.slotIndex, version: found.version,
                        key: recordedKey)
                    if isFirst { anyKey?.willChange(object, keyPath, storageOffset: namingOffset) }
                    if let snapshot, needsWillChange,
                        let values = snapshot.willChange(on: object, oldValue: storage.pointee._value, batch: batch), extra >= 0
                    {
                        batch.extras[extra].pending = _BatchedPending(observers: snapshot, values: values)
                    }
                }
            } else {
                anyKey?.willChange(object, keyPath, storageOffset: namingOffset)
                if let snapshot {
                    oldValue = snapshot.needsOld ? storage.pointee._value : nil
                    pending = snapshot.willChange(on: object, oldValue: oldValue, newValue: newValue)
                }
            }
        }
        storage.pointee._value = newValue
        // After it, unless the batch delivers at its end.
        guard let keyPath, found.batch == nil else { return }
        snapshot?.didChange(newValue, oldValue: oldValue, pending: pending, on: object)
        anyKey?.didChange(object, keyPath, storageOffset: namingOffset)
    }
}
