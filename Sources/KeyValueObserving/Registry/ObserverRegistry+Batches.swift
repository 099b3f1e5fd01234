import Synchronization

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Batches (`coalescingChanges`): one per object and thread, and the lookups of the set path's slow
// path (`_setSlowPath`): without the lock for a change the calling thread's batch can record
// through its shortcut (`recordInOwnedBatch`), else everything under one lock (`slowPathLookup`).
//
// One batch at a time per object is held by the registry's owner slot (`batchOwner`, `ownedBatch`),
// which its thread reads without the lock; other threads' batches are in their thread records.

/// What the slow path of a set needs to know, found under one lock (`slowPathLookup`), besides the
/// references it hands over in its `inout` parameters. A plain value: nothing to retain or release.
@usableFromInline
struct _SlowPathLookup {
    /// Where the key's observers were found in the registry's slots, or -1, right at `stateVersion`
    /// `version`.
    @usableFromInline var slotIndex = -1
    @usableFromInline var version = UInt.max
    /// A slot waits to learn which property it is, and this one may be it: ask `snapshot(forStorageAt:key:)`.
    @usableFromInline var needsLearning = false
    /// The calling thread's open batch on the object (unretained: the registry holds it until this
    /// thread ends it).
    @usableFromInline var batch: Unmanaged<_BatchState>?
    /// The set only stores: its setter is silenced (a to-many mutation sends its own notification), or
    /// its key already changed in the thread's batch.
    @usableFromInline var storesOnly = false

    @inlinable
    init() {}
}

/// How a set of a property goes into the calling thread's batch without the lock
/// (`recordInOwnedBatch`).
@usableFromInline
enum _BatchShortcutResult {
    /// Not that way: take the locked path (`slowPathLookup`).
    case unavailable
    /// The key already changed in the batch: the set only stores.
    case repeated
    /// The change is recorded: write the value before it into the change's `oldValue`, then store.
    case recorded(UnsafeMutablePointer<_BatchedChange>)
    /// The key has no observers (`slot` is -1), so the class decides whether it notifies, by key; or
    /// the value's type is not the last one recorded. Record it with `_recordBatchedChange`.
    case recordWithKey(Unmanaged<_BatchState>, slot: Int, version: UInt)
}

/// A thread's identity as an integer (0 is no thread).
@inlinable
func _threadID(_ thread: pthread_t) -> UInt {
    #if canImport(Glibc)
    UInt(thread)
    #else
    UInt(bitPattern: thread)
    #endif
}

extension _ObserverRegistry {
    /// Records a set of the `@Observed` property stored at `offset` (not a zero-sized one) in the
    /// calling thread's batch without the lock, if that thread holds the owner slot and the batch's
    /// shortcut is valid. The caller checked `slowPathFlags` (a batch, no silenced setter).
    ///
    /// - Complexity: O(1) for a property whose storage offset class (`_maskBit(forOffset:)`) no
    ///   other observed or changed property shares.
    @inlinable
    @inline(__always)
    func recordInOwnedBatch(offset: Int, storage: UnsafeMutableRawPointer, valueType: ObjectIdentifier, trivialSize: Int)
        -> _BatchShortcutResult
    {
        guard batchOwner.load(ordering: .relaxed) == _threadID(pthread_self()), let pointer = ownedBatch.load(ordering: .relaxed) else {
            return .unavailable
        }
        // The owner slot holds the batch until this thread ends it.
        let batch = Unmanaged<_BatchState>.fromOpaque(pointer)
        return batch._withUnsafeGuaranteedRef { state in
            let version = stateVersion.load(ordering: .acquiring)
            guard state.shortcutVersion == version else { return .unavailable }
            if state.changedMask & _maskBit(forOffset: offset) != 0, state.hasChanged(offset: offset, key: nil) { return .repeated }
            let slot = state.shortcutSlot(ofPropertyAt: offset)
            guard slot >= 0, let finisher = state.lastFinisher, finisher._withUnsafeGuaranteedRef({ $0.type == valueType }) else {
                return .recordWithKey(batch, slot: slot, version: version)
            }
            return .recorded(
                state.append(
                    offset: offset, storage: storage, slotIndex: slot, version: version, finisher: finisher, extra: -1,
                    trivialSize: trivialSize))
        }
    }

    /// What the slow path of a set of the property stored at `offset` needs (for a zero-sized property,
    /// `offset` is -1 and `key` names it), with one lock round trip: the key's observers in
    /// `snapshot`, the key in `key` if a slot names it, the observers of every key in `anyKey` if the
    /// set may have to tell them. `flags` is the value of `slowPathFlags` the caller read; `key` must
    /// be passed in when it has the silenced-setter bit.
    ///
    /// - Complexity: O(*k*) in the number of observed keys, plus O(*c*) in the keys changed so far in
    ///   the thread's batch, by integer comparison.
    @usableFromInline
    func slowPathLookup(
        offset: Int,
        flags: UInt8,
        key: inout AnyKeyPath?,
        snapshot: inout _ObserverSnapshot?,
        anyKey: inout _AnyKeySnapshot?
    ) -> _SlowPathLookup {
        let thread: pthread_t? = flags & (_SlowPath.anyBatch | _SlowPath.silencedSetter) != 0 ? pthread_self() : nil
        return withLock { slowPathLookupLocked(offset: offset, thread: thread, key: &key, snapshot: &snapshot, anyKey: &anyKey) }
    }

    /// The transition of `slowPathLookup`, with the lock held.
    @inline(__always)
    private func slowPathLookupLocked(
        offset: Int,
        thread: pthread_t?,
        key: inout AnyKeyPath?,
        snapshot: inout _ObserverSnapshot?,
        anyKey: inout _AnyKeySnapshot?
    ) -> _SlowPathLookup {
        var found = _SlowPathLookup()
        if let thread {
            var batch = ownedBatch(of: thread)?.takeUnretainedValue()
            if let record = state.threads.firstIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
                // Wrapper key paths are plain property key paths: comparing them runs no user code.
                if let key, state.threads[record].silencedKeys.contains(where: { _sameKey($0, key) }) {
                    found.storesOnly = true
                    return found
                }
                batch = batch ?? state.threads[record].batch
            }
            if let batch {
                if batch.hasChanged(offset: offset, key: key) {
                    found.storesOnly = true
                    return found
                }
                refreshShortcut(of: batch)
                found.batch = Unmanaged.passUnretained(batch)
            }
        }
        let (index, needsLearning) = slotIndex(ofPropertyAt: offset, key: key, hint: -1)
        if index >= 0 {
            snapshot = state.snapshot(ofSlotAt: index)
            key = state.slots[index].keyPath
            found.slotIndex = index
        }
        found.needsLearning = needsLearning
        found.version = needsLearning ? .max : stateVersion.load(ordering: .relaxed)
        // In a batch, observers of every key hear of its first change only.
        let priorSent = found.batch?._withUnsafeGuaranteedRef { $0.anyKeyPriorSent } ?? false
        if !priorSent, !state.anyKeyObservers.observers.isEmpty {
            anyKey = state.anyKeyObservers
        }
        return found
    }

    /// With the lock held: the batch in the owner slot if `thread` holds it (the slot keeps it).
    func ownedBatch(of thread: pthread_t) -> Unmanaged<_BatchState>? {
        guard batchOwner.load(ordering: .relaxed) == _threadID(thread), let pointer = ownedBatch.load(ordering: .relaxed) else {
            return nil
        }
        return Unmanaged<_BatchState>.fromOpaque(pointer)
    }

    /// With the lock held: the batch in the record of `thread`, if it has one.
    func recordedBatch(of thread: pthread_t) -> _BatchState? {
        guard !state.threads.isEmpty, let record = state.threads.firstIndex(where: { pthread_equal($0.thread, thread) != 0 }) else {
            return nil
        }
        return state.threads[record].batch
    }

    /// With the lock held: brings the shortcut of `batch` up to date with the state.
    private func refreshShortcut(of batch: _BatchState) {
        let version = stateVersion.load(ordering: .relaxed)
        guard batch.shortcutCheckedVersion != version else { return }
        batch.shortcutCheckedVersion = version
        batch.clearShortcut()
        if !state.anyKeyObservers.observers.isEmpty, state.anyKeyObservers.wantsPrior { return }
        for index in state.slots.indices where state.slots[index].kind == .storage {
            // A slot still to learn its offset could be any property's.
            guard let offset = state.slots[index].offset else { return }
            guard !state.slots[index].needsWillChange, state.slots[index].notifiesAutomatically else { return }
            // The batch's delivery reads the snapshot of every slot a change names.
            _ = state.snapshot(ofSlotAt: index)
            batch.addToShortcut(offset: offset, slot: index)
        }
        batch.shortcutVersion = version
    }

    /// With the lock held: the index of the slot of the `@Observed` property stored at `offset` (or,
    /// for `offset` -1, of the zero-sized one named `key`), trying `hint` first; -1 if none, then
    /// with whether a slot waits to learn its offset and this offset may be it.
    ///
    /// By index, reading only the fields needed: copying a slot, or calling a method of `State`,
    /// would retain what it holds.
    @inline(__always)
    func slotIndex(ofPropertyAt offset: Int, key: AnyKeyPath?, hint: Int) -> (index: Int, needsLearning: Bool) {
        if offset < 0 {
            guard let key else { return (-1, false) }
            for index in state.slots.indices where state.slots[index].kind == .zeroSizedStorage {
                if _sameKey(state.slots[index].keyPath, key) { return (index, false) }
            }
            return (-1, false)
        }
        if hint >= 0, hint < state.slots.count, state.slots[hint].kind == .storage, state.slots[hint].offset == offset {
            return (hint, false)
        }
        var waiting = false
        for index in state.slots.indices where state.slots[index].kind == .storage {
            let slotOffset = state.slots[index].offset
            if slotOffset == offset { return (index, false) }
            waiting = waiting || slotOffset == nil
        }
        return (-1, waiting && !state.learnedOffsets.contains { $0.offset == offset })
    }

    /// Opens a batch of the calling thread: without the lock when the thread holds the owner slot
    /// (a nested batch) or can take it, else with it.
    func beginBatch() {
        let thread = pthread_self()
        let me = _threadID(thread)
        if beginBatchInOwnerSlot(me: me) { return }
        withLock { beginBatchLocked(thread: thread, me: me) }
    }

    /// Opens the batch without the lock if this thread, `me`, holds the owner slot or takes it; `false`
    /// if it cannot (the slot is held, has no batch yet, its batch is still delivering, or some
    /// thread's record has a batch, which may be this thread's own).
    @inline(__always)
    private func beginBatchInOwnerSlot(me: UInt) -> Bool {
        let owner = batchOwner.load(ordering: .relaxed)
        if owner == me {
            // This thread's batch: nothing else touches it while the slot is this thread's.
            guard let pointer = ownedBatch.load(ordering: .relaxed) else { return false }
            Unmanaged<_BatchState>.fromOpaque(pointer)._withUnsafeGuaranteedRef { $0.depth += 1 }
            return true
        }
        // A thread whose record has a batch set it under the lock, and saw its bit set there (it set
        // it or found it set), and the bit stays while the batch does: such a thread sees it here.
        guard owner == 0, slowPathFlags.load(ordering: .relaxed) & _SlowPath.recordedBatch == 0 else { return false }
        guard takeOwnerSlot(for: me) else { return false }
        // Holding the slot, the batch it points to cannot be dropped (`ownedBatch`).
        guard let pointer = ownedBatch.load(ordering: .relaxed) else {
            batchOwner.store(0, ordering: .releasing)
            return false
        }
        return openSlotBatch(pointer)
    }

    /// Called by the slot's holder: opens the slot's batch at `pointer` for reuse (its buffers keep
    /// their capacity, its shortcut may still hold), or gives the slot back and returns `false` if
    /// the batch's last delivery is still under way.
    @inline(__always)
    private func openSlotBatch(_ pointer: UnsafeMutableRawPointer) -> Bool {
        let isFree = Unmanaged<_BatchState>.fromOpaque(pointer)._withUnsafeGuaranteedRef { batch in
            guard !batch.isDelivering.load(ordering: .acquiring) else { return false }
            batch.depth = 1
            return true
        }
        guard isFree else {
            batchOwner.store(0, ordering: .releasing)
            return false
        }
        slowPathFlags.bitwiseOr(_SlowPath.batch, ordering: .releasing)
        return true
    }

    /// The transition of `beginBatch`, with the lock held.
    @inline(__always)
    private func beginBatchLocked(thread: pthread_t, me: UInt) {
        if !state.threads.isEmpty, let batch = recordedBatch(of: thread) {
            batch.depth += 1
            return
        }
        // The slot first, as without the lock: `ownedBatch` is then set only by a thread holding the
        // slot and the lock, and the next holder reads the batch through the slot's hand-over.
        if takeOwnerSlot(for: me) {
            if let pointer = ownedBatch.load(ordering: .relaxed) {
                if openSlotBatch(pointer) { return }
            } else {
                let batch = _BatchState()
                state.slotBatch = batch
                ownedBatch.store(Unmanaged.passUnretained(batch).toOpaque(), ordering: .relaxed)
                slowPathFlags.bitwiseOr(_SlowPath.batch, ordering: .releasing)
                return
            }
        }
        // Another thread holds the slot, or its last batch is still delivering: this batch is in
        // the thread's record.
        let batch = _BatchState()
        state.withRecord(of: thread) { $0.batch = batch }
        storeStateFlags(state.slowPathFlags)
    }

    /// Takes the owner slot for the thread `me` if it is free (see `batchOwner`).
    @inline(__always)
    func takeOwnerSlot(for me: UInt) -> Bool {
        batchOwner.compareExchange(expected: 0, desired: me, successOrdering: .acquiring, failureOrdering: .relaxed).exchanged
    }

    /// Gives the owner slot back, its batch closed: its bit first, so that the next holder's bit
    /// is not cleared. Called by the slot's holder.
    @inline(__always)
    func giveBackOwnerSlot() {
        slowPathFlags.bitwiseAnd(~_SlowPath.batch, ordering: .releasing)
        batchOwner.store(0, ordering: .releasing)
    }

    /// Stores the bits of `slowPathFlags` that the state decides (`State.slowPathFlags`), keeping the
    /// owner slot's, which its holder sets and clears without the lock. Called with the lock held:
    /// the state's bits change only then, so flipping those that differ leaves the slot's as it is
    /// whatever its holder does meanwhile.
    @inline(__always)
    func storeStateFlags(_ flags: UInt8) {
        let differing = (slowPathFlags.load(ordering: .relaxed) ^ flags) & ~_SlowPath.batch
        // Most transitions leave the flags as they are: then nothing is stored.
        if differing != 0 { slowPathFlags.bitwiseXor(differing, ordering: .releasing) }
    }

    /// The calling thread's open batch on this object, if any.
    @usableFromInline
    func currentBatch() -> _BatchState? {
        guard slowPathFlags.load(ordering: .acquiring) & _SlowPath.anyBatch != 0 else { return nil }
        let thread = pthread_self()
        return withLock { ownedBatch(of: thread)?.takeUnretainedValue() ?? recordedBatch(of: thread) }
    }
}
