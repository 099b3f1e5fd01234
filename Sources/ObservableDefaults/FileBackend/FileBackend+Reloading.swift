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
            _ = storage.markUnreachable(error)
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
            _ = storage.markUnreachable(error)
            return
        }
        queueState.suspectedCorruption = nil
        // The file reads (again): the status says so, to its observers, before the changes below.
        storage.markConnected(revision: nil)
        // The observers hear of the changes before the write below is scheduled.
        let writesNow = storage.withBackendSection { section in
            applyForeign(fileValues, in: &section)
            state.persisted = fileValues
            state.confirmedCorruption = nil
            section.forgetReportedCauses(of: solved)
            guard state.waitsForRepair else { return false }
            state.waitsForRepair = false
            return section.scheduleWriteIfPending()
        }
        if writesNow {
            // The write holds the storage until it runs.
            writeSoon(storage)
        } else if queueState.heldForRepair != nil, !storage.withBackendSection({ $0.hasPendingChanges }) {
            queueState.heldForRepair = nil
        }
    }

    /// Applies the keys whose value in the file differs from the one this process last saw there
    /// (the section skips those this process changed since), as another process's changes. Called
    /// in a section of the storage.
    func applyForeign(_ fileValues: [String: JSONValue], in section: inout DefaultsStorage.BackendSection) {
        let changed = Set(fileValues.keys).union(state.persisted.keys).filter { fileValues[$0] != state.persisted[$0] }
        section.apply(changed.map { ($0, fileValues[$0]) }, origin: .anotherProcess, revision: nil)
    }
}
