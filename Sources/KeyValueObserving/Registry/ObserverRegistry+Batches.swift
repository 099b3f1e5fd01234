import Synchronization

// Batches (`coalescingChanges`): one per object and thread, in the thread's record.

extension _ObserverRegistry {
    /// With the lock held: the batch in the record of `thread`, if it has one.
    func recordedBatch(of thread: _ThreadID) -> _BatchState? {
        guard !state.threads.isEmpty, let record = state.threads.firstIndex(where: { $0.thread.isSame(as: thread) }) else {
            return nil
        }
        return state.threads[record].batch?.takeUnretainedValue()
    }

    /// Opens a batch of the calling thread, or a nested level of the one it has open, in its record.
    func beginBatch() {
        let thread = _ThreadID.current
        withLock {
            if let batch = recordedBatch(of: thread) {
                batch.depth += 1
                return
            }
            let batch = state.spareBatch ?? _BatchState()
            state.spareBatch = nil
            batch.depth = 1
            state.withRecord(of: thread) { $0.batch = Unmanaged.passRetained(batch) }
            storeStateFlags()
        }
    }

    /// The calling thread's open batch on this object, if any.
    @usableFromInline
    func currentBatch() -> _BatchState? {
        guard slowPathFlags.load(ordering: .acquiring) & _SlowPath.batch != 0 else { return nil }
        let thread = _ThreadID.current
        return withLock { recordedBatch(of: thread) }
    }
}
