import KeyValueObserving

/// One notification of a change of a defaults key: `KeyValueObservedChange` plus where the change
/// came from.
///
/// Which of `newValue` and `oldValue` are filled depends on the `KeyValueObservingOptions` the
/// observer registered with. An absent key reads as its default, so removing a key is a change to
/// the default value.
public struct DefaultsChange<Value: Sendable>: Sendable {
    /// Where a change came from.
    public typealias Origin = DefaultsChangeOrigin

    /// The key that changed.
    public let key: String
    /// The value after the change, if the observer asked for `.new` (and this is not a prior
    /// notification).
    public let newValue: Value?
    /// The value before the change, if the observer asked for `.old`.
    public let oldValue: Value?
    /// `true` for the notification sent before a change to observers that asked for `.prior`.
    public var isPrior: Bool { flags & 1 != 0 }
    /// Whether the change was made by this process or by another one.
    public var origin: Origin { flags & 2 != 0 ? .anotherProcess : .thisProcess }
    /// For a store on etcd: the revision at which etcd applied the change (its `mod_revision`), for a
    /// change made elsewhere, or by this process's `update` (the `.prior` notification of such a
    /// change carries it too). `nil` for a `set` or `batch` of this process (observers are told
    /// before etcd has applied it), for `.initial` notifications, and for every change of a
    /// file-backed store.
    public var revision: Int64? { flags >> 6 == 0 ? nil : Int64(flags >> 6) }
    /// Where `newValue` came from: one of the store's layers (`DefaultsLayer`), its back end
    /// (`.store`), its registered defaults or the key's own default. For a prior notification,
    /// where the old value came from.
    public var layer: DefaultsLayerKind { DefaultsLayerKind(code: flags >> 2 & 7) }
    /// Whether the values are secret: the key was declared secret (a store's `secrets:`,
    /// `DefaultsKey.isSecret`), or the old or the new value came from a secret layer
    /// (`DefaultsLayer.isSecret`). A secret change prints and reflects `<redacted>` in place of both
    /// values (`description`, `dump`, `Mirror`, `keyValueChange`); `newValue` and `oldValue` still
    /// return them.
    public var isSecret: Bool { flags & 32 != 0 || DefaultsKeyNames.isSecret(key) }
    /// `isPrior` (bit 0), `origin` (bit 1: another process), `layer` (bits 2 to 4; 0: the back end),
    /// whether a value came from a secret layer (bit 5), and `revision` (the bits above; 0: none,
    /// etcd's revisions start at 1) in one word: a change
    /// passed to a handler stays small enough to travel in registers, as it did before it carried
    /// a revision (a separate field made every observed set about 4% slower).
    @usableFromInline let flags: UInt64

    /// `true` when another process (or a hand edit of the file) made the change.
    public var isFromAnotherProcess: Bool { origin == .anotherProcess }

    /// The change as the core module's change record (kind `.setting`), for code shared with
    /// `KeyValueObservable` observers.
    /// A secret change's record redacts its values where it is printed or reflected, as this one does.
    public var keyValueChange: KeyValueObservedChange<Value> {
        let change = KeyValueObservedChange(kind: .setting, newValue: newValue, oldValue: oldValue, isPrior: isPrior)
        return isSecret ? change._redactingValues() : change
    }

    /// Creates a change record.
    ///
    /// - Parameters:
    ///   - key: the key's name.
    ///   - newValue: the value after the change, if asked for.
    ///   - oldValue: the value before the change, if asked for.
    ///   - isPrior: whether this is the notification sent before the change.
    ///   - origin: who made the change.
    ///   - revision: the back end's revision of the change, if it has one (etcd; positive, below 2⁵⁸).
    ///   - layer: where the new value came from (the back end by default).
    ///   - isSecret: whether the old or the new value came from a secret source (see `isSecret`,
    ///     which is also true for a key declared secret).
    @inlinable
    public init(
        key: String, newValue: Value?, oldValue: Value?, isPrior: Bool = false, origin: Origin, revision: Int64? = nil,
        layer: DefaultsLayerKind = .store, isSecret: Bool = false
    ) {
        self.key = key
        self.newValue = newValue
        self.oldValue = oldValue
        self.flags =
            UInt64(clamping: revision ?? 0) << 6 | (isSecret ? 32 : 0) | (layer == .store ? 0 : layer.code << 2)
            | (origin == .anotherProcess ? 2 : 0) | (isPrior ? 1 : 0)
    }
}

/// Where a change of a defaults key came from.
public enum DefaultsChangeOrigin: Sendable, Hashable {
    /// A write through any `DefaultsStore` of this process that shares this store's storage (every
    /// store on the same file, or on the same etcd endpoints, prefix and user), or the `.initial`
    /// notification.
    case thisProcess
    /// A write by another process (or a hand edit), seen by watching the file; for etcd, a write by
    /// any other client (another process, or a store of this process with its own storage), seen by
    /// the watch.
    case anotherProcess
}

extension DefaultsChange: Equatable where Value: Equatable {}
