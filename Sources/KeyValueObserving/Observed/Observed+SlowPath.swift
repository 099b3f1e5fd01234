import Synchronization

// The set path of `Observed._setObserved` when a slow-path flag is set or the property is zero-sized.

extension Observed {
    /// The slow path of a set: everything `_setObserved` does not do itself. The object has observers
    /// of every key together with a batch or a silenced setter (they are told before the key's own
    /// observers, with `.prior`, and after them), an open batch (on this thread, the change is
    /// announced at the first change of the key and delivered when the batch ends) or a silenced
    /// setter, or the property is zero-sized. A change the calling thread's batch can record through
    /// its shortcut (`recordInOwnedBatch`) takes no lock; anything else finds what it needs under one
    /// lock (`_setSlowPathLocked`).
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
        // Read again rather than passed: one argument fewer to pass on the stack.
        let flags = registry._withUnsafeGuaranteedRef { $0.slowPathFlags.load(ordering: .acquiring) }
        // Zero-sized properties are found by key path, and a silenced setter by its key: under the lock.
        if MemoryLayout<Value>.size != 0, flags & (_SlowPath.batch | _SlowPath.silencedSetter) == _SlowPath.batch {
            let recorded = _shortcutRecord(storage: storage, storageOffset: storageOffset, registry: registry)
            if _storeRecorded(recorded, newValue, storage: storage) { return }
            if case .recordWithKey(let batch, let slot, let version) = recorded {
                _recordInBatchWithKey(
                    newValue, on: object, storage: storage, storageOffset: storageOffset, slot: slot, version: version, key: key,
                    batch: batch)
                return
            }
        }
        _setSlowPathLocked(newValue, on: object, storage: storage, storageOffset: storageOffset, key: key, registry: registry, flags: flags)
    }

    /// The set path when the object has observers of every key and neither a batch nor a silenced
    /// setter: in one read section of the set table (`ObserverRegistry+ReadPath.swift`), with no lock
    /// and no retain, the observers of every key (`.prior`), the key's own observers around the
    /// store, then the observers of every key again. The table gives the key and, for a key without
    /// observers of its own, whether its class lets a set notify.
    ///
    /// The first set of a property the table does not know yet teaches the registry its key (`key`)
    /// and asks `automaticallyNotifiesObservers(for:)` once, outside the lock; the set then goes on
    /// here, with the table published meanwhile (or, if that one cannot tell either, on the locked
    /// path).
    @inlinable
    @inline(never)
    static func _setNotifyingAnyKeyUnlocked<EnclosingSelf: KeyValueObservable>(
        _ newValue: Value,
        on object: EnclosingSelf,
        storage: UnsafeMutablePointer<Observed<Value>>,
        storageOffset: Int,
        key: () -> AnyKeyPath,
        registry: Unmanaged<_ObserverRegistry>
    ) {
        var hasLearned = false
        while true {
            let reading = registry._withUnsafeGuaranteedRef { $0.enterReading() }
            if let (element, anyKey) = registry._withUnsafeGuaranteedRef({ $0.knownElementInReadSection(atOffset: storageOffset) }) {
                _deliver(newValue, to: element, anyKey: anyKey, storage: storage, storageOffset: storageOffset, on: object)
                registry._withUnsafeGuaranteedRef { $0.exitReading(reading) }
                return
            }
            registry._withUnsafeGuaranteedRef { $0.exitReading(reading) }
            if hasLearned { break }
            hasLearned = true
            registry._withUnsafeGuaranteedRef {
                $0.learnForAnyKeyObservers(offset: storageOffset, key: key) { type(of: object).automaticallyNotifiesObservers(for: $0) }
            }
        }
        let flags = registry._withUnsafeGuaranteedRef { $0.slowPathFlags.load(ordering: .acquiring) }
        _setSlowPathLocked(newValue, on: object, storage: storage, storageOffset: storageOffset, key: key, registry: registry, flags: flags)
    }

    /// The body of `_setNotifyingAnyKeyUnlocked`, inside its read section: `element` and `anyKey`
    /// are borrowed from the set table.
    @inlinable
    @inline(__always)
    static func _deliver<EnclosingSelf: KeyValueObservable>(
        _ newValue: Value,
        to element: _ObserverSetTable.Element,
        anyKey: Unmanaged<_AnyKeySnapshot>?,
        storage: UnsafeMutablePointer<Observed<Value>>,
        storageOffset: Int,
        on object: EnclosingSelf
    ) {
        // A key with observers of its own: its snapshot says whether a set notifies; else the table
        // has the class's answer (`knownElement` checked it is there).
        guard element.notifies == true, let key = element.key else {
            storage.pointee._value = newValue
            return
        }
        key._withUnsafeGuaranteedRef { key in
            anyKey?._withUnsafeGuaranteedRef { $0.willChange(object, key, storageOffset: storageOffset) }
            _deliver(newValue, to: element.observers, storage: storage, on: object)
            anyKey?._withUnsafeGuaranteedRef { $0.didChange(object, borrowing: key, storageOffset: storageOffset) }
        }
    }

    /// Records a change in the calling thread's batch, through its shortcut, with its key when no
    /// observer's slot names it (then the class decides whether the key notifies automatically).
    @inlinable
    @inline(never)
    static func _recordInBatchWithKey(
        _ newValue: Value,
        on object: KeyValueObservable,
        storage: UnsafeMutablePointer<Observed<Value>>,
        storageOffset: Int,
        slot: Int,
        version: UInt,
        key: () -> AnyKeyPath,
        batch: Unmanaged<_BatchState>
    ) {
        var changedKey: AnyKeyPath?
        if slot < 0 {
            let key = key()
            guard type(of: object).automaticallyNotifiesObservers(for: key) else {
                storage.pointee._value = newValue
                return
            }
            changedKey = key
        }
        batch._withUnsafeGuaranteedRef { batch in
            _ = _recordBatchedChange(in: batch, offset: storageOffset, storage: storage, slotIndex: slot, version: version, key: changedKey)
        }
        storage.pointee._value = newValue
    }

    /// The rest of `_setSlowPath`: everything the set needs, found under one lock
    /// (`slowPathLookup`). `key` is only called when no slot names the property.
    @inlinable
    @inline(never)
    static func _setSlowPathLocked(
        _ newValue: Value,
        on object: KeyValueObservable,
        storage: UnsafeMutablePointer<Observed<Value>>,
        storageOffset: Int,
        key: () -> AnyKeyPath,
        registry: Unmanaged<_ObserverRegistry>,
        flags: UInt8
    ) {
        let isZeroSized = MemoryLayout<Value>.size == 0
        // Zero-sized properties may share their offset with another property: they are found by key
        // path, as a silenced setter is recognised. No storage is at offset -1.
        let offset = isZeroSized ? -1 : storageOffset
        let namingOffset: Int? = isZeroSized ? nil : storageOffset
        var changedKey: AnyKeyPath? = isZeroSized || flags & _SlowPath.silencedSetter != 0 ? key() : nil
        var snapshot: _ObserverSnapshot?
        var anyKey: _AnyKeySnapshot?
        let found = registry._withUnsafeGuaranteedRef {
            $0.slowPathLookup(offset: offset, flags: flags, key: &changedKey, snapshot: &snapshot, anyKey: &anyKey)
        }
        if found.storesOnly {
            storage.pointee._value = newValue
            return
        }
        if found.needsLearning {
            snapshot = registry._withUnsafeGuaranteedRef { $0.snapshot(forStorageAt: storageOffset, key: key) }
        }
        // No observers at all (a zero-sized property without any, say): the set only stores.
        if snapshot == nil, anyKey == nil, found.batch == nil {
            storage.pointee._value = newValue
            return
        }
        let keyPath = changedKey ?? key()
        let automatic = snapshot?.notifiesAutomatically ?? type(of: object).automaticallyNotifiesObservers(for: keyPath)
        guard automatic else {
            storage.pointee._value = newValue
            return
        }
        if let batch = found.batch {
            batch._withUnsafeGuaranteedRef { batch in
                // Observers of every key hear of the batch's first change only.
                let isFirst = !batch.anyKeyPriorSent
                let extra = _recordBatchedChange(
                    in: batch, offset: offset, storage: storage, slotIndex: found.slotIndex, version: found.version, key: keyPath)
                if isFirst { anyKey?.willChange(object, keyPath, storageOffset: namingOffset) }
                if let snapshot, snapshot.needsWillChange {
                    if let values = snapshot.willChange(on: object, oldValue: storage.pointee._value, batch: batch), extra >= 0 {
                        batch.extras[extra].pending = _BatchedPending(observers: snapshot, values: values)
                    }
                }
            }
            storage.pointee._value = newValue
            return
        }
        anyKey?.willChange(object, keyPath, storageOffset: namingOffset)
        if let snapshot {
            let oldValue: Value? = snapshot.needsOld ? storage.pointee._value : nil
            let pending = snapshot.willChange(on: object, oldValue: oldValue, newValue: newValue)
            storage.pointee._value = newValue
            snapshot.didChange(newValue, oldValue: oldValue, pending: pending, on: object)
        } else {
            storage.pointee._value = newValue
        }
        anyKey?.didChange(object, keyPath, storageOffset: namingOffset)
    }

}
