import Synchronization

// Finding the observers of a set: by storage offset, learning offsets lazily; and the transition of
// the locked set path (`setAction`).

/// What the locked path of a set does (`Observed._setSlowPath`), decided with the lock held by
/// `_ObserverRegistry.State.setAction` and done after unlocking. A plain value: the references it
/// hands over are retained under the lock and taken by the setter (`takeRetainedValue`), so that
/// handing it over copies words and nothing else.
@usableFromInline
struct _SetAction {
    @usableFromInline
    enum Kind {
        /// Only store: the setter is silenced (a to-many mutation sends its own notification), or the
        /// calling thread's batch already has the key.
        case store
        /// Record the change in `batch` and nothing else: the key's observers (in slot `slotIndex`)
        /// need nothing before the store, its class lets it notify, and no observer of every key
        /// waits for `.prior`.
        case record
        /// Tell `observers` and `anyKey` around the store; or, in `batch`, record the change and tell
        /// those that need it before the store.
        case notify
    }

    @usableFromInline var kind = Kind.notify
    /// The calling thread's open batch, unretained: its thread's record holds it until this thread
    /// ends it.
    @usableFromInline var batch: Unmanaged<_BatchState>?
    /// Where the key's observers are in the registry's slots, or -1.
    @usableFromInline var slotIndex = -1
    /// The key's observers (retained: the setter takes them).
    @usableFromInline var observers: Unmanaged<_ObserverSnapshot>?
    /// The observers of every key, unless there are none or the batch told them already (retained).
    @usableFromInline var anyKey: Unmanaged<_AnyKeySnapshot>?
    /// The key, if the registry knows it (retained).
    @usableFromInline var key: Unmanaged<AnyKeyPath>?
    /// For a key without observers of its own: whether its class lets a set notify, if it was asked
    /// already (`rememberAutomaticNotification`).
    @usableFromInline var notifies: Bool?
    /// A slot waits to learn which property it is, and this one may be it: ask
    /// `snapshot(forStorageAt:key:)`.
    @usableFromInline var needsLearning = false

    @inlinable
    init(_ kind: Kind) {
        self.kind = kind
    }
}

extension _ObserverRegistry.State {
    /// Records that `key` is stored at `offset`.
    mutating func recordOffset(_ offset: Int, for key: AnyKeyPath) {
        if !learnedOffsets.contains(where: { $0.offset == offset }) {
            learnedOffsets.append((offset, key))
        }
    }

    /// Records which key is stored at `offset`, resolves the slot waiting for it, and returns that
    /// slot's index. `@Observed` keys are plain property key paths: comparing them runs no user code.
    @discardableResult
    mutating func learn(offset: Int, key: AnyKeyPath) -> Int? {
        recordOffset(offset, for: key)
        for index in slots.indices where slots[index].kind == .storage && slots[index].offset == nil {
            if _sameKey(slots[index].keyPath, key) {
                slots[index].offset = offset
                return index
            }
        }
        return nil
    }

    /// The observers of the `@Observed` property stored at `offset`, or whether a set of it must
    /// reveal its key (some slot waits to learn its offset, and this one may be it).
    mutating func snapshot(forStorageAt offset: Int) -> (snapshot: _ObserverSnapshot?, needsLearning: Bool) {
        var needsLearning = false
        // By index, reading only the fields needed: copying a slot would retain its key and snapshot.
        for index in slots.indices where slots[index].kind == .storage {
            let slotOffset = slots[index].offset
            if slotOffset == offset { return (snapshot(ofSlotAt: index), false) }
            needsLearning = needsLearning || slotOffset == nil
        }
        return (nil, needsLearning && !learnedOffsets.contains { $0.offset == offset })
    }

    /// The slot of the `@Observed` property `keyPath`. Inlined into registration, which the gate's
    /// `register-invalidate` measures (the optimiser does not inline it on its own).
    @inline(__always)
    mutating func observedPropertySlotIndex(_ keyPath: AnyKeyPath, isZeroSized: Bool) -> Int? {
        let kind: _ObserverRegistry.Slot.Kind = isZeroSized ? .zeroSizedStorage : .storage
        return slots.firstIndex { $0.kind == kind && _sameKey($0.keyPath, keyPath) }
    }
}

extension _ObserverRegistry.State {
    /// The transition of the locked set path, for a set of the property stored at `offset` (-1 for a
    /// zero-sized one, then named by `key`) by `thread` (`nil` when no thread has a batch or a
    /// silenced setter). `key` must be given for a silenced setter.
    ///
    /// - Complexity: O(*k*) in the number of observed keys and O(*c*) in the keys the batch changed
    ///   so far, by integer comparison.
    @inline(__always)
    mutating func setAction(offset: Int, key: AnyKeyPath?, thread: _ThreadID?) -> _SetAction {
        var action = _SetAction(.notify)
        if let thread {
            for record in threads.indices where threads[record].thread.isSame(as: thread) {
                // Wrapper key paths are plain property key paths: comparing them runs no user code.
                if let key, threads[record].silencedKeys.contains(where: { _sameKey($0, key) }) { return _SetAction(.store) }
                if let batch = threads[record].batch {
                    if batch._withUnsafeGuaranteedRef({ $0.hasChanged(offset: offset, key: key) }) { return _SetAction(.store) }
                    action.batch = batch
                }
                break
            }
        }
        indexSlotOffsetsIfNeeded()
        let (index, needsLearning) = slotIndex(ofPropertyAt: offset, key: key, hint: -1)
        action.slotIndex = index
        // In a batch, observers of every key hear of its first change only.
        let tellsAnyKey = hasAnyKeyObservers && !(action.batch?._withUnsafeGuaranteedRef { $0.anyKeyPriorSent } ?? false)
        if action.batch != nil, offset >= 0, index >= 0, !tellsAnyKey, slots[index].notifiesAutomatically, !slots[index].needsWillChange {
            action.kind = .record
            return action
        }
        action.needsLearning = needsLearning
        if index >= 0 {
            action.observers = .passRetained(snapshot(ofSlotAt: index))
            action.key = .passRetained(slots[index].keyPath)
        } else if offset >= 0, let learned = learnedOffsets.firstIndex(where: { $0.offset == offset }) {
            action.key = .passRetained(learnedOffsets[learned].key)
            action.notifies = automaticNotification.first { $0.offset == offset }?.notifies
        }
        if tellsAnyKey { action.anyKey = .passRetained(anyKeyObservers) }
        return action
    }

    /// The index of the slot of the `@Observed` property stored at `offset` (or, for `offset` -1, of
    /// the zero-sized one named `key`), trying `hint` first; -1 if none, then with whether a slot
    /// waits to learn its offset and this offset may be it. The caller has called
    /// `indexSlotOffsetsIfNeeded()` since the slots last changed.
    @inline(__always)
    func slotIndex(ofPropertyAt offset: Int, key: AnyKeyPath?, hint: Int) -> (index: Int, needsLearning: Bool) {
        if offset < 0 {
            guard let key else { return (-1, false) }
            for index in slots.indices where slots[index].kind == .zeroSizedStorage {
                if _sameKey(slots[index].keyPath, key) { return (index, false) }
            }
            return (-1, false)
        }
        if hint >= 0, hint < slotOffsets.count, slotOffsets[hint] == offset { return (hint, false) }
        for index in slotOffsets.indices where slotOffsets[index] == offset { return (index, false) }
        return (-1, hasSlotWaitingForItsOffset && !learnedOffsets.contains { $0.offset == offset })
    }
}

extension _ObserverRegistry {
    /// The locked set path's transition (`State.setAction`), with the lock held.
    @usableFromInline
    func setAction(offset: Int, key: AnyKeyPath?, thread: _ThreadID?) -> _SetAction {
        withLock { state.setAction(offset: offset, key: key, thread: thread) }
    }

    /// Whether the property stored at `offset` may have observers; `false` is definite.
    @inlinable
    func mayHaveObservers(atOffset offset: Int) -> Bool {
        observedMask.load(ordering: .acquiring) & _maskBit(forOffset: offset) != 0
    }

    /// The observers of the `@Observed` property stored at `offset`, or `nil` if it has none.
    /// `key` is called only while this object still has to learn which property `offset` is.
    ///
    /// - Complexity: O(*k*) in the number of observed keys of this object, by integer comparison.
    @usableFromInline
    func snapshot(forStorageAt offset: Int, key: () -> AnyKeyPath) -> _ObserverSnapshot? {
        let (found, needsLearning) = readState { $0.snapshot(forStorageAt: offset) }
        guard needsLearning else { return found }
        let key = key()
        return withState { state in state.learn(offset: offset, key: key).map { state.snapshot(ofSlotAt: $0) } }
    }

    /// Records that the explicitly notified key `key` (see `_ExplicitlyNotifiedKeys`) is found at
    /// `offset`, so its slot is resolved from the start and no set ever has to reveal it.
    @usableFromInline
    func declareOffset(_ offset: Int, for key: AnyKeyPath) {
        withState { $0.recordOffset(offset, for: key) }
    }
}
