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
    /// The registry decides what to do under its lock, once (`_ObserverRegistry.setAction`); `key`
    /// is only called when the registry does not know the property's key. The handlers run after
    /// unlocking.
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
        let named: AnyKeyPath? = isZeroSized || flags & _SlowPath.silencedSetter != 0 ? key() : nil
        let thread: _ThreadID? = flags & (_SlowPath.batch | _SlowPath.silencedSetter) != 0 ? _ThreadID.current : nil
        let action = registry._withUnsafeGuaranteedRef { $0.setAction(offset: offset, key: named, thread: thread) }
        switch action.kind {
        case .store:
            _deliver(newValue, to: nil, storage: storage, on: object)
        case .record:
            action.batch.unsafelyUnwrapped._withUnsafeGuaranteedRef {
                _ = _recordBatchedChange(in: $0, offset: offset, storage: storage, slotIndex: action.slotIndex, key: nil)
            }
            _deliver(newValue, to: nil, storage: storage, on: object)
        case .notify:
            _notifyAroundStore(newValue, action, on: object, storage: storage, offset: offset, named: named, key: key, registry: registry)
        }
    }

    /// The `.notify` action of the locked path (`_SetAction`): learns the property's offset if a slot
    /// waits for it, asks the class whether the key notifies if no slot says, tells the observers
    /// that hear before the store (in a batch, records the change instead of telling after it),
    /// stores, and tells the others.
    @inlinable
    @inline(never)
    static func _notifyAroundStore(
        _ newValue: Value,
        _ action: _SetAction,
        on object: KeyValueObservable,
        storage: UnsafeMutablePointer<Observed<Value>>,
        offset: Int,
        named: AnyKeyPath?,
        key: () -> AnyKeyPath,
        registry: Unmanaged<_ObserverRegistry>
    ) {
        // The one store of this path, in each branch where it belongs (a local closure, inlined).
        let store = { storage.pointee._value = newValue }
        let namingOffset: Int? = offset < 0 ? nil : offset
        let taken = action.observers?.takeRetainedValue()
        let anyKey = action.anyKey?.takeRetainedValue()
        let knownKey = action.key?.takeRetainedValue()
        // A slot waits to learn its offset only when none knows this one: `taken` is `nil` then.
        let observers = action.needsLearning ? registry._withUnsafeGuaranteedRef { $0.snapshot(forStorageAt: offset, key: key) } : taken
        // Nobody hears of the set when it has no observers at all, or its class turned automatic
        // notification off for the key.
        guard observers != nil || anyKey != nil || action.batch != nil else { return store() }
        let keyPath = knownKey ?? named ?? key()
        var notifies = observers?.notifiesAutomatically ?? action.notifies
        if notifies == nil {
            // The class's answer, asked once per key and object (user code: outside the lock).
            let answer = type(of: object).automaticallyNotifiesObservers(for: keyPath)
            if offset >= 0 {
                registry._withUnsafeGuaranteedRef { $0.rememberAutomaticNotification(offset: offset, key: keyPath, notifies: answer) }
            }
            notifies = answer
        }
        guard notifies == true else { return store() }
        if let batch = action.batch {
            // Recorded, and delivered when the batch ends; those that hear before the store are told now.
            batch._withUnsafeGuaranteedRef { batch in
                let needsWillChange = observers?.needsWillChange ?? false
                // A key a slot names needs no copy of its own unless values are kept for it.
                let recordedKey = offset >= 0 && action.slotIndex >= 0 && !needsWillChange ? nil : keyPath
                let extra = _recordBatchedChange(in: batch, offset: offset, storage: storage, slotIndex: action.slotIndex, key: recordedKey)
                anyKey?.willChange(object, keyPath, storageOffset: namingOffset)
                if let observers, needsWillChange,
                    let values = observers.willChange(on: object, oldValue: storage.pointee._value, batch: batch), extra >= 0
                {
                    batch.extras[extra].pending = _BatchedPending(observers: observers, values: values)
                }
            }
            return store()
        }
        anyKey?.willChange(object, keyPath, storageOffset: namingOffset)
        guard let observers else {
            store()
            anyKey?.didChange(object, keyPath, storageOffset: namingOffset)
            return
        }
        let oldValue: Value? = observers.needsOld ? storage.pointee._value : nil
        let pending = observers.willChange(on: object, oldValue: oldValue, newValue: newValue)
        store()
        observers.didChange(newValue, oldValue: oldValue, pending: pending, on: object)
        anyKey?.didChange(object, keyPath, storageOffset: namingOffset)
    }
}

/// Stops the process at the set of an `@Observed` property whose storage is not within its object
/// where its key path's offset says (`Observed._storageOffset`), naming it: the set path never writes
/// through an unchecked offset, and a set that notifies through the key path instead would be a
/// third set path (see the Performance article).
@usableFromInline
@inline(never)
func _storageNotInPlace(of key: AnyKeyPath, on object: AnyObject) -> Never {
    fatalError(
        "@Observed: the storage of \(_KeyNames.name(of: key)) on \(type(of: object)) is not within the object where "
            + "its key path projects it, and a set through its offset would write elsewhere; report this with your Swift version"
    )
}
