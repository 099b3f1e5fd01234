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
/// While an object has no observers, a set costs one atomic load more than a plain stored property.
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
            if let registry = object._kvoRegistry.load(ordering: .acquiring) {
                registry._withUnsafeGuaranteedRef { registry in
                    if registry.probeCount.load(ordering: .relaxed) != 0 {
                        registry.recordRead(wrappedKeyPath, storage: storageKeyPath)
                    }
                }
            }
            return object[keyPath: storageKeyPath]._value
        }
        @inline(__always) set {
            guard let registry = object._kvoRegistry.load(ordering: .acquiring) else {
                object[keyPath: storageKeyPath]._value = newValue
                return
            }
            _set(newValue, on: object, registry: registry, key: wrappedKeyPath, storage: storageKeyPath)
        }
    }

    /// The observed set path: take the key's snapshot, deliver `.prior`, store, deliver.
    @inlinable
    static func _set<EnclosingSelf: KeyValueObservable>(
        _ newValue: Value,
        on object: EnclosingSelf,
        registry: Unmanaged<_ObserverRegistry>,
        key: ReferenceWritableKeyPath<EnclosingSelf, Value>,
        storage: ReferenceWritableKeyPath<EnclosingSelf, Observed<Value>>
    ) {
        guard let snapshot = registry._withUnsafeGuaranteedRef({ $0.snapshot(for: key) }) else {
            object[keyPath: storage]._value = newValue
            return
        }
        if snapshot.isPlain {
            object[keyPath: storage]._value = newValue
            for entry in snapshot.entries {
                let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
                guard observer.isActive else { continue }
                observer.handler(
                    object,
                    KeyValueObservedChange(newValue: observer.options.contains(.new) ? newValue : nil)
                )
            }
            return
        }
        _setNotifyingGeneral(newValue, on: object, snapshot: snapshot, storage: storage)
    }

    /// The set path when some observer wants `.old` or `.prior`, or reads through its own key path.
    @inlinable
    static func _setNotifyingGeneral<EnclosingSelf: KeyValueObservable>(
        _ newValue: Value,
        on object: EnclosingSelf,
        snapshot: _ObserverSnapshot,
        storage: ReferenceWritableKeyPath<EnclosingSelf, Observed<Value>>
    ) {
        let oldValue: Value? = snapshot.needsOld ? object[keyPath: storage]._value : nil
        var indirectOld: ContiguousArray<Any?> = []
        if snapshot.needsWillChange {
            if snapshot.hasIndirect {
                indirectOld.reserveCapacity(snapshot.entries.count)
            }
            for entry in snapshot.entries {
                if entry.isDirect {
                    let options = entry.options
                    if options.contains(.prior), entry.isActive {
                        let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
                        observer.handler(
                            object,
                            KeyValueObservedChange(oldValue: options.contains(.old) ? oldValue : nil, isPrior: true)
                        )
                    }
                    if snapshot.hasIndirect { indirectOld.append(nil) }
                } else {
                    indirectOld.append(entry.willChange(object))
                }
            }
        }
        object[keyPath: storage]._value = newValue
        for index in snapshot.entries.indices {
            let entry = snapshot.entries[index]
            if entry.isDirect {
                guard entry.isActive else { continue }
                let options = entry.options
                let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
                observer.handler(
                    object,
                    KeyValueObservedChange(
                        newValue: options.contains(.new) ? newValue : nil,
                        oldValue: options.contains(.old) ? oldValue : nil
                    )
                )
            } else {
                entry.didChange(object, old: indirectOld[index])
            }
        }
    }
}

extension Observed: Sendable where Value: Sendable {}
