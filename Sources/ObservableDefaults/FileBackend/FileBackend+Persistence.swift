#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import KeyValueObserving

extension FileBackend {
    // MARK: Loading

    /// Reads the file for the first time (before any store uses `storage`). Called with the lock held.
    func load(into storage: DefaultsStorage) -> [DefaultsError] {
        do {
            switch try file.read() {
            case .missing:
                return []
            case .values(let values, _):
                state.persisted = values
                storage.state.values = values.mapValues { DefaultsStorage.Entry(typed: nil, json: $0) }
                return []
            case .duplicateKeys(let values, let identity, let error, _):
                state.persisted = values
                storage.state.values = values.mapValues { DefaultsStorage.Entry(typed: nil, json: $0) }
                state.reportedCorruption = identity
                return [error]
            case .corrupt(let error, let identity, _):
                state.reportedCorruption = identity
                return [error]
            }
        } catch {
            return [error]
        }
    }

    // MARK: Scheduled writes

    /// Writes the dirty keys soon, on the queue, together with the changes made meanwhile. The
    /// scheduled write keeps the storage alive until it is done.
    func writeSoon(_ storage: DefaultsStorage) {
        queue.asyncAfter(deadline: .now() + Self.coalescingDelay) { [self] in writeScheduled(storage) }
    }

    /// A batched write. A failure is reported once per distinct cause (kind, system error and file,
    /// whatever the temporary file's name), and the write is tried again after a delay that doubles
    /// up to `maximumRetryDelay`, until it succeeds or another write takes its changes. A value that
    /// cannot be encoded was reported when it was set, and writing again would not help. A lock held
    /// by another process is not a failure: the write is tried again a little later; so is a broken
    /// file that may be another program's rewrite caught half-way (`suspicion` carries its looks).
    private func writeScheduled(_ storage: DefaultsStorage, suspicion: CorruptionSuspicion = CorruptionSuspicion()) {
        var suspicion = suspicion
        do throws(DefaultsError) {
            try writeDirtyKeys(storage, suspicion: &suspicion)
            lock.withLock { state.lockWaits = 0 }
        } catch {
            guard error.kind != .encodingFailed else { return }
            let (isNew, retryDelay) = lock.withLock { () -> (Bool, DispatchTimeInterval?) in
                var isNew = false
                if error.isLockContention {
                    state.lockWaits += 1
                } else if !error.isSuspectedCorruption {
                    isNew = state.reportedWriteFailures.insert(WriteFailure(error)).inserted
                    state.failedWrites += 1
                }
                // A set made meanwhile has scheduled a write already; so has an earlier retry.
                guard !storage.state.isWriteScheduled, !storage.state.dirty.isEmpty else { return (isNew, nil) }
                storage.state.isWriteScheduled = true
                if error.isSuspectedCorruption { return (false, .milliseconds(Self.corruptionConfirmationDelay)) }
                if error.isLockContention { return (false, .milliseconds(Self.lockRetryDelay(afterWaits: state.lockWaits))) }
                let doublings = min(state.failedWrites - 1, 16)
                return (isNew, .milliseconds(min(Self.firstRetryDelay << doublings, Self.maximumRetryDelay)))
            }
            if isNew { storage.report(error) }
            if let retryDelay {
                let suspicion = suspicion
                // Weak: retries of a disk that stays full must not keep a storage alive.
                queue.asyncAfter(deadline: .now() + retryDelay) { [weak storage, self] in
                    if let storage { writeScheduled(storage, suspicion: suspicion) }
                }
            }
        }
    }

    /// The delay in milliseconds before trying again for a lock file another process holds: 1 ms,
    /// doubling with each try up to 50 ms.
    static func lockRetryDelay(afterWaits waits: Int) -> Int {
        min(1 << min(max(waits - 1, 0), 6), 50)
    }

    /// Records that `error` was reported (to a new store's handler, at init), so that a write that
    /// fails the same way does not report it again.
    func noteReported(_ error: DefaultsError) {
        guard error.kind == .writeFailed else { return }
        lock.withLock { _ = state.reportedWriteFailures.insert(WriteFailure(error)) }
    }

    /// Reports `error` unless a failure of the same cause was reported since the last successful
    /// write (at init, by a batched write, or at exit).
    func reportOnce(_ error: DefaultsError, storage: DefaultsStorage) {
        let isNew = lock.withLock {
            if error.kind == .encodingFailed, let key = error.key { return storage.state.unencodableKeys.insert(key).inserted }
            return state.reportedWriteFailures.insert(WriteFailure(error)).inserted
        }
        if isNew { storage.report(error) }
    }

    // MARK: Waited-for writes

    /// At exit: makes the pending changes durable, reporting a failure once (it was reported
    /// already, most often, to a handler of a store that may be gone by now).
    func flushAtExit(_ storage: DefaultsStorage) {
        do {
            try flush(storage, timeout: nil, notice: nil)
        } catch {
            reportOnce(error, storage: storage)
        }
    }

    /// Writes this process's changes to the file and waits until they are durable. While another
    /// process holds the lock file, tries again with a growing delay (1 to 50 ms), waiting on the
    /// caller's thread so that the other stores' writes go on meanwhile.
    ///
    /// - Parameters:
    ///   - timeout: how long to wait for the lock at most; `nil` waits as long as it takes.
    ///   - notice: called once if the lock has been waited for `after`.
    /// - Throws: `.writeFailed` with `errno == ETIMEDOUT` when `timeout` expires; any write failure.
    func flush(_ storage: DefaultsStorage, timeout: Duration?, notice: (after: Duration, call: () -> Void)?) throws(DefaultsError) {
        try writeWaiting(storage, nil, timeout: timeout, notice: notice)
    }

    /// Runs `writeDirtyKeys(transaction)` on the queue until it neither finds the lock file held by
    /// another process nor a broken file that may be another program's rewrite caught half-way.
    /// Between tries it waits on the caller's thread (a growing delay of 1 to 50 ms for the lock,
    /// `corruptionConfirmationDelay` for a broken file), so that the other stores' writes go on
    /// meanwhile.
    ///
    /// - Throws: `.writeFailed` with `errno == ETIMEDOUT` when `timeout` expires while another process
    ///   holds the lock; any write failure.
    func writeWaiting(
        _ storage: DefaultsStorage,
        _ transaction: Transaction?,
        timeout: Duration? = nil,
        notice: (after: Duration, call: () -> Void)? = nil
    ) throws(DefaultsError) {
        let clock = ContinuousClock()
        let start = clock.now
        var waits = 0
        var noticed = false
        var suspicion = CorruptionSuspicion()
        while true {
            do throws(DefaultsError) {
                try writeOnQueue(storage, transaction, suspicion: &suspicion)
                return
            } catch {
                // On the caller's thread, or, for a flush from a handler running there, on the writer.
                if error.isSuspectedCorruption {
                    usleep(UInt32(Self.corruptionConfirmationDelay * 1000))
                    continue
                }
                guard error.isLockContention else { throw error }
                let waited = clock.now - start
                if let timeout, waited >= timeout {
                    throw DefaultsError(
                        .writeFailed, location: .file(path: file.path), errno: ETIMEDOUT,
                        reason: "gave up after \(timeout) waiting for another process to release its lock (\(error.reason))"
                    )
                }
                if let notice, !noticed, waited >= notice.after {
                    noticed = true
                    notice.call()
                }
                waits += 1
                usleep(UInt32(Self.lockRetryDelay(afterWaits: waits) * 1000))
            }
        }
    }
}
