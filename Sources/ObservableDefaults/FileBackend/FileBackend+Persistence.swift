#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif
import Dispatch
import KeyValueObserving

extension FileBackend {
    // MARK: Loading

    /// Reads the file for the first time, before any store uses `storage` (under its lock: a reload
    /// the watcher starts meanwhile waits, and then diffs against what this read found).
    func load(into storage: DefaultsStorage) -> [DefaultsError] {
        let problems: [DefaultsError] = storage.withBackendSection { section in
            do throws(DefaultsError) {
                switch try file.read() {
                case .missing:
                    return []
                case .values(let values, _):
                    state.persisted = values
                    section.setLoadedValues(values)
                    return []
                case .duplicateKeys(let values, _, let error, _):
                    state.persisted = values
                    section.setLoadedValues(values)
                    return [error]
                case .corrupt(var error, let identity, _):
                    state.confirmedCorruption = identity
                    error.keepsLastGoodValues = false
                    return [error]
                }
            } catch {
                return [error]
            }
        }
        // A file that cannot be read, or does not parse, cannot be used until it can.
        if let problem = problems.first(where: { $0.kind != .duplicateKey }) { _ = storage.markUnreachable(problem) }
        return problems
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
    /// cannot be encoded was reported when it was set, and writing again would not help. A file that
    /// does not parse is not tried again: the changes wait until a reload finds it parsing (the
    /// operator fixed it). A lock held by another process is not a failure: the write is tried again
    /// a little later; so is a broken file that may be another program's rewrite caught half-way
    /// (`suspicion` carries its looks).
    private func writeScheduled(_ storage: DefaultsStorage, suspicion: CorruptionSuspicion = CorruptionSuspicion()) {
        var suspicion = suspicion
        do throws(DefaultsError) {
            try writeDirtyKeys(storage, suspicion: &suspicion)
            lock.withLock { state.lockWaits = 0 }
        } catch {
            guard error.kind != .encodingFailed else { return }
            // Not tried again: the changes wait for the file to parse again (see `reload`).
            if error.kind == .corruptFile, !error.isSuspectedCorruption {
                storage.reportOnce(error)
                _ = storage.markUnreachable(error)
                return
            }
            let retryDelay = storage.withBackendSection { section -> DispatchTimeInterval? in
                if error.isLockContention {
                    state.lockWaits += 1
                } else if !error.isSuspectedCorruption {
                    state.failedWrites += 1
                }
                // A set made meanwhile has scheduled a write already; so has an earlier retry.
                guard section.scheduleWriteIfPending() else { return nil }
                if error.isSuspectedCorruption { return .milliseconds(Self.corruptionConfirmationDelay) }
                if error.isLockContention { return .milliseconds(Self.lockRetryDelay(afterWaits: state.lockWaits)) }
                let doublings = min(state.failedWrites - 1, 16)
                return .milliseconds(min(Self.firstRetryDelay << doublings, Self.maximumRetryDelay))
            }
            if !error.isLockContention, !error.isSuspectedCorruption { storage.reportOnce(error) }
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

    // MARK: Waited-for writes

    /// At exit: makes the pending changes durable. If that fails, reports the failure unless its
    /// cause was reported already (most often it was, or `flush()` threw it), and reports once that
    /// the changes still pending are lost, a cause of its own.
    func flushAtExit(_ storage: DefaultsStorage) {
        do {
            try flush(storage, timeout: nil, notice: nil)
        } catch {
            if error.kind != .encodingFailed { storage.reportOnce(error) }
            storage.reportLostChanges(because: error)
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

    /// `flush()` that replaces a file that does not parse, after copying it aside (see
    /// `DefaultsStore.replaceCorruptFile()`); returns the copy's path if it did. What it throws
    /// counts as reported, as for `flush()`.
    func replaceCorruptFile(
        _ storage: DefaultsStorage, timeout: Duration?, notice: (after: Duration, call: () -> Void)?
    ) throws(DefaultsError) -> String? {
        do {
            return try writeWaiting(storage, nil, replacingCorruptFile: true, timeout: timeout, notice: notice)
        } catch {
            storage.noteReported(error)
            throw error
        }
    }

    /// Runs `writeDirtyKeys(transaction)` on the queue until it neither finds the lock file held by
    /// another process nor a broken file that may be another program's rewrite caught half-way.
    /// Between tries it waits on the caller's thread (a growing delay of 1 to 50 ms for the lock,
    /// `corruptionConfirmationDelay` for a broken file), so that the other stores' writes go on
    /// meanwhile.
    ///
    /// - Parameter replacingCorruptFile: whether a file that does not parse is copied aside and
    ///   replaced (else the write throws `.corruptFile`).
    /// - Returns: where a broken file was copied before it was replaced.
    /// - Throws: `.writeFailed` with `errno == ETIMEDOUT` when `timeout` expires while another process
    ///   holds the lock; `.corruptFile` if the file does not parse (and is not to be replaced); any
    ///   write failure.
    @discardableResult
    func writeWaiting(
        _ storage: DefaultsStorage,
        _ transaction: Transaction?,
        replacingCorruptFile: Bool = false,
        timeout: Duration? = nil,
        notice: (after: Duration, call: () -> Void)? = nil
    ) throws(DefaultsError) -> String? {
        let clock = ContinuousClock()
        let start = clock.now
        var waits = 0
        var noticed = false
        var suspicion = CorruptionSuspicion()
        while true {
            do throws(DefaultsError) {
                return try writeOnQueue(storage, transaction, replacingCorruptFile: replacingCorruptFile, suspicion: &suspicion)
            } catch {
                // On the caller's thread, or, for a flush from a handler running there, on the writer.
                if error.isSuspectedCorruption {
                    usleep(UInt32(Self.corruptionConfirmationDelay * 1000))
                    continue
                }
                guard error.isLockContention else {
                    // A file that does not parse cannot be used until it does (see `reload`).
                    if error.kind == .corruptFile { _ = storage.markUnreachable(error) }
                    throw error
                }
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
