import Dispatch
import ObservableDefaults

/// This process's changes, sent from the storage's outbox in order, one transaction each (a batch's
/// keys in one), with the marker that makes each apply exactly once (see `EtcdBackend`).
extension EtcdBackend {
    /// What to do about a request that failed.
    enum FailureHandling {
        /// It may not have applied, or did and the reply was lost, or no member answered: send the
        /// same transaction again later (the marker makes that safe).
        case retry
        /// etcd refused it (permissions, an invalid request such as too many keys in one batch):
        /// sending it again would fail again.
        case refused
    }

    static func handling(of error: EtcdError) -> FailureHandling {
        switch error.kind {
        case .permissionDenied, .invalidEndpoint: return .refused
        // INVALID_ARGUMENT (3): too many operations, a duplicate key, a request too large.
        case .server where error.code == 3 || error.status.map { (400..<500).contains($0) } == true: return .refused
        default: return .retry
        }
    }

    // MARK: Draining the outbox

    /// Sends the outbox's writes, oldest first, until it is empty or the next one comes after
    /// `last` (then returns `nil`) or a write fails in a way that a later try may fix: that failure
    /// is reported once per outage, a retry is scheduled (unless `schedulesRetry` is `false`: a
    /// flush retries on its own), and the failure is returned (the write stays first). A write etcd
    /// refuses is reported, dropped, and the prefix read again so that the cache holds etcd's
    /// values; the next `flush()` throws it. Runs on the queue.
    func drain(_ storage: DefaultsStorage, through last: UInt64 = .max, schedulesRetry: Bool = true) -> DefaultsError? {
        while let write = storage.nextWrite(), write.sequence <= last {
            let (operations, unsent) = self.operations(of: write)
            guard !operations.isEmpty else {
                storage.finish(write, revision: nil, unsent: unsent)
                continue
            }
            do throws(EtcdError) {
                let revision = try send(operations, marker: Self.marker(of: write))
                noteRecovered(storage)
                storage.finish(write, revision: revision, unsent: unsent)
            } catch {
                let failure = DefaultsError(error, location: location, key: write.changes.count == 1 ? write.changes[0].key : nil)
                // Whether an attempt at this write may have applied: a give-up asks the marker.
                if error.kind == .replyLost { queueState.uncertainWrite = write.sequence }
                switch Self.handling(of: error) {
                case .retry:
                    reportOutage(failure, to: storage)
                    if schedulesRetry { scheduleRetry(storage) }
                    return failure
                case .refused:
                    // Dropped before the handlers hear of it: one that flushes must not send it again.
                    storage.finish(write, revision: nil, unsent: unsent)
                    lock.withLock { state.refusal = state.refusal ?? failure }
                    storage.report(failure)
                    reload(storage, rewatch: false)
                }
            }
        }
        return nil
    }

    /// The operations of `write`, and its keys whose value cannot be written as JSON (reported when
    /// they were set; they stay pending, and `flush()` names them).
    func operations(of write: PendingWrite) -> (operations: [EtcdOperation], unsent: Set<String>) {
        var operations: [EtcdOperation] = []
        var unsent: Set<String> = []
        for change in write.changes {
            if let entry = change.entry {
                guard let json = DefaultsStorage.json(of: entry) else {
                    unsent.insert(change.key)
                    continue
                }
                operations.append(.put(key: etcdKey(change.key), value: Array(json.compactText.utf8)))
            } else {
                operations.append(.delete(key: etcdKey(change.key)))
            }
        }
        return (operations, unsent)
    }

    /// Sends the outbox again after a delay that doubles with each failure in a row. Weak: retries
    /// against a cluster that stays down must not keep a storage alive.
    private func scheduleRetry(_ storage: DefaultsStorage) {
        let failures = lock.withLock {
            state.failedSends += 1
            return state.failedSends
        }
        let delay = min(Self.firstRetryDelay * (1 << min(failures - 1, 16)), Self.maximumRetryDelay)
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay / .nanoseconds(1)))) { [weak storage, self] in
            if let storage { _ = drain(storage) }
        }
    }

    /// Sends `operations` as one transaction with the marker put to `marker`, compared on the
    /// marker's last revision; returns the revision at which they applied, by this call or an
    /// earlier one whose reply was lost. Runs on the queue.
    ///
    /// - Throws: the client's error: nothing is known to have applied (a retry with the same `marker`
    ///   is safe).
    func send(_ operations: [EtcdOperation], marker: [UInt8]) throws(EtcdError) -> Int64 {
        while true {
            try claimMarker()
            let result = try client.transaction(
                compare: [.modRevision(key: markerKey, equals: queueState.markerRevision)],
                success: operations + [.put(key: markerKey, value: marker)],
                failure: [.range(key: markerKey)]
            )
            if result.succeeded {
                queueState.markerRevision = result.revision
                return result.revision
            }
            if let revision = appliedEarlier(result.ranges.last?.first, marker: marker) { return revision }
        }
    }

    /// Puts the marker (if this back end has none: before its first write, or its first since
    /// `flushAtExit` removed it), so that no write compares the marker's mod revision with 0. "Absent"
    /// comes back once the marker is removed, and a try at a write still on its way then (in the
    /// socket buffer of a frozen member, while a resend applied or a fence settled it) would pass
    /// that comparison and apply again, or after being reported as failed. A revision never comes
    /// back. A try at this claim that arrives late can only put the marker again. Runs on the queue.
    func claimMarker() throws(EtcdError) {
        while queueState.markerRevision == 0 {
            let result = try client.transaction(
                compare: [.modRevision(key: markerKey, equals: 0)],
                success: [.put(key: markerKey, value: Array("c".utf8))],
                failure: [.range(key: markerKey)]
            )
            // Not absent: an earlier try at the claim applied, its reply lost.
            queueState.markerRevision = result.succeeded ? result.revision : result.ranges.last?.first?.modRevision ?? 0
        }
    }

    /// The marker value of an outbox write.
    static func marker(of write: PendingWrite) -> [UInt8] {
        Array("o\(write.sequence)".utf8)
    }

    /// After a transaction whose marker comparison failed: the revision at which this marker value
    /// was written (an earlier attempt applied, its reply lost), or `nil` (the marker was changed by
    /// something else: the next attempt compares with its current revision). Runs on the queue.
    func appliedEarlier(_ current: EtcdKeyValue?, marker: [UInt8]) -> Int64? {
        queueState.markerRevision = current?.modRevision ?? 0
        return current?.value == marker ? current!.modRevision : nil
    }

    // MARK: Flushing

    /// Sends everything queued so far and returns once etcd acknowledged it, trying again (with a
    /// growing delay) for up to the store's timeout; then gives the changes not acknowledged up for
    /// good (see `giveUp`). `timeout` and `notice` (another process holding a file's lock) do not
    /// apply.
    ///
    /// - Throws: the failure that made it give up (those changes are dropped, and never sent
    ///   again), the first refusal since the last flush (that change was dropped, whichever send met
    ///   it), or `.encodingFailed` naming a key whose value cannot be written as JSON.
    func flush(_ storage: DefaultsStorage, timeout: Duration?, notice: (after: Duration, call: () -> Void)?) throws(DefaultsError) {
        let failure = isOnQueue ? flushOnQueue(storage) : queue.sync { flushOnQueue(storage) }
        if let failure { throw failure }
        let refusal = lock.withLock {
            defer { state.refusal = nil }
            return state.refusal
        }
        if let refusal { throw refusal }
        if let (key, count) = storage.unencodablePendingKeys() {
            let others = count > 1 ? " (and \(count - 1) other key\(count > 2 ? "s" : ""))" : ""
            throw DefaultsError(
                .encodingFailed, location: location, key: key,
                reason: "its value cannot be written as JSON; it stays in memory only until it is replaced\(others)"
            )
        }
    }

    /// At exit: sends what is queued as `flush()` does, reports the changes it gave up (a loss of
    /// its own, whether or not the outage was reported), and removes the marker. Refusals and values
    /// that cannot be encoded were reported when they happened.
    func flushAtExit(_ storage: DefaultsStorage) {
        let run = { [self] in
            if let failure = flushOnQueue(storage) { storage.report(failure) }
            if queueState.markerRevision != 0, (try? client.delete(key: markerKey)) != nil { queueState.markerRevision = 0 }
        }
        if isOnQueue { run() } else { queue.sync(execute: run) }
    }
}
