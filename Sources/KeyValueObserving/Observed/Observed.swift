import Synchronization

/// Marks a stored property of a `KeyValueObservable` subclass as observable: every assignment
/// notifies its observers, synchronously, on the assigning thread (the `@objc dynamic` of this
/// package).
///
/// ```swift
/// final class AudioPlayer: KeyValueObservable {
///     @Observed var volume = 0.5
///     @Observed var title: String? = nil
/// }
/// ```
///
/// Every assignment notifies, an assignment of an equal value included, as in Foundation's KVO.
/// A notification (other than a `.prior` one) is sent after the new value is stored, so a handler
/// that reads the object sees the new state.
///
/// Until an object's first registration, a set costs one load and one test more than a plain stored
/// property. After it, a set also reads one atomic word of slow-path flags (observers of every key,
/// an open batch, a to-many mutation in progress) and, when none is set, an atomic mask of the
/// observed storage offsets: a set of a property that has no observers stops there, without a lock.
///
/// The wrapper only works inside a `KeyValueObservable` subclass: it reaches its enclosing instance
/// through `static subscript(_enclosingInstance:wrapped:storage:)`, and the wrapped key path is the
/// key observers register for.
@propertyWrapper
public struct Observed<Value> {
    @usableFromInline
    var _value: Value

    public init(wrappedValue: Value) {
        _value = wrappedValue
    }

    @available(*, unavailable, message: "@Observed can only be used on properties of KeyValueObservable subclasses")
    public var wrappedValue: Value {
        get { fatalError("@Observed can only be used on properties of KeyValueObservable subclasses") }
        set { fatalError("@Observed can only be used on properties of KeyValueObservable subclasses") }
    }

    @inlinable
    public static subscript<EnclosingSelf: KeyValueObservable>(
        _enclosingInstance object: EnclosingSelf,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<EnclosingSelf, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<EnclosingSelf, Observed<Value>>
    ) -> Value {
        @inline(__always) get {
            // Neither key-path object may be used directly here. The wrapped key path is handed over
            // in a closure, which the optimiser specialises so that the object is only created when
            // a registration probe runs; a direct use would make every read create it
            // (`swift_getKeyPath`, ~100 instructions). The storage key path must not escape at all:
            // then the optimiser drops the dynamic exclusivity checks on the storage.
            if let registry = object._kvoRegistry.load(ordering: .acquiring) {
                registry._withUnsafeGuaranteedRef { registry in
                    if _slowPath(registry.probeCount.load(ordering: .relaxed) != 0) {
                        // The storage names the property. In an optimised build its offset is a
                        // constant, found with no access at all; using the storage key path as a
                        // value there would make every set create it and check exclusivity
                        // dynamically (15 → 113 instructions per set). In a debug build the
                        // offset is a real modifying access, which would race with other threads'
                        // reads of the property: there the key path's description names it
                        // (`\Car._speed`).
                        #if DEBUG
                        let storageKey: AnyKeyPath? = storageKeyPath
                        let offset: Int? = nil
                        #else
                        let storageKey: AnyKeyPath? = nil
                        let offset: Int? = _storageOffset(object, storageKeyPath)
                        #endif
                        registry.recordRead(
                            key: { wrappedKeyPath },
                            storageType: Observed<Value>.self,
                            valueType: Value.self,
                            isZeroSized: MemoryLayout<Value>.size == 0,
                            storageKey: storageKey,
                            storageOffset: offset
                        )
                    }
                }
            }
            return object[keyPath: storageKeyPath]._value
        }
        @inline(__always) set {
            // The unobserved path is a load, a test and the store, small enough to be inlined into
            // every caller. The storage key path is a literal here, so the optimiser turns the store
            // into a direct one and `_storageOffset` into a constant: the registry finds the
            // property's observers by that offset. The wrapped key path is handed over in a closure,
            // called once per property and object; a direct use of it would make every set, observed
            // or not, create the key-path object (`swift_getKeyPath`).
            guard let registry = object._kvoRegistry.load(ordering: .acquiring) else {
                object[keyPath: storageKeyPath]._value = newValue
                return
            }
            _setObserved(
                newValue,
                on: object,
                storageOffset: _storageOffset(object, storageKeyPath),
                key: { wrappedKeyPath },
                registry: registry
            )
        }
    }

    /// The set path of an object that has a registry: find the property's observers, deliver
    /// `.prior`, store, deliver. Specialised per declaring class and value type in the client, never
    /// inlined: knowing the class lets observers registered with it be called directly.
    @inlinable
    @inline(never)
    static func _setObserved<EnclosingSelf: KeyValueObservable>(
        _ newValue: Value,
        on object: EnclosingSelf,
        storageOffset: Int,
        key: () -> AnyKeyPath,
        registry: Unmanaged<_ObserverRegistry>
    ) {
        let storage = UnsafeMutableRawPointer(Unmanaged.passUnretained(object).toOpaque())
            .advanced(by: storageOffset)
            .assumingMemoryBound(to: Observed<Value>.self)
        // One load for every reason to take the slow path: observers of every key, an open batch, a
        // silenced setter (`_SlowPath`).
        let flags = registry._withUnsafeGuaranteedRef { $0.slowPathFlags.load(ordering: .acquiring) }
        if _slowPath(flags != 0) {
            // Observers of every key alone are told without the lock, from the set table.
            if MemoryLayout<Value>.size != 0, flags == _SlowPath.anyKey {
                _setNotifyingAnyKeyUnlocked(
                    newValue, on: object, storage: storage, storageOffset: storageOffset, key: key, registry: registry)
                return
            }
            _setNotifyingAnyKey(newValue, on: object, storage: storage, storageOffset: storageOffset, key: key, registry: registry)
            return
        }
        if MemoryLayout<Value>.size == 0 {
            // Zero-sized properties may share their offset with another property: found by key path,
            // under the lock.
            let snapshot = registry._withUnsafeGuaranteedRef { $0.snapshot(forZeroSizedKey: key()) }
            withExtendedLifetime(snapshot) {
                _deliver(newValue, to: snapshot.map { Unmanaged.passUnretained($0) }, storage: storage, on: object)
            }
            return
        }
        guard registry._withUnsafeGuaranteedRef({ $0.mayHaveObservers(atOffset: storageOffset) }) else {
            storage.pointee._value = newValue
            return
        }
        // Without the lock or a retain: the snapshot is borrowed from the published table for the
        // time of the delivery (`ObserverRegistry+ReadPath.swift`).
        let reading = registry._withUnsafeGuaranteedRef { $0.enterReading() }
        let found = registry._withUnsafeGuaranteedRef { $0.observersInReadSection(atOffset: storageOffset, key: key) }
        _deliver(newValue, to: found, storage: storage, on: object)
        registry._withUnsafeGuaranteedRef { $0.exitReading(reading) }
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
        _setNotifyingAnyKey(newValue, on: object, storage: storage, storageOffset: storageOffset, key: key, registry: registry)
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
        let notifies = element.snapshot.map { $0._withUnsafeGuaranteedRef { $0.notifiesAutomatically } } ?? element.notifiesAutomatically
        guard notifies == true, let key = element.key else {
            storage.pointee._value = newValue
            return
        }
        key._withUnsafeGuaranteedRef { key in
            anyKey?._withUnsafeGuaranteedRef { $0.willChange(object, key, storageOffset: storageOffset) }
            _deliver(newValue, to: element.snapshot, storage: storage, on: object)
            anyKey?._withUnsafeGuaranteedRef { $0.didChange(object, borrowing: key, storageOffset: storageOffset) }
        }
    }

    /// Stores `newValue` and notifies the observers of `found` around the store. `found` is
    /// unretained: the caller keeps it alive (a read section of the set table, or a reference).
    @inlinable
    @inline(__always)
    static func _deliver<EnclosingSelf: KeyValueObservable>(
        _ newValue: Value,
        to found: Unmanaged<_ObserverSnapshot>?,
        storage: UnsafeMutablePointer<Observed<Value>>,
        on object: EnclosingSelf
    ) {
        guard let found else {
            storage.pointee._value = newValue
            return
        }
        found._withUnsafeGuaranteedRef { snapshot in
            guard snapshot.notifiesAutomatically else {
                storage.pointee._value = newValue
                return
            }
            if snapshot.isPlain {
                storage.pointee._value = newValue
                snapshot.deliverPlain(newValue, on: object)
                return
            }
            let oldValue: Value? = snapshot.needsOld ? storage.pointee._value : nil
            let pending = snapshot.willChange(on: object, oldValue: oldValue, newValue: newValue)
            storage.pointee._value = newValue
            snapshot.didChange(newValue, oldValue: oldValue, pending: pending, on: object)
        }
    }

    /// The set path when the object has observers of every key (they are told before the key's own
    /// observers, with `.prior`, and after them), an open batch (on this thread, the change is
    /// announced at the first change of the key and delivered when the batch ends) or a silenced
    /// setter. A change the calling thread's batch can record without the lock is recorded here
    /// (`recordInOwnedBatch`); anything else goes on to `_setNotifyingAnyKeyLocked`.
    @inlinable
    @inline(never)
    static func _setNotifyingAnyKey(
        _ newValue: Value,
        on object: KeyValueObservable,
        storage: UnsafeMutablePointer<Observed<Value>>,
        storageOffset: Int,
        key: () -> AnyKeyPath,
        registry: Unmanaged<_ObserverRegistry>
    ) {
        let flags = registry._withUnsafeGuaranteedRef { $0.slowPathFlags.load(ordering: .acquiring) }
        // Zero-sized properties are found by key path, and a silenced setter by its key: under the lock.
        if MemoryLayout<Value>.size != 0, flags & (_SlowPath.batch | _SlowPath.silencedSetter) == _SlowPath.batch {
            let valueType = ObjectIdentifier(Value.self)
            let trivialSize = _ValueCell.trivialSize(Value.self)
            let rawStorage = UnsafeMutableRawPointer(storage)
            let recorded = registry._withUnsafeGuaranteedRef {
                $0.recordInOwnedBatch(offset: storageOffset, storage: rawStorage, valueType: valueType, trivialSize: trivialSize)
            }
            switch recorded {
            case .unavailable:
                break
            case .repeated:
                storage.pointee._value = newValue
                return
            case .recorded(let change):
                withUnsafeMutablePointer(to: &change.pointee.oldValue) { _ValueCell.store(storage.pointee._value, in: $0) }
                storage.pointee._value = newValue
                return
            case .recordWithKey(let batch, let slot, let version):
                _recordInBatchWithKey(
                    newValue, on: object, storage: storage, storageOffset: storageOffset, slot: slot, version: version, key: key,
                    batch: batch)
                return
            }
        }
        _setNotifyingAnyKeyLocked(
            newValue, on: object, storage: storage, storageOffset: storageOffset, key: key, registry: registry, flags: flags)
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

    /// The rest of `_setNotifyingAnyKey`: everything the set needs, found under one lock
    /// (`slowPathLookup`). `key` is only called when no slot names the property.
    @inlinable
    @inline(never)
    static func _setNotifyingAnyKeyLocked(
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

    /// Appends a change of this property, with its value now as the value before the batch, to
    /// `batch`; returns the index of its `_BatchedExtra` (-1 if it has none: no key to keep).
    /// `slotIndex` is right at the registry's `stateVersion` `version` (`.max`: unknown).
    @inlinable
    static func _recordBatchedChange(
        in batch: _BatchState,
        offset: Int,
        storage: UnsafeMutablePointer<Observed<Value>>,
        slotIndex: Int,
        version: UInt,
        key: AnyKeyPath?
    ) -> Int {
        let finisher =
            batch.finisher(for: ObjectIdentifier(Value.self))
            ?? batch.addFinisher(
                _BatchFinisher(
                    type: ObjectIdentifier(Value.self),
                    readFinalValue: { change in
                        let value = change.pointee.storage.assumingMemoryBound(to: Observed<Value>.self).pointee._value
                        withUnsafeMutablePointer(to: &change.pointee.finalValue) { _ValueCell.store(value, in: $0) }
                    },
                    deliver: { change, observers, batch, object in _deliverBatchedChange(change, to: observers, batch: batch, on: object) }
                ))
        let extra = key.map { batch.addExtra(key: $0) } ?? -1
        let change = batch.append(
            offset: offset, storage: UnsafeMutableRawPointer(storage), slotIndex: slotIndex, version: version, finisher: finisher,
            extra: extra, trivialSize: _ValueCell.trivialSize(Value.self))
        withUnsafeMutablePointer(to: &change.pointee.oldValue) { _ValueCell.store(storage.pointee._value, in: $0) }
        return extra
    }

    /// Notifies `observers`, the key's observers at the end of the batch, of a batched change of this
    /// property (`_BatchFinisher.deliver`), and takes its values out.
    @inlinable
    @inline(__always)
    static func _deliverBatchedChange(
        _ change: UnsafeMutablePointer<_BatchedChange>,
        to observers: _ObserverSnapshot,
        batch: _BatchState,
        on object: AnyObject
    ) {
        let oldValue = withUnsafeMutablePointer(to: &change.pointee.oldValue) { _ValueCell.take(Value.self, from: $0) }
        let finalValue = withUnsafeMutablePointer(to: &change.pointee.finalValue) { _ValueCell.take(Value.self, from: $0) }
        if observers.isPlain {
            observers.deliverPlain(finalValue, on: object)
            return
        }
        let extra = change.pointee.extra
        let pending = extra < 0 ? nil : batch.extras[extra].pending?.values(for: observers)
        observers.didChange(finalValue, oldValue: oldValue, pending: pending, on: object, batch: batch)
    }

    /// The byte offset of the property's storage in `object`: what identifies an `@Observed`
    /// property in its object's registry. Distinct properties of one object have distinct offsets,
    /// and for a literal storage key path the optimiser folds this to a constant.
    @inlinable
    @inline(__always)
    static func _storageOffset<EnclosingSelf: KeyValueObservable>(
        _ object: EnclosingSelf,
        _ storageKeyPath: ReferenceWritableKeyPath<EnclosingSelf, Observed<Value>>
    ) -> Int {
        let base = UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque())
        return withUnsafeMutablePointer(to: &object[keyPath: storageKeyPath]) { UnsafeRawPointer($0) - base }
    }
}

extension Observed: Sendable where Value: Sendable {}
