import Synchronization

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Batches (`coalescingChanges`): one per object and thread, in the thread's record, and the look-up
// of the locked set path (`slowPathLookup`).

/// What the locked path of a set needs to know, found under one lock (`slowPathLookup`), besides the
/// references it hands over in its `inout` parameters. A plain value: nothing to retain or release.
@usableFromInline
struct _SlowPathLookup {
    /// Where the key's observers were found in the registry's slots, or -1, right at the state's
    /// `version` `version`.
    @usableFromInline var slotIndex = -1
    @usableFromInline var version = UInt.max
    /// A slot waits to learn which property it is, and this one may be it: ask `snapshot(forStorageAt:key:)`.
    @usableFromInline var needsLearning = false
    /// The calling thread's open batch on the object (unretained: its record holds it until this
    /// thread ends it).
    @usableFromInline var batch: Unmanaged<_BatchState>?
    /// The set only stores: its setter is silenced (a to-many mutation sends its own notification), or
    /// its key already changed in the thread's batch.
    @usableFromInline var storesOnly = false
    /// For a key without observers of its own, whether its class lets a set notify, if it was
    /// asked already (`rememberAutomaticNotification`).
    @usableFromInline var notifies: Bool?

    @inlinable
    init() {}
}

extension _ObserverRegistry {
    /// What the locked path of a set of the property stored at `offset` needs (for a zero-sized
    /// property, `offset` is -1 and `key` names it), with one lock round trip: the key's observers in
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
        let thread: pthread_t? = flags & (_SlowPath.batch | _SlowPath.silencedSetter) != 0 ? pthread_self() : nil
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
        if let thread, let record = state.threads.firstIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
            // Wrapper key paths are plain property key paths: comparing them runs no user code.
            if let key, state.threads[record].silencedKeys.contains(where: { _sameKey($0, key) }) {
                found.storesOnly = true
                return found
            }
            if let batch = state.threads[record].batch {
                if batch.hasChanged(offset: offset, key: key) {
                    found.storesOnly = true
                    return found
                }
                found.batch = Unmanaged.passUnretained(batch)
            }
        }
        let (index, needsLearning) = slotIndex(ofPropertyAt: offset, key: key, hint: -1)
        if index >= 0 {
            // Made here: a batch's delivery reads the snapshot of every slot a change names.
            snapshot = state.snapshot(ofSlotAt: index)
            key = state.slots[index].keyPath
            found.slotIndex = index
        } else if offset >= 0, let learned = state.learnedOffsets.firstIndex(where: { $0.offset == offset }) {
            key = key ?? state.learnedOffsets[learned].key
            found.notifies = state.automaticNotification.first { $0.offset == offset }?.notifies
        }
        found.needsLearning = needsLearning
        found.version = needsLearning ? .max : state.version
        // In a batch, observers of every key hear of its first change only.
        let priorSent = found.batch?._withUnsafeGuaranteedRef { $0.anyKeyPriorSent } ?? false
        if !priorSent, !state.anyKeyObservers.observers.isEmpty {
            anyKey = state.anyKeyObservers
        }
        return found
    }

    /// With the lock held: the batch in the record of `thread`, if it has one.
    func recordedBatch(of thread: pthread_t) -> _BatchState? {
        guard !state.threads.isEmpty, let record = state.threads.firstIndex(where: { pthread_equal($0.thread, thread) != 0 }) else {
            return nil
        }
        return state.threads[record].batch
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

    /// Opens a batch of the calling thread, or a nested level of the one it has open, in its record.
    func beginBatch() {
        let thread = pthread_self()
        withLock {
            if let batch = recordedBatch(of: thread) {
                batch.depth += 1
                return
            }
            let batch = state.spareBatch ?? _BatchState()
            state.spareBatch = nil
            batch.depth = 1
            state.withRecord(of: thread) { $0.batch = batch }
            storeStateFlags()
        }
    }

    /// The calling thread's open batch on this object, if any.
    @usableFromInline
    func currentBatch() -> _BatchState? {
        guard slowPathFlags.load(ordering: .acquiring) & _SlowPath.batch != 0 else { return nil }
        let thread = pthread_self()
        return withLock { recordedBatch(of: thread) }
    }
}
