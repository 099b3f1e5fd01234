import Synchronization
import _KeyValueObservingShims

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
/// A set of an observed property finds its observers in a table read without a lock; the rest
/// (any flag set, a zero-sized property) takes the registry's lock once.
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
            // a recorder asks for it (a direct use would make every read create it,
            // `swift_getKeyPath`). The storage key path must not escape at all:
            // then the optimiser drops the dynamic exclusivity checks on the storage. While no
            // thread records its reads (a tracked observation's evaluation, a registration's probe),
            // this is one load of a process-wide word and a test.
            if _slowPath(_kvo_is_recording() != 0) {
                // The storage names the property. In an optimised build its offset is a constant,
                // found with no access at all; in a debug build the offset is a real modifying
                // access, which would race with other threads' reads of the property: there the key
                // path's description names it (`\Car._speed`).
                #if DEBUG
                _recordRead(of: object, storageOffset: nil, storageKey: storageKeyPath, key: { wrappedKeyPath })
                #else
                _recordRead(of: object, storageOffset: _storageOffset(object, storageKeyPath), storageKey: nil, key: { wrappedKeyPath })
                #endif
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

    /// The set path of an object that has a registry. Specialised per declaring class and value type
    /// in the client, never inlined: knowing the class lets observers registered with it be called
    /// directly.
    ///
    /// One of two paths. With no slow-path flag and a property that is not zero-sized, the lock-free
    /// one: the mask of the observed offsets, then the published set table's observers of the
    /// property, read without a lock (`ObserverRegistry+ReadPath.swift`), and the delivery around
    /// the store. Everything else (observers of every key, an open batch, a silenced setter, a
    /// zero-sized property) takes the locked one, `_setSlowPath` (`Observed+SlowPath.swift`).
    ///
    /// Neither writes through `storageOffset` unless the storage lies within the object
    /// (`_ObserverRegistry.holdsStorage`): a set of a property whose storage is elsewhere stops the
    /// process, naming it (`_storageNotInPlace`).
    @inlinable
    @inline(never)
    static func _setObserved<EnclosingSelf: KeyValueObservable>(
        _ newValue: Value,
        on object: EnclosingSelf,
        storageOffset: Int,
        key: () -> AnyKeyPath,
        registry: Unmanaged<_ObserverRegistry>
    ) {
        // A zero-sized value is never read or written: nothing to check.
        let size = MemoryLayout<Self>.size
        guard size == 0 || registry._withUnsafeGuaranteedRef({ $0.holdsStorage(of: object, at: storageOffset, size: size) }) else {
            _storageNotInPlace(of: key(), on: object)
        }
        let storage = UnsafeMutableRawPointer(Unmanaged.passUnretained(object).toOpaque())
            .advanced(by: storageOffset)
            .assumingMemoryBound(to: Observed<Value>.self)
        // One load for every reason to take the locked path (`_SlowPath`). Zero-sized properties
        // may share their offset with another property: they are found by key path, under the lock.
        let flags = registry._withUnsafeGuaranteedRef { $0.slowPathFlags.load(ordering: .acquiring) }
        if _slowPath(flags != 0) || MemoryLayout<Value>.size == 0 {
            _setSlowPath(newValue, on: object, storage: storage, storageOffset: storageOffset, key: key, registry: registry)
            return
        }
        guard registry._withUnsafeGuaranteedRef({ $0.mayHaveObservers(atOffset: storageOffset) }) else {
            _deliver(newValue, to: nil, storage: storage, on: object)
            return
        }
        // Without the lock or a retain: the observers are borrowed from the published table for the
        // time of the delivery (`ObserverRegistry+ReadPath.swift`).
        let reading = registry._withUnsafeGuaranteedRef { $0.enterReading() }
        let found = registry._withUnsafeGuaranteedRef { $0.observersInReadSection(atOffset: storageOffset, key: key) }
        _deliver(newValue, to: found, storage: storage, on: object)
        registry._withUnsafeGuaranteedRef { $0.exitReading(reading) }
    }

    /// Stores `newValue` and notifies the observers of `found` around the store. `found` is
    /// borrowed from the set table: the caller is in a read section.
    @inlinable
    @inline(__always)
    static func _deliver<EnclosingSelf: KeyValueObservable>(
        _ newValue: Value,
        to found: _BorrowedObservers?,
        storage: UnsafeMutablePointer<Observed<Value>>,
        on object: EnclosingSelf
    ) {
        // The one store of this path, in each branch where it belongs (a local closure, inlined).
        let store = { storage.pointee._value = newValue }
        guard let found else { return store() }
        if found.isSingle {
            // One observer that needs nothing before the store, where sets notify.
            store()
            found.single._withUnsafeGuaranteedRef { _ObserverSnapshot.deliverAlone(newValue, to: $0, on: object) }
            return
        }
        found.snapshot._withUnsafeGuaranteedRef { snapshot in
            guard snapshot.notifiesAutomatically else { return store() }
            if snapshot.isPlain {
                store()
                snapshot.deliverPlain(newValue, on: object)
                return
            }
            // Before the store: `.prior` and the old value.
            let oldValue: Value? = snapshot.needsOld ? storage.pointee._value : nil
            let pending = snapshot.willChange(on: object, oldValue: oldValue, newValue: newValue)
            store()
            snapshot.didChange(newValue, oldValue: oldValue, pending: pending, on: object)
        }
    }

    /// The byte offset of the property's storage in `object`: what identifies an `@Observed`
    /// property in its object's registry. Distinct properties of one object have distinct offsets,
    /// and for a literal storage key path the optimiser folds this to a constant.
    ///
    /// The language does not promise that `&object[keyPath:]` projects the property in place: a
    /// projection through accessors gives a temporary, on the stack or in a heap block of its own.
    /// Either lies outside the object, which the set path checks before it writes through the
    /// offset (`_ObserverRegistry.holdsStorage`).
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
