import Synchronization

// Ending a batch: under the lock, the transition closes it and gathers what its delivery needs (a
// `BatchDelivery`, filled in place); after unlocking, the changes are delivered.

extension _ObserverRegistry {
    /// What the delivery of a closed batch needs from the state, gathered under the lock.
    ///
    /// The snapshots delivered from (each change's `current`) are not retained one by one: `pinned`,
    /// a copy of the slots array, keeps them all (a registration meanwhile copies the array before
    /// replacing one).
    struct BatchDelivery {
        var pinned: ContiguousArray<Slot> = []
        /// The observers of every key to tell at the end, if any, and the keys changed (with their
        /// storage offsets) as far as they are known under the lock.
        var anyKey: (observers: _AnyKeySnapshot, keys: [AnyKeyPath], offsets: [Int?])?
        /// The changes whose property may be the one a slot waits to learn, if any.
        var learning: [Int]?
    }

    /// Ends a level of the calling thread's batch; the outermost one delivers its changes.
    func endBatch(on object: AnyObject) {
        let thread = _ThreadID.current
        var delivery = BatchDelivery()
        let finished = withLock { endBatchLocked(thread: thread, delivery: &delivery) }
        guard let finished else { return }
        // Tracked observations among the observers are evaluated once, at the end.
        let deferral = _TrackingDeferral.begin()
        deliver(finished, &delivery, on: object)
        deferral?.end()
        // Emptied without the lock (it releases what the changes held), and kept for the next batch
        // unless it grew large or one is kept already.
        guard finished.reset() else { return }
        let unused: _BatchState? = withLock {
            guard state.spareBatch == nil, !state.isTornDown else { return finished }
            state.spareBatch = finished
            return nil
        }
        withExtendedLifetime(unused) {}
    }

    /// The transition of `endBatch`, with the lock held: closes the calling thread's batch if this
    /// ends its outermost level, and gathers what its delivery needs into `delivery`.
    @inline(__always)
    private func endBatchLocked(thread: _ThreadID, delivery: inout BatchDelivery) -> _BatchState? {
        let finished: _BatchState? = state.withRecord(of: thread) { record in
            guard let batch = record.batch else { return nil }
            batch._withUnsafeGuaranteedRef { $0.depth -= 1 }
            guard batch._withUnsafeGuaranteedRef({ $0.depth == 0 }) else { return nil }
            record.batch = nil
            return batch.takeRetainedValue()
        }
        guard let finished else { return nil }
        storeStateFlags()
        prepareDelivery(of: finished, into: &delivery)
        return finished
    }

    /// With the lock held: what the delivery of `batch`, just closed, needs. The observers notified
    /// are those of the end of the batch (one may have registered meanwhile): each change's slot is
    /// found again, trying the one it was recorded with first.
    @inline(__always)
    private func prepareDelivery(of batch: _BatchState, into delivery: inout BatchDelivery) {
        let count = batch.changeCount
        guard count != 0 else { return }
        state.indexSlotOffsetsIfNeeded()
        let named = state.hasAnyKeyObservers
        if named { delivery.anyKey = (state.anyKeyObservers, [], []) }
        for index in 0..<count {
            let change = batch.changes + index
            let offset = change.pointee.offset
            let extra = change.pointee.extra
            let extraKey = extra < 0 ? nil : batch.extras[extra].key
            let (slot, needsLearning) = state.slotIndex(ofPropertyAt: offset, key: extraKey, hint: change.pointee.slotIndex)
            // Made here if a transition left the slot with one observer: `pinned`, copied below, keeps it.
            change.pointee.current = slot < 0 ? nil : state.unretainedSnapshot(ofSlotAt: slot)
            if needsLearning { delivery.learning = (delivery.learning ?? []) + [index] }
            // A change is recorded without its key only when a slot knew its offset, which the
            // registry then remembers for good.
            if named,
                let key = extraKey
                    ?? (slot < 0 ? state.learnedOffsets.first { $0.offset == offset }?.key : state.slots[slot].keyPath)
            {
                delivery.anyKey?.keys.append(key)
                delivery.anyKey?.offsets.append(offset < 0 ? nil : offset)
            }
        }
        delivery.pinned = state.slots
    }

    /// After unlocking: delivers the changes of `batch`, which is closed (changes made by handlers
    /// notify as usual) and reachable from the caller only. Every final value is read before any
    /// handler runs: a trivial one by copying its bytes (no user code).
    private func deliver(_ batch: _BatchState, _ delivery: inout BatchDelivery, on object: AnyObject) {
        var learned: [_ObserverSnapshot]?
        defer { withExtendedLifetime(learned) {} }
        for index in delivery.learning ?? [] {
            // Only changes recorded with their key can be waiting to be learned.
            let change = batch.changes + index
            guard change.pointee.extra >= 0, let key = batch.extras[change.pointee.extra].key else { continue }
            guard let snapshot = snapshot(forStorageAt: change.pointee.offset, key: { key }) else { continue }
            learned = (learned ?? []) + [snapshot]
            change.pointee.current = Unmanaged.passUnretained(snapshot)
        }
        let count = batch.changeCount
        for index in 0..<count {
            let change = batch.changes + index
            if !change.pointee.finalValue.copyTrivialValue(from: change.pointee.storage, size: change.pointee.trivialSize) {
                change.pointee.finisher._withUnsafeGuaranteedRef { $0.readFinalValue(change) }
            }
        }
        for index in 0..<count {
            let change = batch.changes + index
            // With no observers left, the values are still taken (a box is released).
            let observers = change.pointee.current ?? Unmanaged.passUnretained(_ObserverSnapshot.none)
            change.pointee.finisher._withUnsafeGuaranteedRef { finisher in
                observers._withUnsafeGuaranteedRef { finisher.deliver(change, $0, batch, object) }
            }
        }
        if let anyKey = delivery.anyKey {
            anyKey.observers.didChange(object, anyKey.keys, storageOffsets: .many(anyKey.offsets))
        }
    }
}
