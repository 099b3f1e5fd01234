import Synchronization

/// One notification to an observer of every key of an object (`observeAnyKey`).
public struct KeyValueAnyKeyChange: @unchecked Sendable, CustomStringConvertible {
    // Invariant: immutable; key-path objects are immutable and safe to share.

    /// The key that changed, as its declaring class names it (`\Base.title` for an inherited property);
    /// for a batch (`coalescingChanges`), the first key changed in it.
    public var keyPath: AnyKeyPath {
        switch keys {
        case .one(let key): key
        case .many(let keys): keys[0]
        }
    }

    /// The keys that changed: one, or for a batch every key changed in it, in the order of their first
    /// change (a prior notification in a batch names the key whose change opened it).
    public var keyPaths: [AnyKeyPath] {
        switch keys {
        case .one(let key): [key]
        case .many(let keys): keys
        }
    }

    /// `keyPaths`, with no array to allocate for the change of one key.
    let keys: _ChangedKeys

    /// `true` for the notification sent before the change to observers that asked for `.prior`.
    public let isPrior: Bool

    /// The storage offsets of `keyPaths` where known (`@Observed` properties), which name them.
    let storageOffsets: _StorageOffsets

    /// The name of the key that changed: `"speed"` for `\Car.speed`, as a log line or a metric
    /// label wants it. For a batch, the first key changed in it.
    ///
    /// `@Observed` properties and the keys of `ObservableProgress` are named by their property
    /// names; a computed key by the class's `keyPathNames`, else by its types
    /// (`"computed Int property of Car"`), because Swift keeps no names for computed properties at
    /// run time on Linux.
    public var keyName: String {
        _KeyNames.name(of: keyPath, storageOffset: storageOffsets[0])
    }

    /// The names of `keyPaths`, in the same order.
    public var keyNames: [String] {
        let keyPaths = keyPaths
        return keyPaths.indices.map { _KeyNames.name(of: keyPaths[$0], storageOffset: storageOffsets[$0]) }
    }

    @usableFromInline
    init(keys: _ChangedKeys, storageOffsets: _StorageOffsets, isPrior: Bool) {
        self.keys = keys
        self.storageOffsets = storageOffsets
        self.isPrior = isPrior
    }

    public var description: String {
        "\(isPrior ? "will change" : "did change") \(keyNames.joined(separator: ", "))"
    }
}

/// The keys of a change of observers of every key: one, or several (a batch).
@usableFromInline
enum _ChangedKeys {
    case one(AnyKeyPath)
    case many([AnyKeyPath])
}

/// The storage offsets of the keys of a change, where known: none, one (a single `@Observed`
/// property: no array to allocate), or one per key (a batch; `nil` for keys that are not stored at a
/// known offset).
@usableFromInline
enum _StorageOffsets: Sendable {
    case none
    case single(Int)
    case many([Int?])

    subscript(index: Int) -> Int? {
        switch self {
        case .none: nil
        case .single(let offset): index == 0 ? offset : nil
        case .many(let offsets): index < offsets.count ? offsets[index] : nil
        }
    }

    @usableFromInline
    init(_ offset: Int?) {
        self = offset.map { .single($0) } ?? .none
    }
}

/// An observer of every key of an object: a registration (`_ObserverEntry`: its id, options and
/// "still active" flag) that is in no key's slot, only in the registry's `anyKeyObservers`.
@usableFromInline
final class _AnyKeyObserver: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`).
    @usableFromInline let handler: @Sendable (AnyObject, KeyValueAnyKeyChange) -> Void

    init(id: UInt64, wantsPrior: Bool, handler: @escaping @Sendable (AnyObject, KeyValueAnyKeyChange) -> Void) {
        self.handler = handler
        super.init(id: id, options: wantsPrior ? [.prior] : [], isDirect: false)
    }

    /// Whether it asked for `.prior`.
    @usableFromInline
    var wantsPrior: Bool { options.contains(.prior) }
}

/// The observers of every key at one moment, immutable (like `_ObserverSnapshot`).
@usableFromInline
final class _AnyKeySnapshot: @unchecked Sendable {
    // Invariant: immutable after init.
    @usableFromInline let observers: ContiguousArray<_AnyKeyObserver>
    /// Some observer asked for `.prior`.
    @usableFromInline let wantsPrior: Bool

    /// No observers: shared, so that a registry without observers of every key allocates none.
    static let none = _AnyKeySnapshot(observers: [])

    init(observers: ContiguousArray<_AnyKeyObserver>) {
        self.observers = observers
        wantsPrior = observers.contains { $0.wantsPrior }
    }

    /// Notifies before a change of `keyPath` the observers that asked for `.prior`.
    @inlinable
    func willChange(_ object: AnyObject, _ keyPath: AnyKeyPath, storageOffset: Int? = nil) {
        guard wantsPrior else { return }
        notify(object, .one(keyPath), storageOffsets: .init(storageOffset), isPrior: true)
    }

    /// Notifies after a change of `keyPaths` (several after a batch).
    @usableFromInline
    func didChange(_ object: AnyObject, _ keyPaths: [AnyKeyPath], storageOffsets: _StorageOffsets = .none) {
        didChange(object, .many(keyPaths), storageOffsets: storageOffsets)
    }

    /// Notifies after a change of `keyPath` (stored at `storageOffset`, for an `@Observed` property).
    @usableFromInline
    func didChange(_ object: AnyObject, _ keyPath: AnyKeyPath, storageOffset: Int? = nil) {
        notify(object, .one(keyPath), storageOffsets: .init(storageOffset), isPrior: false)
    }

    private func didChange(_ object: AnyObject, _ keys: _ChangedKeys, storageOffsets: _StorageOffsets) {
        notify(object, keys, storageOffsets: storageOffsets, isPrior: false)
    }

    /// Calls the active observers (with `isPrior`, those that asked for `.prior`), in registration
    /// order. The observers are borrowed: this snapshot holds them for the whole loop.
    @usableFromInline
    func notify(_ object: AnyObject, _ keys: consuming _ChangedKeys, storageOffsets: _StorageOffsets, isPrior: Bool) {
        let change = KeyValueAnyKeyChange(keys: keys, storageOffsets: storageOffsets, isPrior: isPrior)
        for index in observers.indices {
            Unmanaged.passUnretained(observers[index])._withUnsafeGuaranteedRef { observer in
                guard !isPrior || observer.wantsPrior, observer.isActive else { return }
                observer.handler(object, change)
            }
        }
    }
}

extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Observes every key of the object at once: the `objectWillChange` of `ObservableObject`, but each
    /// call names the key that changed and comes after the change (or before it, with `.prior`).
    ///
    /// ```swift
    /// let token = playlist.observeAnyKey { playlist, change in
    ///     print("changed:", change.keyPath)
    /// }
    /// ```
    ///
    /// Every assignment to an `@Observed` property of the object notifies, those declared in
    /// subclasses included, and so does every `didChangeValue(for:)`. Observers of every key are
    /// called after the observers of the key that changed (and, with `.prior`, before them).
    ///
    /// - Parameters:
    ///   - options: `.prior` adds a notification before each change; other options do not
    ///     apply (there is no single value to carry).
    ///   - changeHandler: Called with the object and the key that changed.
    /// - Returns: The token; keep it.
    public func observeAnyKey(
        options: KeyValueObservingOptions = [],
        changeHandler: @escaping @Sendable (Self, KeyValueAnyKeyChange) -> Void
    ) -> KeyValueObservation {
        let registry = _registryCreatingIfNeeded()
        let id = registry.makeID()
        let observer = _AnyKeyObserver(id: id, wantsPrior: options.contains(.prior)) { object, change in
            changeHandler(unsafeDowncast(object, to: Self.self), change)
        }
        let added = registry.addAnyKeyObserver(observer)
        precondition(added, "KeyValueObserving: an object cannot be deallocated while it registers an observer")
        return KeyValueObservation(registry: registry, id: id)
    }
}
