import Dispatch
import ObservableDefaults

/// A flush (or an update) that gives up does so for good: a change it reports as failed is never
/// applied later. Every write is a transaction compared on the marker's mod revision (see
/// `EtcdBackend`), so a *fence*, a transaction that moves the marker compared on that same
/// revision, settles an attempt whose reply was lost: if the attempt applied first, the fence's
/// comparison fails and its failure branch reads the attempt's marker value; if not, the fence
/// applies, and the attempt's comparison fails whenever it reaches etcd, so it never applies.
extension EtcdBackend {
    /// What the marker says about a write whose reply was lost.
    enum Resolution {
        /// It applied, at this revision.
        case applied(Int64)
        /// It did not, and never will: the fence applied first.
        case notApplied
        /// No member answered the fence in time (the client's error).
        case unknown(EtcdError)
    }

    /// Fences the marker unless the write whose marker value is `marker` applied, trying again
    /// (growing delay) for up to the store's timeout, and at least twice: a member that swallowed
    /// the write may swallow the first fence too, and one request may take the whole timeout. Runs
    /// on the queue.
    func resolve(marker: [UInt8]) -> Resolution {
        queueState.fences += 1
        let fence = Array("x\(queueState.fences)".utf8)
        let deadline = ContinuousClock.now + timeout
        var delay = Self.firstRetryDelay
        var attempts = 0
        while true {
            attempts += 1
            do throws(EtcdError) {
                let result = try client.transaction(
                    compare: [.modRevision(key: markerKey, equals: queueState.markerRevision)],
                    success: [.put(key: markerKey, value: fence)],
                    failure: [.range(key: markerKey)]
                )
                if result.succeeded {
                    queueState.markerRevision = result.revision
                    return .notApplied
                }
                if let revision = appliedEarlier(result.ranges.last?.first, marker: marker) { return .applied(revision) }
                // The marker moved otherwise (this fence applied and its reply was lost): fence again
                // on its current revision.
            } catch {
                guard Self.handling(of: error) == .retry, attempts < 2 || ContinuousClock.now + delay < deadline else {
                    return .unknown(error)
                }
                Self.pause(delay)
                delay = min(delay * 2, Self.maximumRetryDelay)
            }
        }
    }

    /// `flush()` on the queue: sends the writes queued now, trying again (growing delay) while they
    /// make progress, and gives them up once none was acknowledged for the store's timeout. Before
    /// giving up, a first write whose reply was lost is settled (see `resolve`): if it applied, that
    /// is progress; if not (and for good), etcd answered, and it is sent once more with the timeout
    /// again (once per write, so that a member that always loses replies cannot hold the flush).
    /// Returns the failure to throw, or `nil`.
    func flushOnQueue(_ storage: DefaultsStorage) -> DefaultsError? {
        let last = storage.lastQueuedSequence
        var deadline = ContinuousClock.now + timeout
        var delay = Self.firstRetryDelay
        var first = storage.nextWrite()?.sequence
        var resent: UInt64?
        // Writes queued meanwhile are sent in the background, as usual.
        defer { if storage.lastQueuedSequence > last { queue.async { [self] in _ = drain(storage) } } }
        while true {
            guard let failure = drain(storage, through: last, schedulesRetry: false) else { return nil }
            var resolution: Resolution?
            if storage.nextWrite()?.sequence == first, ContinuousClock.now + delay >= deadline {
                resolution = settleFirst(storage, through: last)
                if case .notApplied? = resolution, resent != first {
                    resent = first
                    (deadline, delay) = (ContinuousClock.now + timeout, Self.firstRetryDelay)
                    continue
                }
            }
            let stalled = storage.nextWrite()?.sequence
            if stalled != first {
                // Some writes were acknowledged: the timeout bounds a stall, not the whole flush.
                (first, deadline, delay) = (stalled, ContinuousClock.now + timeout, Self.firstRetryDelay)
                continue
            }
            guard ContinuousClock.now + delay < deadline else {
                return giveUp(storage, through: last, after: failure, resolution: resolution)
            }
            Self.pause(delay)
            delay = min(delay * 2, Self.maximumRetryDelay)
        }
    }

    /// Settles the first write queued up to `last` if an attempt at it got no reply: fences the
    /// marker, and finishes the write if it applied. Returns the resolution (`nil`: no attempt's
    /// reply was lost, so it did not apply). Runs on the queue.
    private func settleFirst(_ storage: DefaultsStorage, through last: UInt64) -> Resolution? {
        guard let first = storage.nextWrite(), first.sequence <= last, queueState.uncertainWrite == first.sequence else { return nil }
        let resolution = resolve(marker: Self.marker(of: first))
        if case .applied(let revision) = resolution {
            noteRecovered(storage)
            storage.finish(first, revision: revision, unsent: operations(of: first).unsent)
        }
        return resolution
    }

    /// Gives the writes queued up to `last` up for good, after `failure` (and the `resolution` of
    /// the first one, if its reply was lost: it did not apply, or whether it did is unknown). They
    /// are dropped: their keys' values come back from etcd with the next read of the prefix,
    /// scheduled now. Returns the error to throw, naming the keys given up. Runs on the queue.
    private func giveUp(_ storage: DefaultsStorage, through last: UInt64, after failure: DefaultsError, resolution: Resolution?)
        -> DefaultsError
    {
        var dropped: Set<String> = []
        while let write = storage.nextWrite(), write.sequence <= last {
            dropped.formUnion(write.changes.map(\.key))
            storage.finish(write, revision: nil, unsent: operations(of: write).unsent)
        }
        queue.async { [weak self, weak storage] in
            if let self, let storage { self.reload(storage, rewatch: false) }
        }
        let keys = dropped.sorted()
        let named = keys.count == 1 ? "key '\(keys[0])'" : "keys " + keys.map { "'\($0)'" }.joined(separator: ", ")
        let givenUp = "not written (\(named)): given up after \(timeout) without an answer, it will not be sent again"
        let reason =
            switch resolution {
            case .notApplied?:
                "a change was sent and its reply lost; the store's marker key shows that it did not apply: \(givenUp)"
            case .unknown(let error)?:
                "a change was sent and its reply lost, and no member answered since (\(error.reason)), so whether it applied is unknown: \(givenUp)"
            case nil, .applied?:
                "\(failure.reason); \(givenUp)"
            }
        return DefaultsError(failure.kind, location: location, key: keys.count == 1 ? keys[0] : nil, reason: reason)
    }
}
