#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Batches (`coalescingChanges`): one per object and thread, in the thread's record.

extension _ObserverRegistry {
    func beginBatch() {
        let thread = pthread_self()
        withState { state in
            state.withRecord(of: thread) { record in
                if let batch = record.batch {
                    batch.depth += 1
                } else {
                    record.batch = _BatchState()
                }
            }
        }
    }

    func endBatch(on object: AnyObject) {
        let thread = pthread_self()
        let finished: _BatchState? = withState { state in
            state.withRecord(of: thread) { record in
                guard let batch = record.batch else { return nil }
                batch.depth -= 1
                guard batch.depth == 0 else { return nil }
                record.batch = nil
                return batch
            }
        }
        guard let finished else { return }
        // Delivered after the batch is closed: changes made by handlers notify as usual. Every final
        // value is read before any handler runs, so a handler changing another key of the batch
        // cannot make that key's notification report its own change.
        let deliveries = finished.finishers.map { $0() }
        for deliver in deliveries { deliver() }
        if !finished.changedKeys.isEmpty, let anyKey = anyKeySnapshot() {
            anyKey.didChange(
                object,
                finished.changedKeys,
                storageOffsets: .many(finished.changedOffsets.map { $0 < 0 ? nil : $0 })
            )
        }
    }

    /// The calling thread's open batch on this object, if any.
    @usableFromInline
    func currentBatch() -> _BatchState? {
        guard slowPathFlags.load(ordering: .acquiring) & _SlowPath.batch != 0 else { return nil }
        let thread = pthread_self()
        mutex.lock()
        defer { mutex.unlock() }
        return state.record(of: thread)?.batch
    }
}
