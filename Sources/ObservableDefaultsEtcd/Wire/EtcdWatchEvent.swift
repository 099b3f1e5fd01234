/// One change a watch reports.
package enum EtcdWatchEvent: Sendable, Hashable {
    /// The key was put (created or changed); the key-value carries the new value and its `modRevision`.
    case put(EtcdKeyValue)
    /// The key was deleted at `modRevision` (the revision of the deletion).
    case delete(key: [UInt8], modRevision: Int64)

    /// The key of the event.
    package var key: [UInt8] {
        switch self {
        case .put(let keyValue): keyValue.key
        case .delete(let key, _): key
        }
    }

    /// The revision of the change.
    package var modRevision: Int64 {
        switch self {
        case .put(let keyValue): keyValue.modRevision
        case .delete(_, let revision): revision
        }
    }
}

/// What a watch tells its handler (see `EtcdClient.watch(prefix:startRevision:handler:)`).
package enum EtcdWatchNotice: Sendable {
    /// Events of one or more revisions, in revision order. All events of one revision (one
    /// transaction) are in one notice, never split across notices. `revision` is the header revision
    /// of the reply that carried them (at least the last event's revision).
    case events([EtcdWatchEvent], revision: Int64)
    /// The requested start revision was compacted; the watch stopped and calls the handler no more.
    /// The owner reads the prefix again (a range) and starts a new watch from that range's revision + 1.
    case compacted(compactRevision: Int64)
    /// The stream broke and the first reconnect attempt failed. Sent once per outage, not per retry;
    /// the watch keeps trying (with back-off, on every endpoint) until it is cancelled. With an
    /// error of kind `.replyTooLarge` (a line of the stream exceeded
    /// `EtcdClientOptions.maximumReplySize`) the watch stopped instead and calls the handler no more.
    case disconnected(EtcdError)
    /// The watch is streaming again after a `disconnected`, resumed from the last delivered revision + 1:
    /// no event was lost or is repeated.
    case reconnected
}
