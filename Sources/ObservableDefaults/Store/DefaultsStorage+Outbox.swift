/// A change of this process waiting to be sent, for a back end that sends each change on its own,
/// in order (etcd): one `set` or `removeValue` (one key), or one `batch` or `reset()` (its keys, sent
/// as one transaction).
package struct PendingWrite: Sendable {
    /// One key's change: its entry (`nil`: removed) and the key's version when it was made, so that a
    /// key changed again since stays dirty when this one is acknowledged.
    package struct Change: Sendable {
        package let key: String
        package let entry: DefaultsStorage.Entry?
        package let version: UInt64
    }

    /// The write's place in the outbox (increasing).
    package let sequence: UInt64
    package let changes: [Change]
}

/// The changes queued for the back end, oldest first: a queue with a moving head, so that taking
/// the head is O(1) however many sets are waiting.
struct Outbox {
    private var writes: [PendingWrite] = []
    private var head = 0
    private var nextSequence: UInt64 = 1

    /// The sequence of the last write queued (0: none yet).
    var lastSequence: UInt64 { nextSequence - 1 }

    var first: PendingWrite? { head < writes.count ? writes[head] : nil }

    mutating func append(_ changes: [PendingWrite.Change]) {
        writes.append(PendingWrite(sequence: nextSequence, changes: changes))
        nextSequence += 1
    }

    mutating func removeFirst() {
        head += 1
        if head == writes.count {
            writes.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= writes.count {
            writes.removeFirst(head)
            head = 0
        }
    }
}

extension DefaultsStorage {
    /// Makes this storage queue every change in its outbox (see `PendingWrite`). Called by the back
    /// end before the storage is shared.
    package func keepOutbox() {
        lock.withLock { state.keepsOutbox = true }
    }

    /// Queues a set of `key` in the outbox. Out of line: the file back end's set path only tests
    /// the flag. Called with the lock held.
    @inline(never)
    func queueInOutbox(_ key: String, _ entry: Entry?) {
        queueInOutbox([PendingWrite.Change(key: key, entry: entry, version: state.version)])
    }

    /// Queues one change of several keys (a batch) in the outbox; the keys' values that could not be
    /// read are replaced. Called with the lock held.
    func queueInOutbox(_ changes: [PendingWrite.Change]) {
        if !state.revisions.unreadable.isEmpty {
            for change in changes { forgetUnreadable(change.key) }
        }
        state.outbox.append(changes)
    }

    /// The oldest change not yet acknowledged, which stays first until `finish(_:revision:unsent:)`.
    /// When there is none, the back end has taken everything: a later change schedules a new write
    /// (`isWriteScheduled` is cleared in the same locked step).
    package func nextWrite() -> PendingWrite? {
        lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            guard let write = state.outbox.first else {
                state.isWriteScheduled = false
                return nil
            }
            return write
        }
    }

    /// The sequence of the last change queued: a flush waits until it is finished.
    package var lastQueuedSequence: UInt64 {
        lock.withLock { state.outbox.lastSequence }
    }

    /// The JSON of `entry` (its stored JSON, or its typed value encoded), or `nil` if it cannot be
    /// encoded (NaN or infinity inside it: reported when it was set).
    package static func json(of entry: Entry) -> JSONValue? {
        if let json = entry.json { return json }
        return try? JSONValue(encoding: entry.typed!)
    }

    /// The first key (in name order) whose value this process changed and cannot write as JSON, and
    /// how many such keys there are; `flush()` names it.
    package func unencodablePendingKeys() -> (first: String, count: Int)? {
        lock.withLock {
            let keys = state.unencodableKeys.filter { state.dirty[$0] != nil }
            return keys.min().map { ($0, keys.count) }
        }
    }
}
