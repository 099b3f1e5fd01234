import Synchronization

/// One registration: the options and the handler, plus an atomic "still active" flag that delivery
/// checks right before every call, so that after `invalidate()` returns no new delivery starts.
///
/// Three kinds exist. A *direct* entry (`_DirectObserver<Value>`) observes an `@Observed` key itself
/// and receives the value straight from the setter, with no key-path application. A *reading* entry
/// (`_KeyPathObserver`) reads its value through its own key path before and after the change; it
/// serves keys reached indirectly (dependent keys, an inherited property observed through a subclass
/// key path, keys that only manual notification can change). A *signal* entry (`_SignalObserver`,
/// in `DependencyPaths.swift`) is only told that a property is about to change and has changed.
/// Only direct entries are `isDirect`; the delivery loops (`_ObserverSnapshot`) call the other two
/// through `willChange`/`didChange`. The followers that a path's registration keeps on the objects
/// along the path (`isPathFollower`) are signal entries, or direct ones that ignore the value when
/// the registration wants no `.prior` (see `_DependencyPaths.follow`).
@usableFromInline
class _ObserverEntry: @unchecked Sendable {
    // Invariant: every stored property is immutable after init except `_active`, which is atomic;
    // handlers are `@Sendable` closures.
    // The id first, then the one-byte fields together: the subclasses' fields start at 32 bytes.
    @usableFromInline final let id: UInt64
    @usableFromInline final let options: KeyValueObservingOptions
    @usableFromInline final let isDirect: Bool
    @usableFromInline final let _active = Atomic<Bool>(true)
    /// One of the observers that follow a path through this object for a registration elsewhere
    /// (`_DependencyPaths`): introspection counts it apart.
    final let isPathFollower: Bool
    /// Direct entries only: whether the observer removes duplicates (it then needs the old value).
    /// Stored here, in the bytes the flags above leave free, rather than as the optional closure
    /// it is in the entries that do: the entry of a plain observer is then 56 bytes, a 64-byte
    /// block of the allocator (80 and 96 with the closure and an optional root type).
    @usableFromInline final let removesDuplicates: Bool

    @usableFromInline
    init(id: UInt64, options: KeyValueObservingOptions, isDirect: Bool, isPathFollower: Bool = false, removesDuplicates: Bool = false) {
        self.id = id
        self.options = options
        self.isDirect = isDirect
        self.isPathFollower = isPathFollower
        self.removesDuplicates = removesDuplicates
    }

    /// `false` once the registration was removed; checked before each call of the handler.
    @inlinable
    final var isActive: Bool {
        _active.load(ordering: .acquiring)
    }

    final func deactivate() {
        _active.store(false, ordering: .releasing)
    }

    /// Indirect entries only: before the change, deliver the prior notification if asked for and
    /// return what `didChange` needs (the old value, boxed).
    ///
    /// - Parameter valueHasChanged: `true` when the notification comes after the fact (a key that
    ///   its class notifies after unlocking, such as a progress key): the value can no longer be read
    ///   from before the change, so the value this observer computed last stands for it.
    @usableFromInline
    func willChange(_ object: AnyObject, valueHasChanged: Bool) -> Any? {
        nil
    }

    /// Indirect entries only: after the change, deliver the notification.
    @usableFromInline
    func didChange(_ object: AnyObject, old: Any?) {}

    /// Indirect entries only: after a change announced without asking `willChange` first (the entry
    /// wants neither `.prior` nor old values), deliver the notification. Spares passing an `Any?`,
    /// whose copies and destruction go through value witnesses.
    @usableFromInline
    func didChange(_ object: AnyObject) {
        didChange(object, old: nil)
    }
}

/// An observer of an `@Observed` key that receives values straight from the setter. The handler is
/// called through `handler(_:_:)`: `_RootedDirectObserver` keeps the user's handler with its own
/// object type; `_DirectFollower` (in `DependencyPaths.swift`) is a path's follower.
@usableFromInline
class _DirectObserver<Value>: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`).
    /// The class of the objects the handler takes (`_RootedDirectObserver`'s `Root`): the set path of
    /// that class's properties calls `rootedHandler` directly, with one indirect call instead of two.
    /// For a follower, that of `_ObserverEntry`, which is no observable class (a class that is not
    /// generic: its metadata costs no look-up).
    @usableFromInline final let rootType: ObjectIdentifier

    @usableFromInline
    init(
        id: UInt64,
        options: KeyValueObservingOptions,
        removesDuplicates: Bool = false,
        rootType: ObjectIdentifier?,
        isPathFollower: Bool = false
    ) {
        self.rootType = rootType ?? ObjectIdentifier(_ObserverEntry.self)
        super.init(id: id, options: options, isDirect: true, isPathFollower: isPathFollower, removesDuplicates: removesDuplicates)
    }

    /// Calls the user's handler with `object`.
    @usableFromInline
    func handler(_ object: AnyObject, _ change: KeyValueObservedChange<Value>) {
        preconditionFailure("_DirectObserver is abstract: its subclasses call the handler")
    }

    /// For an observer that removes duplicates (`_DeduplicatingDirectObserver`): whether an
    /// assignment of `newValue` over `oldValue` changes nothing.
    @usableFromInline
    func isDuplicate(_ oldValue: Value, _ newValue: Value) -> Bool {
        false
    }

    /// Whether this observer skips the assignment of `newValue` over `oldValue`.
    @inlinable
    final func skips(_ oldValue: Value?, _ newValue: Value) -> Bool {
        guard removesDuplicates, let oldValue else { return false }
        return isDuplicate(oldValue, newValue)
    }
}

/// A direct observer with the user's handler, which takes objects of class `Root`.
@usableFromInline
class _RootedDirectObserver<Root: AnyObject, Value>: _DirectObserver<Value>, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`).
    @usableFromInline final let rootedHandler: @Sendable (Root, KeyValueObservedChange<Value>) -> Void

    @usableFromInline
    init(
        id: UInt64,
        options: KeyValueObservingOptions,
        removesDuplicates: Bool = false,
        handler: @escaping @Sendable (Root, KeyValueObservedChange<Value>) -> Void
    ) {
        rootedHandler = handler
        super.init(id: id, options: options, removesDuplicates: removesDuplicates, rootType: ObjectIdentifier(Root.self))
    }

    @usableFromInline
    override final func handler(_ object: AnyObject, _ change: KeyValueObservedChange<Value>) {
        rootedHandler(unsafeDowncast(object, to: Root.self), change)
    }
}

/// A direct observer with the user's handler that skips assignments of an equal value
/// (`removingDuplicates: true`).
@usableFromInline
final class _DeduplicatingDirectObserver<Root: AnyObject, Value>: _RootedDirectObserver<Root, Value>, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`).
    @usableFromInline let isDuplicateValue: @Sendable (Value, Value) -> Bool

    @usableFromInline
    init(
        id: UInt64,
        options: KeyValueObservingOptions,
        isDuplicate: @escaping @Sendable (Value, Value) -> Bool,
        handler: @escaping @Sendable (Root, KeyValueObservedChange<Value>) -> Void
    ) {
        isDuplicateValue = isDuplicate
        super.init(id: id, options: options, removesDuplicates: true, handler: handler)
    }

    @usableFromInline
    override func isDuplicate(_ oldValue: Value, _ newValue: Value) -> Bool {
        isDuplicateValue(oldValue, newValue)
    }
}

/// An observer that reads its value through its own key path around each change: observers of
/// dependent keys, of keys that only manual notification changes, and of read-only views of inherited
/// properties.
///
/// Not generic: the work is done by closures built in the client (`_readingObserver`), specialised for
/// the concrete types, so a notification makes no run-time generic metadata look-ups.
@usableFromInline
final class _KeyPathObserver: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`); the closures are only called with the
    // object being changed, on the thread changing it.
    let before: (AnyObject, _ valueHasChanged: Bool) -> Any?
    /// Delivers after the change, given the value `before` returned (an `Any?`), if there was one:
    /// by address, so that a change with none creates and destroys no `Any?`, whose copies and
    /// destruction go through value witnesses.
    let after: (AnyObject, _ old: UnsafeRawPointer?) -> Void
    /// The key the user observed, for introspection (the entry may sit in several slots).
    let observedKey: AnyKeyPath

    @usableFromInline
    init(
        id: UInt64,
        options: KeyValueObservingOptions,
        observedKey: AnyKeyPath,
        before: @escaping (AnyObject, _ valueHasChanged: Bool) -> Any?,
        after: @escaping (AnyObject, _ old: UnsafeRawPointer?) -> Void
    ) {
        self.observedKey = observedKey
        self.before = before
        self.after = after
        super.init(id: id, options: options, isDirect: false)
    }

    override func willChange(_ object: AnyObject, valueHasChanged: Bool) -> Any? {
        isActive ? before(object, valueHasChanged) : nil
    }

    override func didChange(_ object: AnyObject, old: Any?) {
        guard isActive else { return }
        withUnsafePointer(to: old) { after(object, UnsafeRawPointer($0)) }
    }

    override func didChange(_ object: AnyObject) {
        if isActive { after(object, nil) }
    }
}

/// An observer of `keyPath` that reads its value with `read` around each change.
@inlinable
func _readingObserver<Root: AnyObject, Value>(
    id: UInt64,
    options: KeyValueObservingOptions,
    keyPath: KeyPath<Root, Value>,
    read: @escaping (Root) -> Value,
    initialValue: () -> Value,
    handler: @escaping @Sendable (Root, KeyValueObservedChange<Value>) -> Void
) -> _ObserverEntry {
    let wantsOld = options.contains(.old)
    let wantsPrior = options.contains(.prior)
    let wantsNew = options.contains(.new)
    // The value computed last, for changes notified after the fact (see `willChange`); kept only
    // when an old value can be asked for.
    let last: Locked<Value?>? = wantsOld || wantsPrior ? Locked(initialValue()) : nil
    let entry = _KeyPathObserver(
        id: id,
        options: options,
        observedKey: keyPath,
        before: { object, valueHasChanged in
            guard let last else { return nil }
            let root = unsafeDowncast(object, to: Root.self)
            let old: Value
            if valueHasChanged, let cached = last.withLock({ $0 }) {
                old = cached
            } else {
                old = read(root)
            }
            if wantsPrior {
                handler(root, KeyValueObservedChange(settingNew: nil, old: wantsOld ? old : nil, isPrior: true))
            }
            return wantsOld ? old : nil
        },
        after: { object, boxedOld in
            let root = unsafeDowncast(object, to: Root.self)
            let new: Value? = wantsNew || last != nil ? read(root) : nil
            if let last, let new { last.withLock { $0 = new } }
            var old: Value?
            if wantsOld, let boxedOld { old = boxedOld.assumingMemoryBound(to: Any?.self).pointee.map { $0 as! Value } }
            handler(root, KeyValueObservedChange(settingNew: wantsNew ? new : nil, old: old))
        }
    )
    return entry
}
