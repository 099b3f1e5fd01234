import Dispatch
import KeyValueObserving

/// Other processes' writes: the file read again in full after the watcher's event, diffed per key
/// against what this process last saw there, and each changed key reported with old and new values.
extension FileBackend {
    /// Reloads the file soon, on the queue (called by the file watcher).
    func scheduleReload(_ storage: DefaultsStorage) {
        let needed = lock.withLock {
            defer { state.isReloadScheduled = true }
            return !state.isReloadScheduled
        }
        guard needed else { return }
        queue.async { [self] in reload(storage) }
    }

    /// Reads the whole file, diffs it against memory and reports each key another process changed,
    /// with old and new values. Keys this process changed and has not written yet keep this
    /// process's value (its next write wins). A file that parses again after a write found it broken
    /// gets that write now: the pending changes merged over its keys. Runs on the queue.
    func reload(_ storage: DefaultsStorage) {
        lock.withLock { state.isReloadScheduled = false }
        watchTarget(storage)
        let contents: DefaultsFile.Contents
        do {
            contents = try file.read()
        } catch {
            storage.reportOnce(error)
            return
        }
        let fileValues: [String: JSONValue]
        var solved = Self.causesGoneAfterRead
        switch contents {
        case .missing:
            fileValues = [:]
        case .values(let values, _):
            fileValues = values
        case .duplicateKeys(let values, _, let error, _):
            fileValues = values
            solved.remove(.duplicateKey)
            storage.reportOnce(error)
        case .corrupt(var error, let identity, _):
            // A program that rewrites the file in place (truncate, then write) can be caught half-way
            // by a reload that an earlier event started: look again shortly before calling it broken.
            if queueState.suspectedCorruption != identity {
                queueState.suspectedCorruption = identity
                queue.asyncAfter(deadline: .now() + .milliseconds(Self.corruptionConfirmationDelay)) { [self] in reload(storage) }
                return
            }
            error.keepsLastGoodValues = lock.withLock {
                state.confirmedCorruption = identity
                return !state.persisted.isEmpty
            }
            storage.reportOnce(error)
            return
        }
        queueState.suspectedCorruption = nil
        let (records, writesNow) = lock.withLock {
            let records = applyForeign(fileValues, to: storage)
            state.persisted = fileValues
            state.confirmedCorruption = nil
            storage.forgetReportedCauses(of: solved)
            guard state.waitsForRepair else { return (records, false) }
            state.waitsForRepair = false
            guard !storage.state.dirty.isEmpty, !storage.state.isWriteScheduled else { return (records, false) }
            storage.state.isWriteScheduled = true
            return (records, true)
        }
        storage.deliver(records)
        if writesNow {
            // The write holds the storage until it runs.
            writeSoon(storage)
        } else if queueState.heldForRepair != nil, lock.withLock({ storage.state.dirty.isEmpty }) {
            queueState.heldForRepair = nil
        }
    }

    /// Applies the keys whose value in the file differs from the one this process last saw there,
    /// except the keys this process changed since; returns the changes with their versions and
    /// observers, prior notifications first for the observers that asked for them, and the
    /// store-wide notification last. Called with the lock held.
    func applyForeign(_ fileValues: [String: JSONValue], to storage: DefaultsStorage) -> [Delivery] {
        var changes: [(key: String, entry: Entry?)] = []
        for key in Set(fileValues.keys).union(state.persisted.keys) where fileValues[key] != state.persisted[key] {
            guard storage.state.dirty[key] == nil else { continue }
            changes.append((key, fileValues[key].map { Entry(typed: nil, json: $0) }))
        }
        return storage.applyExternal(changes, origin: .anotherProcess, revision: nil)
    }
}
