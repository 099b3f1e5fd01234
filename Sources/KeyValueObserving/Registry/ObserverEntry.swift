import Synchronization

/// One registration: the options and the handler, plus an atomic "still active" flag that delivery
/// checks right before every call, so that after `invalidate()` returns no new delivery starts.
///
/// Two kinds exist. A *direct* entry (`_DirectObserver<Value>`) observes an `@Observed` key itself and
/// receives the value straight from the setter, with no key-path application. Any other entry
/// (`_KeyPathObserver`) reads its value through its own key path before and after the change; it
/// serves keys reached indirectly (an inherited property observed through a subclass key path, keys
/// that only manual notification can change).
@usableFromInline
class _ObserverEntry: @unchecked Sendable {
    // Invariant: every stored property is immutable after init except `_active`, which is atomic;
    // handlers are `@Sendable` closures.
    @usableFromInline final let options: KeyValueObservingOptions
    @usableFromInline final let isDirect: Bool
    final let id: UInt64
    @usableFromInline final let _active = Atomic<Bool>(true)

    @usableFromInline
    init(id: UInt64, options: KeyValueObservingOptions, isDirect: Bool) {
        self.id = id
        self.options = options
        self.isDirect = isDirect
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
    /// return what `didChange` needs (the old value, boxed) .
    @usableFromInline
    func willChange(_ object: AnyObject) -> Any? {
        nil
    }

    /// Indirect entries only: after the change, deliver the notification.
    @usableFromInline
    func didChange(_ object: AnyObject, old: Any?) {}
}

/// An observer of an `@Observed` key that receives values straight from the setter.
@usableFromInline
final class _DirectObserver<Value>: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`).
    @usableFromInline let handler: @Sendable (AnyObject, KeyValueObservedChange<Value>) -> Void

    @usableFromInline
    init(
        id: UInt64,
        options: KeyValueObservingOptions,
        handler: @escaping @Sendable (AnyObject, KeyValueObservedChange<Value>) -> Void
    ) {
        self.handler = handler
        super.init(id: id, options: options, isDirect: true)
    }
}

/// An observer that reads its value through its own key path around each change.
final class _KeyPathObserver<Root: AnyObject, Value>: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`). The key path is only applied to the
    // object being changed, on the thread changing it.
    let keyPath: KeyPath<Root, Value>
    let handler: @Sendable (Root, KeyValueObservedChange<Value>) -> Void

    init(
        id: UInt64,
        options: KeyValueObservingOptions,
        keyPath: KeyPath<Root, Value>,
        handler: @escaping @Sendable (Root, KeyValueObservedChange<Value>) -> Void
    ) {
        self.keyPath = keyPath
        self.handler = handler
        super.init(id: id, options: options, isDirect: false)
    }

    override func willChange(_ object: AnyObject) -> Any? {
        let wantsOld = options.contains(.old)
        let wantsPrior = options.contains(.prior)
        guard wantsOld || wantsPrior else { return nil }
        let root = unsafeDowncast(object, to: Root.self)
        let old = root[keyPath: keyPath]
        if wantsPrior, isActive {
            handler(root, KeyValueObservedChange(settingNew: nil, old: wantsOld ? old : nil, isPrior: true))
        }
        return wantsOld ? old : nil
    }

    override func didChange(_ object: AnyObject, old: Any?) {
        guard isActive else { return }
        let root = unsafeDowncast(object, to: Root.self)
        let new: Value? = options.contains(.new) ? root[keyPath: keyPath] : nil
        handler(root, KeyValueObservedChange(settingNew: new, old: old.map { $0 as! Value }))
    }
}
