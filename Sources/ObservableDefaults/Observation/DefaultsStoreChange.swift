/// One notification of a store-wide observer (`DefaultsStore.observeChanges(_:)`): a change made as
/// one (a `set`, an `update`, a `batch`, a `reset()`, or a reload of another process's write) with
/// every key it changed.
public struct DefaultsStoreChange: Sendable {
    /// The names of the keys the change set or removed.
    public let keys: Set<String>
    /// Whether this process or another one made the change.
    public let origin: DefaultsChangeOrigin
    /// For a store on etcd: the revision of the change, when it was made elsewhere or by an `update`
    /// of this process (a batch of keys is one revision); `nil` otherwise (see `DefaultsChange.revision`).
    public let revision: Int64?
    /// The store's values right after the change (all of them, not only `keys`).
    public let values: DefaultsSnapshot

    /// `true` when another process (or a hand edit of the file) made the change.
    public var isFromAnotherProcess: Bool { origin == .anotherProcess }
}
