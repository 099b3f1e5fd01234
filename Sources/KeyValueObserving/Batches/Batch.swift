/// Which observers a batch has already reached (see `_ObserverSnapshot.willChange`/`didChange`).
@usableFromInline
final class _BatchDelivery {
    // Linear searches: a batch reaches few observers, and hashing costs more than scanning them.
    // Only the thread of the batch touches these, one access at a time: `@exclusivity(unchecked)`.
    @exclusivity(unchecked) @usableFromInline var primed: ContiguousArray<UInt64> = []
    @exclusivity(unchecked) @usableFromInline var delivered: ContiguousArray<UInt64> = []

    init() {}

    /// Records that `id` was primed; `false` if it already was.
    @inlinable
    func prime(_ id: UInt64) -> Bool {
        if primed.contains(id) { return false }
        primed.append(id)
        return true
    }

    /// Records that `id` was notified; `false` if it already was.
    @inlinable
    func deliver(_ id: UInt64) -> Bool {
        if delivered.contains(id) { return false }
        delivered.append(id)
        return true
    }
}

/// One object's batch on one thread (`coalescingChanges`). Only the thread that opened it touches it.
@usableFromInline
final class _BatchState {
    // `depth` is only accessed with the registry's lock held; the other variables only by the thread
    // of the batch, one access at a time: `@exclusivity(unchecked)`.
    @exclusivity(unchecked) var depth = 1
    @usableFromInline let delivery = _BatchDelivery()
    /// The keys changed so far, in the order of their first change, with what ends their change.
    @exclusivity(unchecked) @usableFromInline var changedKeys: [AnyKeyPath] = []
    /// Per changed key: reads its final value and current observers, and returns its delivery.
    @exclusivity(unchecked) @usableFromInline var finishers: [() -> () -> Void] = []
    /// The storage offsets of `changedKeys`, in the same order (-1 for a zero-sized property).
    @exclusivity(unchecked) @usableFromInline var changedOffsets: [Int] = []
    @exclusivity(unchecked) @usableFromInline var anyKeyPriorSent = false

    init() {}

    /// Whether the property stored at `offset` (or named `key`, for zero-sized ones) already
    /// changed in this batch.
    @usableFromInline
    func hasChanged(offset: Int, key: AnyKeyPath, isZeroSized: Bool) -> Bool {
        isZeroSized ? changedKeys.contains { _sameKey($0, key) } : changedOffsets.contains(offset)
    }
}

extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Runs `body` as one batch of changes: observers of each key changed in it get one notification,
    /// at the end, with the value before the batch as `oldValue` and the final value as `newValue`;
    /// `.prior` is sent at the first change of a key; observers of every key get one notification
    /// naming all the keys changed.
    ///
    /// ```swift
    /// editor.coalescingChanges {
    ///     editor.title = "Draft"
    ///     editor.body = "…"
    ///     editor.isDirty = true
    /// }   // one notification per key, one for observers of every key
    /// ```
    ///
    /// - A batch belongs to this object and to the calling thread: changes made on other threads
    ///   meanwhile notify as usual (and so do changes of other objects, even from `body`).
    /// - Batches nest: only the outermost one delivers.
    /// - Each observer is notified at most once per batch: an observer of a dependent key whose inputs
    ///   change several times hears once, with the value computed before the batch and after it; a
    ///   chain through this object notifies once at the end.
    /// - An assignment of an equal value still counts as a change (KVO's rule), unless the observer
    ///   removes duplicates: then the values before and after the batch are compared.
    /// - Manual notifications (`willChangeValue`/`didChangeValue`) inside a batch are not batched.
    public func coalescingChanges<Result>(_ body: () throws -> Result) rethrows -> Result {
        let registry = _registryCreatingIfNeeded()
        registry.beginBatch()
        defer { registry.endBatch(on: self) }
        return try body()
    }
}
