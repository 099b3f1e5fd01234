/// A condition of a transaction (`EtcdClient.transaction(compare:success:failure:)`).
package enum EtcdCompare: Sendable, Hashable {
    /// The key's mod revision equals `equals`; 0 means the key is absent.
    case modRevision(key: [UInt8], equals: Int64)
}

/// An operation of a transaction branch.
package enum EtcdOperation: Sendable, Hashable {
    /// Puts `value` at `key`.
    case put(key: [UInt8], value: [UInt8])
    /// Deletes `key` (nothing happens if it is absent).
    case delete(key: [UInt8])
    /// Reads `key`; its key-value (or none) is in `EtcdTransactionResult.ranges`.
    case range(key: [UInt8])
}

/// What a transaction did.
package struct EtcdTransactionResult: Sendable, Hashable {
    /// Whether every comparison held (so the success branch ran) or not (the failure branch ran).
    package var succeeded: Bool
    /// The store's revision after the transaction (its own if it wrote, the current one if not).
    package var revision: Int64
    /// For each `.range` operation of the branch that ran, in order, the key-values it read (empty
    /// when the key is absent).
    package var ranges: [[EtcdKeyValue]]

    package init(succeeded: Bool, revision: Int64, ranges: [[EtcdKeyValue]]) {
        self.succeeded = succeeded
        self.revision = revision
        self.ranges = ranges
    }
}
