import Synchronization

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

// Ending a batch: under the lock, the transition closes it and gathers what its delivery needs (a
// `BatchDelivery`, filled in place); after unlocking, the changes are delivered.

extension _ObserverRegistry {
    /// How a batch ended, as the transition of `endBatch` decides under the lock.
    enum BatchEnding {
        /// It was nested in another batch of the same thread, or there was none: nothing to deliver.
        case nested
        /// The owner slot's batch closed (the registry keeps it, `State.slotBatch`, for reuse).
        case ownerSlot(Unmanaged<_BatchState>)
        /// A batch of the thread's record closed.
        case record(_BatchState)
    }

    /// What the delivery of a closed batch needs from the state, gathered under the lock.
    ///
    /// The snapshots delivered from are not retained one by one: `pinned`, a copy of the slots array,
    /// keeps them all (a registration meanwhile copies the array before replacing one).
    struct BatchDelivery {
        /// `nil` only until the transition fills it in (an empty array would cost a release there).
        var pinned: ContiguousArray<Slot>?
        /// What only some batches need (observers of every key, slot indices gone stale), in one
        /// reference: a batch without them then has one `nil` to destroy, not four.
        var rare: Rare?
        /// Whether the slot indices the changes were recorded with are still right: then `pinned` has
        /// what the end needs, and it is read after unlocking.
        var hintsAreRight = true

        final class Rare {
            /// The observers of every key to tell at the end, if any.
            var anyKey: _AnyKeySnapshot?
            /// The changed keys, for the observers of every key, as far as they are known under the lock.
            var named: (keys: [AnyKeyPath], offsets: [Int?])?
            /// The changes whose property may be the one a slot waits to learn.
            var learning: [Int]?
        }
    }

    func endBatch(on object: AnyObject) {
        let thread = pthread_self()
        var delivery = BatchDelivery()
        let ending = withLock { endBatchLocked(thread: thread, delivery: &delivery) }
        switch ending {
        case .nested:
            return
        case .ownerSlot(let owned):
            // Tracked observations among the observers are evaluated once, at the end.
            let deferral = _TrackingDeferral.begin()
            owned._withUnsafeGuaranteedRef { deliver($0, &delivery, on: object) }
            deferral?.end()
            let isKept = owned._withUnsafeGuaranteedRef { $0.reset() }
            if !isKept {
                // Dropped by a thread holding the slot, as `batchOwner` requires (a thread taking
                // the slot without the lock may be reading the batch); if another holds it now, the
                // batch, empty, stays.
                let me = _threadID(thread)
                let dropped: _BatchState? = withLock {
                    guard state.slotBatch === owned.takeUnretainedValue(), takeOwnerSlot(for: me) else { return nil }
                    let dropped = state.slotBatch
                    state.slotBatch = nil
                    ownedBatch.store(nil, ordering: .relaxed)
                    batchOwner.store(0, ordering: .releasing)
                    return dropped
                }
                // Cleared before the release: the batch may be freed with it (no slot holds it now,
                // so no later batch can wait for the flag).
                owned._withUnsafeGuaranteedRef { $0.isDelivering.store(false, ordering: .releasing) }
                withExtendedLifetime(dropped) {}
                return
            }
            owned._withUnsafeGuaranteedRef { $0.isDelivering.store(false, ordering: .releasing) }
        case .record(let finished):
            let deferral = _TrackingDeferral.begin()
            deliver(finished, &delivery, on: object)
            deferral?.end()
            _ = finished.reset()
        }
    }

    /// The transition of `endBatch`, with the lock held: closes the calling thread's batch if this
    /// ends its outermost level, and gathers what its delivery needs into `delivery`.
    @inline(__always)
    private func endBatchLocked(thread: pthread_t, delivery: inout BatchDelivery) -> BatchEnding {
        if let owned = ownedBatch(of: thread) {
            let isDone = owned._withUnsafeGuaranteedRef { batch in
                batch.depth -= 1
                guard batch.depth == 0 else { return false }
                // Until its delivery is over, the next batch takes another one.
                batch.isDelivering.store(true, ordering: .relaxed)
                return true
            }
            guard isDone else { return .nested }
            giveBackOwnerSlot()
            owned._withUnsafeGuaranteedRef { prepareDelivery(of: $0, into: &delivery) }
            return .ownerSlot(owned)
        }
        let finished: _BatchState? = state.withRecord(of: thread) { record in
            guard let batch = record.batch else { return nil }
            batch.depth -= 1
            guard batch.depth == 0 else { return nil }
            record.batch = nil
            return batch
        }
        guard let finished else { return .nested }
        storeStateFlags(state.slowPathFlags)
        prepareDelivery(of: finished, into: &delivery)
        return .record(finished)
    }

    /// With the lock held: what the delivery of `batch`, just closed, needs. The observers notified
    /// are those of the end of the batch (one may have registered meanwhile).
    @inline(__always)
    private func prepareDelivery(of batch: _BatchState, into delivery: inout BatchDelivery) {
        // Unless the observers changed since the changes were recorded, their slot indices are right.
        delivery.hintsAreRight = batch.slotIndicesVersion == stateVersion.load(ordering: .relaxed)
        // The delivery reads the snapshots from the copy, after unlocking. A change was recorded
        // with its slot's snapshot made (`refreshShortcut`, `slowPathLookup`), and with the indices
        // right no transition has happened since, so only a slot a transition left with one
        // observer can lack it.
        if !delivery.hintsAreRight, batch.changeCount != 0 { state.makeAllSnapshots() }
        // Debug builds check that rule: a path that hands out slot indices without making the
        // snapshot would be undefined behaviour in an optimised build (`Slot.madeSnapshot`).
        assert(
            !delivery.hintsAreRight
                || (0..<batch.changeCount).allSatisfy { index in
                    let slot = (batch.changes + index).pointee.slotIndex
                    return slot < 0 || state.slots[slot].hasSnapshot
                },
            "KeyValueObserving: a batched change names a slot without a snapshot")
        delivery.pinned = state.slots
        let count = batch.changeCount
        if count != 0, !state.anyKeyObservers.observers.isEmpty {
            let rare = BatchDelivery.Rare()
            rare.anyKey = state.anyKeyObservers
            rare.named = ([], [])
            delivery.rare = rare
        }
        guard !delivery.hintsAreRight else { return }
        let rare = delivery.rare ?? BatchDelivery.Rare()
        delivery.rare = rare
        for index in 0..<count {
            let change = batch.changes + index
            let offset = change.pointee.offset
            let extra = change.pointee.extra
            let extraKey = extra < 0 ? nil : batch.extras[extra].key
            let (slot, needsLearning) = slotIndex(ofPropertyAt: offset, key: extraKey, hint: change.pointee.slotIndex)
            change.pointee.current = slot < 0 ? nil : Unmanaged.passUnretained(delivery.pinned.unsafelyUnwrapped[slot].madeSnapshot)
            if needsLearning { rare.learning = (rare.learning ?? []) + [index] }
            // A change is recorded without its key only when a slot knew its offset, which the
            // registry then remembers for good.
            if rare.named != nil,
                let key = extraKey
                    ?? (slot < 0
                        ? state.learnedOffsets.first { $0.offset == offset }?.key : delivery.pinned.unsafelyUnwrapped[slot].keyPath)
            {
                rare.named!.keys.append(key)
                rare.named!.offsets.append(offset < 0 ? nil : offset)
            }
        }
    }

    /// After unlocking: delivers the changes of `batch`, which is closed (changes made by handlers
    /// notify as usual) and reachable from the caller only. Every final value is read before any
    /// handler runs: a trivial one by copying its bytes (no user code).
    private func deliver(_ batch: _BatchState, _ delivery: inout BatchDelivery, on object: AnyObject) {
        var learned: [_ObserverSnapshot]?
        defer { withExtendedLifetime(learned) {} }
        let count = batch.changeCount
        let rare = delivery.rare
        for index in rare?.learning ?? [] {
            // Only changes recorded with their key can be waiting to be learned.
            let change = batch.changes + index
            guard change.pointee.extra >= 0, let key = batch.extras[change.pointee.extra].key else { continue }
            guard let snapshot = snapshot(forStorageAt: change.pointee.offset, key: { key }) else { continue }
            learned = (learned ?? []) + [snapshot]
            change.pointee.current = Unmanaged.passUnretained(snapshot)
        }
        let hintsAreRight = delivery.hintsAreRight
        for index in 0..<count {
            let change = batch.changes + index
            if !change.pointee.finalValue.copyTrivialValue(from: change.pointee.storage, size: change.pointee.trivialSize) {
                change.pointee.finisher._withUnsafeGuaranteedRef { $0.readFinalValue(change) }
            }
            if hintsAreRight, let rare, rare.named != nil {
                let extra = change.pointee.extra
                let slot = change.pointee.slotIndex
                // With the slot indices right, a change without a slot was recorded with its key.
                if let key = extra < 0 ? delivery.pinned.unsafelyUnwrapped[slot].keyPath : batch.extras[extra].key {
                    rare.named!.keys.append(key)
                    rare.named!.offsets.append(change.pointee.offset < 0 ? nil : change.pointee.offset)
                }
            }
        }
        for index in 0..<count {
            let change = batch.changes + index
            let slot = change.pointee.slotIndex
            // With no observers left, the values are still taken (a box is released).
            let observers =
                hintsAreRight
                ? Unmanaged.passUnretained(slot < 0 ? _ObserverSnapshot.none : delivery.pinned.unsafelyUnwrapped[slot].madeSnapshot)
                : change.pointee.current ?? Unmanaged.passUnretained(_ObserverSnapshot.none)
            change.pointee.finisher._withUnsafeGuaranteedRef { finisher in
                observers._withUnsafeGuaranteedRef { finisher.deliver(change, $0, batch, object) }
            }
        }
        if let anyKey = rare?.anyKey, let named = rare?.named {
            anyKey.didChange(object, named.keys, storageOffsets: .many(named.offsets))
        }
    }
}
