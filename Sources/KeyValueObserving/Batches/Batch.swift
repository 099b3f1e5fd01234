import Synchronization

/// One object's batch on one thread (`coalescingChanges`).
///
/// It is in the record of the thread that opened it (`ObserverRegistry+Batches.swift`) until that
/// thread ends it; once delivered it is emptied and kept by the registry for the next batch (its
/// buffers keep their capacity, its finishers stay valid), so that a batch allocates nothing in the
/// steady state.
@usableFromInline
final class _BatchState {
    // Every variable is only accessed by one thread at a time: while the batch is open, by its
    // thread (with the registry's lock held, the locked set path, or after the lock, its delivery);
    // a spare batch only under the registry's lock, which orders its hand-over from one thread to
    // the next: `@exclusivity(unchecked)`.
    @exclusivity(unchecked) var depth = 1
    /// The keys changed so far (`changeCount` of them, in the order of their first change), in a
    /// buffer of `changeCapacity`. Plain values: appending one copies a few words and retains nothing.
    @exclusivity(unchecked) @usableFromInline var changes: UnsafeMutablePointer<_BatchedChange>
    @exclusivity(unchecked) @usableFromInline var changeCount = 0
    @exclusivity(unchecked) @usableFromInline var changeCapacity = 16
    /// One bit per storage offset class (`_maskBit(forOffset:)`) of the changes: a clear bit means the
    /// property at that offset has not changed yet.
    @exclusivity(unchecked) @usableFromInline var changedMask: UInt64 = 0
    /// What some changes also need (`_BatchedChange.extra`).
    @exclusivity(unchecked) @usableFromInline var extras: ContiguousArray<_BatchedExtra> = []
    /// How to finish a change, one per value type (`_BatchedChange.finisher`); kept across batches.
    @exclusivity(unchecked) var finishers: ContiguousArray<_BatchFinisher> = []
    /// The finisher found last (the changes of a batch often have one value type).
    @exclusivity(unchecked) @usableFromInline var lastFinisher: Unmanaged<_BatchFinisher>?
    @exclusivity(unchecked) @usableFromInline var anyKeyPriorSent = false
    // The indirect observers (dependent keys, chains) the batch has primed and notified: one may
    // observe several of its keys. Linear searches: a batch reaches few, and hashing costs more than
    // scanning them. Direct observers need no record: each observes one key, changed once per batch.
    @exclusivity(unchecked) @usableFromInline var primed: ContiguousArray<UInt64> = []
    @exclusivity(unchecked) @usableFromInline var delivered: ContiguousArray<UInt64> = []

    init() {
        changes = .allocate(capacity: changeCapacity)
    }

    deinit {
        // The changes are plain values, and every one was delivered (which released its snapshot).
        changes.deallocate()
    }

    /// Records that the indirect observer `id` was primed; `false` if it already was.
    @inlinable
    func prime(_ id: UInt64) -> Bool {
        if primed.contains(id) { return false }
        primed.append(id)
        return true
    }

    /// Records that the indirect observer `id` was notified; `false` if it already was.
    @inlinable
    func deliver(_ id: UInt64) -> Bool {
        if delivered.contains(id) { return false }
        delivered.append(id)
        return true
    }

    /// Appends a change whose old value is still to be written; returns it. `slotIndex` is where its
    /// key's observers were found (a hint for the end of the batch), or -1.
    @inlinable
    @inline(__always)
    func append(
        offset: Int, storage: UnsafeMutableRawPointer, slotIndex: Int, finisher: Unmanaged<_BatchFinisher>, extra: Int, trivialSize: Int
    ) -> UnsafeMutablePointer<_BatchedChange> {
        if changeCount == changeCapacity { grow() }
        let change = changes + changeCount
        change.initialize(
            to: _BatchedChange(
                offset: offset, storage: storage, slotIndex: slotIndex, finisher: finisher, extra: extra, trivialSize: trivialSize))
        changeCount += 1
        if offset >= 0 { changedMask |= _maskBit(forOffset: offset) }
        anyKeyPriorSent = true
        return change
    }

    @usableFromInline
    func grow() {
        let grown = UnsafeMutablePointer<_BatchedChange>.allocate(capacity: changeCapacity * 2)
        grown.moveInitialize(from: changes, count: changeCount)
        changes.deallocate()
        changes = grown
        changeCapacity *= 2
    }

    /// Whether the property stored at `offset` (or, for a zero-sized one, named `key`) already changed
    /// in this batch.
    @inline(__always)
    func hasChanged(offset: Int, key: AnyKeyPath?) -> Bool {
        if offset >= 0 {
            guard changedMask & _maskBit(forOffset: offset) != 0 else { return false }
            return hasChange(atOffset: offset)
        }
        return hasChange(of: key)
    }

    private func hasChange(atOffset offset: Int) -> Bool {
        for index in 0..<changeCount where changes[index].offset == offset { return true }
        return false
    }

    private func hasChange(of key: AnyKeyPath?) -> Bool {
        guard let key else { return false }
        for index in 0..<changeCount where changes[index].offset < 0 {
            if let changed = extras[changes[index].extra].key, _sameKey(changed, key) { return true }
        }
        return false
    }

    /// The finisher for values of `type`, if the batch has one (it keeps it).
    @inlinable
    @inline(__always)
    func finisher(for type: ObjectIdentifier) -> Unmanaged<_BatchFinisher>? {
        if let lastFinisher, lastFinisher._withUnsafeGuaranteedRef({ $0.type == type }) { return lastFinisher }
        return keptFinisher(for: type)
    }

    @usableFromInline
    func keptFinisher(for type: ObjectIdentifier) -> Unmanaged<_BatchFinisher>? {
        for index in finishers.indices where finishers[index].type == type {
            lastFinisher = Unmanaged.passUnretained(finishers[index])
            return lastFinisher
        }
        return nil
    }

    /// Adds the finisher of a value type, which the batch keeps; returns it.
    @usableFromInline
    func addFinisher(_ finisher: _BatchFinisher) -> Unmanaged<_BatchFinisher> {
        finishers.append(finisher)
        lastFinisher = Unmanaged.passUnretained(finisher)
        return Unmanaged.passUnretained(finisher)
    }

    /// Adds what a change also needs; returns its index for `_BatchedChange.extra`.
    @usableFromInline
    func addExtra(key: AnyKeyPath?) -> Int {
        extras.append(_BatchedExtra(key: key, pending: nil))
        return extras.endIndex - 1
    }

    /// Empties the batch for reuse, once every change was delivered. Releases what the changes held:
    /// call it without the registry's lock. Returns `false` if the batch grew too large to keep.
    @inline(__always)
    func reset() -> Bool {
        changeCount = 0
        changedMask = 0
        anyKeyPriorSent = false
        if !extras.isEmpty || !primed.isEmpty || !delivered.isEmpty { return resetIndirect() }
        return changeCapacity <= 64 && finishers.count <= 16
    }

    private func resetIndirect() -> Bool {
        extras.removeAll(keepingCapacity: true)
        primed.removeAll(keepingCapacity: true)
        delivered.removeAll(keepingCapacity: true)
        return changeCapacity <= 64 && extras.capacity <= 64 && primed.capacity <= 64 && delivered.capacity <= 64
            && finishers.count <= 16
    }
}

/// Finishes the changes of a batch of one value type: specialised for it by the setter that recorded
/// the change. Every final value is read before any handler runs, so that a handler changing another
/// key of the batch cannot make that key's notification report its change.
@usableFromInline
final class _BatchFinisher {
    @usableFromInline let type: ObjectIdentifier
    /// Reads the change's final value.
    @usableFromInline let readFinalValue: (_ change: UnsafeMutablePointer<_BatchedChange>) -> Void
    /// Notifies `observers`, the key's observers at the end of the batch, of the change.
    @usableFromInline let deliver:
        (_ change: UnsafeMutablePointer<_BatchedChange>, _ observers: _ObserverSnapshot, _ batch: _BatchState, _ object: AnyObject) -> Void

    @inlinable
    init(
        type: ObjectIdentifier,
        readFinalValue: @escaping (_ change: UnsafeMutablePointer<_BatchedChange>) -> Void,
        deliver:
            @escaping (
                _ change: UnsafeMutablePointer<_BatchedChange>, _ observers: _ObserverSnapshot, _ batch: _BatchState, _ object: AnyObject
            )
            -> Void
    ) {
        self.type = type
        self.readFinalValue = readFinalValue
        self.deliver = deliver
    }
}

/// What a batch remembers of one changed key: where it is, its value before the batch and, once read,
/// its final value. A plain value: what only some changes need is in `_BatchState.extras`.
@usableFromInline
struct _BatchedChange {
    /// The storage offset of the property, or -1 for a zero-sized one (found by its key).
    @usableFromInline let offset: Int
    /// The property's storage in the object. The object outlives its batch: `coalescingChanges`
    /// runs on it.
    @usableFromInline let storage: UnsafeMutableRawPointer
    /// Where the key's observers were found in the registry's slots at its first change (a hint for
    /// the end of the batch), or -1.
    @usableFromInline let slotIndex: Int
    /// Its finisher, which the batch keeps (`_BatchState.finishers`).
    @usableFromInline let finisher: Unmanaged<_BatchFinisher>
    /// The index of its `_BatchedExtra` in `_BatchState.extras`, or -1 (then a slot names its key).
    @usableFromInline let extra: Int
    /// The size of the value when it is trivial and fits in a cell (its final value is then read by
    /// copying bytes, with no call of the finisher), else -1.
    @usableFromInline let trivialSize: Int
    /// At the end of the batch: the key's observers then, which the end of the batch keeps alive.
    @usableFromInline var current: Unmanaged<_ObserverSnapshot>?
    @usableFromInline var oldValue = _ValueCell()
    @usableFromInline var finalValue = _ValueCell()

    @usableFromInline
    @inline(__always)
    init(offset: Int, storage: UnsafeMutableRawPointer, slotIndex: Int, finisher: Unmanaged<_BatchFinisher>, extra: Int, trivialSize: Int) {
        self.offset = offset
        self.storage = storage
        self.slotIndex = slotIndex
        self.finisher = finisher
        self.extra = extra
        self.trivialSize = trivialSize
    }
}

/// What only some batched changes need: the key, when no slot names it (a property nobody observes
/// by key, a zero-sized one), and the values observers reading through key paths read before it.
@usableFromInline
struct _BatchedExtra {
    @usableFromInline var key: AnyKeyPath?
    @usableFromInline var pending: _BatchedPending?

    @inlinable
    init(key: AnyKeyPath?, pending: _BatchedPending?) {
        self.key = key
        self.pending = pending
    }
}

/// The values that observers reading through key paths read at the first change of a key, indexed
/// like the entries of `observers`, the key's observers then.
@usableFromInline
final class _BatchedPending {
    let observers: _ObserverSnapshot
    let values: ContiguousArray<Any?>

    @usableFromInline
    init(observers: _ObserverSnapshot, values: ContiguousArray<Any?>) {
        self.observers = observers
        self.values = values
    }

    /// The values indexed like the entries of `now`.
    @usableFromInline
    func values(for now: _ObserverSnapshot) -> ContiguousArray<Any?> {
        if now === observers { return values }
        return ContiguousArray(now.entries.map { entry in observers.entries.firstIndex { $0.id == entry.id }.flatMap { values[$0] } })
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
    ///
    /// - Complexity: A change records its key and old value (O(*k*) in the keys changed so far, to
    ///   find a repeated one), and the end delivers once per key. A batch is not free: each set in it
    ///   takes the registry's lock, and opening it, recording each change and delivering at the end
    ///   cost several times what the same sets cost without it (the gate, `kvo-bench gate`, measures
    ///   `batch-of-ten-sets` against `ten-sets-unbatched`). Batch for what
    ///   observers see (one notification per key, with the values before and after), not for speed.
    public func coalescingChanges<Result>(_ body: () throws -> Result) rethrows -> Result {
        // The object keeps its registry: no retain needed while it runs this.
        let registry = _kvoRegistry.load(ordering: .acquiring) ?? Unmanaged.passUnretained(_registryCreatingIfNeeded())
        registry._withUnsafeGuaranteedRef { $0.beginBatch() }
        defer { registry._withUnsafeGuaranteedRef { $0.endBatch(on: self) } }
        return try body()
    }
}
