import Dispatch
import KeyValueObserving

/// Other processes' writes: the file read again in full after the watcher's event, diffed per key
/// against what this process last saw there, and each changed key reported with old and new values.
extension DefaultsStorage {
    /// Reloads the file soon, on the queue (called by the file watcher).
    func scheduleReload() {
        let needed = lock.withLock {
            defer { state.isReloadScheduled = true }
            return !state.isReloadScheduled
        }
        guard needed else { return }
        queue.async { [self] in reload() }
    }

    /// Reads the whole file, diffs it against memory and reports each key another process changed,
    /// with old and new values. Keys this process changed and has not written yet keep this
    /// process's value (its next write wins). Runs on the queue.
    func reload() {
        lock.withLock { state.isReloadScheduled = false }
        watchTarget()
        let contents: DefaultsFile.Contents
        do {
            contents = try file.read()
        } catch {
            report(error)
            return
        }
        let fileValues: [String: JSONValue]
        switch contents {
        case .missing:
            fileValues = [:]
        case .values(let values, _):
            fileValues = values
        case .duplicateKeys(let values, let identity, let error, _):
            fileValues = values
            let isNew = lock.withLock {
                defer { state.reportedCorruption = identity }
                return state.reportedCorruption != identity
            }
            if isNew { report(error) }
        case .corrupt(let error, let identity, _):
            // A program that rewrites the file in place (truncate, then write) can be caught half-way
            // by a reload that an earlier event started: look again shortly before calling it broken.
            if queueState.suspectedCorruption != identity {
                queueState.suspectedCorruption = identity
                queue.asyncAfter(deadline: .now() + .milliseconds(Self.corruptionConfirmationDelay)) { [self] in reload() }
                return
            }
            let isNew = lock.withLock {
                defer { state.reportedCorruption = identity }
                return state.reportedCorruption != identity
            }
            if isNew { report(error) }
            return
        }
        queueState.suspectedCorruption = nil
        let records = lock.withLock {
            let records = applyForeign(fileValues)
            state.persisted = fileValues
            return records
        }
        deliver(records)
    }

    /// Applies the keys whose value in the file differs from the one this process last saw there,
    /// except the keys this process changed since; returns the changes with their versions and
    /// observers, prior notifications first for the observers that asked for them, and the
    /// store-wide notification last. Called with the lock held.
    func applyForeign(_ fileValues: [String: JSONValue]) -> [Delivery] {
        var records: [Delivery] = []
        var priors: [Delivery] = []
        var changed: Set<String> = []
        for key in Set(fileValues.keys).union(state.persisted.keys) where fileValues[key] != state.persisted[key] {
            guard state.dirty[key] == nil else { continue }
            let old = state.values[key]
            let new = fileValues[key].map { Entry(typed: nil, json: $0) }
            state.values[key] = new
            state.version &+= 1
            state.keyVersions[key] = state.version
            changed.insert(key)
            let observers = (state.observers[key] ?? []) + state.anyKeyObservers
            if state.priorObserverCount > 0 {
                let wantingPrior = observers.filter(\.wantsPrior)
                if !wantingPrior.isEmpty {
                    let prior = Record(key: key, old: old, new: nil, isPrior: true, origin: .anotherProcess)
                    priors.append(.key(KeyDelivery(record: prior, version: state.version, observers: wantingPrior)))
                }
            }
            guard !observers.isEmpty else { continue }
            let record = Record(key: key, old: old, new: new, isPrior: false, origin: .anotherProcess)
            records.append(.key(KeyDelivery(record: record, version: state.version, observers: observers)))
        }
        let change = changeDelivery(keys: changed, origin: .anotherProcess).map { [Delivery.change($0)] } ?? []
        return priors + records + change
    }
}
