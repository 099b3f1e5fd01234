import Dispatch
import ObservableDefaults

/// `update` on etcd: a transaction comparing the key's mod revision with the one its body read,
/// retried with the body run again on the fresh value when another writer got there first.
extension EtcdBackend {
    /// Sends the queued changes (so that the update comes after them), then runs `transform` on the
    /// key's cached value and sends the result as a transaction that applies only if the key's mod
    /// revision is still the one read; on a conflict the transaction's failure branch returns the
    /// key's current value, and `transform` runs again on it. A request that failed in a way that a
    /// retry may fix (no member answered, a reply lost) is sent again unchanged, with a growing delay,
    /// for up to `timeout`; the marker makes that safe (see `EtcdBackend`).
    ///
    /// - Throws: what `flush()` throws; a refusal (`.permissionDenied`, `.remoteFailed`); or
    ///   `.unreachable` if no member answered within `timeout` (if a reply was lost meanwhile, the
    ///   marker tells whether the update applied: if it did, this returns normally; if not, it never
    ///   will).
    func update(
        _ storage: DefaultsStorage, key: String, _ transform: @escaping (DefaultsStorage.Entry?) -> DefaultsStorage.Entry??
    ) throws(DefaultsError) {
        try flush(storage, timeout: nil, notice: nil)
        let run = { [self] () -> DefaultsError? in
            do throws(DefaultsError) {
                try updateOnQueue(storage, key: key, transform)
                return nil
            } catch {
                return error
            }
        }
        if let failure = isOnQueue ? run() : queue.sync(execute: run) { throw failure }
    }

    private func updateOnQueue(
        _ storage: DefaultsStorage, key: String, _ transform: (DefaultsStorage.Entry?) -> DefaultsStorage.Entry??
    ) throws(DefaultsError) {
        var (entry, revision) = storage.beginUpdate(key)
        var written: (entry: DefaultsStorage.Entry?, revision: Int64)?
        defer { storage.endUpdate(key, result: written) }
        queueState.updates += 1
        let marker = Array("u\(queueState.updates)".utf8)
        let etcdKey = etcdKey(key)
        while true {
            guard case .some(let new) = storage.runUpdateBody(transform, on: entry) else { return }
            do throws(EtcdError) {
                try claimMarker()
            } catch {
                throw DefaultsError(
                    DefaultsError(error, location: location, key: key).kind, location: location, key: key,
                    reason: "the store's marker key could not be put first (\(error.reason)): the update was not sent")
            }
            let operation: EtcdOperation
            if let new {
                guard let json = DefaultsStorage.json(of: new) else {
                    preconditionFailure("EtcdBackend.update: the body's entry for '\(key)' has no JSON")
                }
                operation = .put(key: etcdKey, value: Array(json.compactText.utf8))
            } else {
                operation = .delete(key: etcdKey)
            }
            let outcome = try transaction(
                storage,
                compare: [.modRevision(key: etcdKey, equals: revision), .modRevision(key: markerKey, equals: queueState.markerRevision)],
                success: [operation, .put(key: markerKey, value: marker)],
                failure: [.range(key: etcdKey), .range(key: markerKey)],
                key: key
            )
            guard case .answered(let result) = outcome else {
                if case .appliedEarlier(let applied) = outcome { written = (new, applied) }
                return
            }
            if result.succeeded {
                queueState.markerRevision = result.revision
                written = (new, result.revision)
                return
            }
            if let applied = appliedEarlier(result.ranges.last?.first, marker: marker) {
                written = (new, applied)
                return
            }
            // Another writer changed the key since it was read: run the body on its value.
            let current = result.ranges.first?.first
            revision = current?.modRevision ?? 0
            entry = nil
            if let current {
                guard let json = json(of: current.value, key: key, revision: current.modRevision, storage: storage) else {
                    // The error `json(of:)` noted, naming the key, the revision and the cause.
                    throw storage.unreadableValueError(forKey: key)
                        ?? DefaultsError(.corruptFile, location: location, key: key, reason: "not JSON (revision \(current.modRevision))")
                }
                entry = DefaultsStorage.Entry(typed: nil, json: json)
            }
        }
    }

    /// What became of an update's transaction.
    private enum Outcome {
        /// etcd answered it.
        case answered(EtcdTransactionResult)
        /// An attempt whose reply was lost applied, at this revision (the marker says so).
        case appliedEarlier(Int64)
    }

    /// Sends one transaction, sending it again unchanged (growing delay, for up to `timeout`) after a
    /// failure that a retry may fix. If it gives up after an attempt whose reply was lost, the marker
    /// is fenced (see `resolve`): either that attempt applied, or none ever will. Runs on the queue.
    private func transaction(
        _ storage: DefaultsStorage, compare: [EtcdCompare], success: [EtcdOperation], failure: [EtcdOperation], key: String
    ) throws(DefaultsError) -> Outcome {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var delay = Self.firstRetryDelay
        var mayHaveApplied = false
        while true {
            do throws(EtcdError) {
                let result = try client.transaction(compare: compare, success: success, failure: failure)
                noteRecovered(storage)
                return .answered(result)
            } catch {
                if error.kind == .replyLost { mayHaveApplied = true }
                guard Self.handling(of: error) == .retry, clock.now + delay < deadline else {
                    let failure = DefaultsError(error, location: location, key: key)
                    guard mayHaveApplied, case .put(_, let marker) = success.last else { throw failure }
                    switch resolve(marker: marker) {
                    case .applied(let revision):
                        noteRecovered(storage)
                        return .appliedEarlier(revision)
                    case .notApplied:
                        throw DefaultsError(
                            failure.kind, location: location, key: key,
                            reason:
                                "a reply was lost; the store's marker key shows that the update did not apply: given up after \(timeout), it will not be sent again"
                        )
                    case .unknown(let error):
                        throw DefaultsError(
                            failure.kind, location: location, key: key,
                            reason:
                                "a reply was lost, and no member answered since (\(error.reason)), so whether the update applied is unknown: given up after \(timeout), it will not be sent again"
                        )
                    }
                }
                Self.pause(delay)
                delay = min(delay * 2, Self.maximumRetryDelay)
            }
        }
    }
}
