/// One key of etcd with its value and revisions, as a range read or a watch event returns it.
///
/// Keys and values are bytes: etcd does not interpret them (the JSON gateway carries them as base64).
package struct EtcdKeyValue: Sendable, Hashable {
    /// The key.
    package var key: [UInt8]
    /// The value (empty for an empty value).
    package var value: [UInt8]
    /// The revision of the put that created the key (after its last deletion).
    package var createRevision: Int64
    /// The revision of the last put of the key.
    package var modRevision: Int64
    /// How many times the key was put since it was created (1 after the first put).
    package var version: Int64

    package init(key: [UInt8], value: [UInt8], createRevision: Int64, modRevision: Int64, version: Int64) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
        self.modRevision = modRevision
        self.version = version
    }
}

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
    /// the watch keeps trying (with back-off, on every endpoint) until it is cancelled.
    case disconnected(EtcdError)
    /// The watch is streaming again after a `disconnected`, resumed from the last delivered revision + 1:
    /// no event was lost or is repeated.
    case reconnected
}

/// Key arithmetic for ranges.
package enum EtcdKeys {
    /// The `range_end` that selects every key starting with `prefix`: the prefix with its trailing
    /// 0xFF bytes removed and its last byte then incremented. A prefix of only 0xFF bytes (or an empty
    /// one) has no such end: the result is `[0]`, which etcd reads as "every key from `key` on".
    ///
    /// - Complexity: O(n) in the prefix's length.
    package static func rangeEnd(forPrefix prefix: [UInt8]) -> [UInt8] {
        var end = prefix
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return [0]
    }
}
