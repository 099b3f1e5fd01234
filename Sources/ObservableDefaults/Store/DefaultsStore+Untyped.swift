import KeyValueObserving

/// Untyped access for the `kvo-defaults` tool, which does not know the keys' types: values as JSON.
extension DefaultsStore {
    /// Every key and its value as JSON.
    package func jsonValues() throws -> [String: JSONValue] {
        try storage.jsonValues()
    }

    /// The value of `key` as JSON, or `nil` if it is absent.
    ///
    /// - Throws: `DefaultsError` `.corruptFile` naming the key when the back end holds a value of it
    ///   that is not JSON (etcd: someone wrote it without this library).
    package func jsonValue(forKey key: String) throws -> JSONValue? {
        if let unreadable = storage.unreadableValueError(forKey: key) { throw unreadable }
        return try storage.jsonValues()[key]
    }

    /// Whether the back end holds a value of `key` that is not JSON (see `jsonValue(forKey:)`).
    package func hasUnreadableValue(forKey key: String) -> Bool {
        storage.unreadableValueError(forKey: key) != nil
    }

    /// Sets `key` to the JSON `value`.
    package func setJSONValue(_ value: JSONValue, forKey key: String) {
        storage.set(DefaultsStorage.Entry(typed: nil, json: value), for: key)
    }

    /// Sets several keys as one change (one write; `nil` removes the key).
    package func setJSONValues(_ values: [(key: String, value: JSONValue?)]) {
        storage.commit(values.map { ($0.key, $0.value.map { DefaultsStorage.Entry(typed: nil, json: $0) }, nil) })
    }

    /// `update` for the tool: `body` gets the freshest JSON of `key` (`nil`: absent) and returns the
    /// new one (`nil` removes the key); the result is durable when this returns.
    ///
    /// - Throws: what `body` threw (nothing is written), or `DefaultsError`.
    package func updateJSONValue(
        forKey key: String, timeout: Duration? = nil, notice: (after: Duration, call: () -> Void)? = nil,
        _ body: (JSONValue?) throws -> JSONValue?
    ) throws -> JSONValue? {
        var outcome: Result<JSONValue?, any Error>?
        try withoutActuallyEscaping(body) { body in
            try storage.update(key, timeout: timeout, notice: notice) { entry in
                do {
                    let json = try entry.map { try $0.json ?? JSONValue(encoding: $0.typed!) }
                    let new = try body(json)
                    outcome = .success(new)
                    return .some(new.map { DefaultsStorage.Entry(typed: nil, json: $0) })
                } catch {
                    outcome = .failure(error)
                    return nil
                }
            }
        }
        return try outcome!.get()
    }

    /// The number of times this process replaced the file (for tests; 0 for a store on etcd).
    package var fileWriteCount: Int {
        guard let backend = storage.fileBackend else { return 0 }
        return storage.lock.withLock { backend.state.fileWrites }
    }

    /// The batched writes that failed in a row (for tests; 0 for a store on etcd).
    package var failedWriteCount: Int {
        guard let backend = storage.fileBackend else { return 0 }
        return storage.lock.withLock { backend.state.failedWrites }
    }

    /// Removes `key`.
    package func removeValue(forKey key: String) {
        storage.set(nil, for: key)
    }

    /// Observes every key (or only `key`), with old and new values as JSON (`nil`: absent).
    package func observeJSON(
        key: String? = nil,
        handler: @escaping @Sendable (_ key: String, _ old: JSONValue?, _ new: JSONValue?, _ origin: DefaultsChangeOrigin) -> Void
    ) -> KeyValueObservation {
        @Sendable func json(_ entry: DefaultsStorage.Entry?) -> JSONValue? {
            guard let entry else { return nil }
            return entry.json ?? (try? JSONValue(encoding: entry.typed!))
        }
        let keyPath = key.map { DefaultsKeyNames.keyPath(at: DefaultsKeyNames.offset(of: $0)) } ?? \._anyKeyChange
        return storage.observe(keyPath, options: [.old, .new]) { storage, change in
            guard let old = change.oldValue, let new = change.newValue, storage.isCurrent(new) else { return }
            handler(new.name, json(old.entry), json(new.entry), new.origin)
        }
    }

    /// `flush()`, giving up after `timeout` (`.writeFailed`, `ETIMEDOUT`) while another process
    /// holds the lock file, and calling `notice` once if that lasts `notice.after`.
    package func flush(timeout: Duration?, notice: (after: Duration, call: () -> Void)?) throws(DefaultsError) {
        try storage.flush(timeout: timeout, notice: notice)
    }

    /// `replaceCorruptFile()`, with `timeout` and `notice` as for `flush(timeout:notice:)`.
    package func replaceCorruptFile(timeout: Duration?, notice: (after: Duration, call: () -> Void)?) throws(DefaultsError) -> String? {
        guard let backend = storage.fileBackend else {
            try storage.flush(timeout: timeout, notice: notice)
            return nil
        }
        return try backend.replaceCorruptFile(storage, timeout: timeout, notice: notice)
    }

    /// When this process's last write started replacing the file (`CLOCK_MONOTONIC` nanoseconds, just
    /// before the rename that lets other processes see it), for the benchmark's latency measurement.
    package func lastReplacementTime() -> UInt64? {
        guard let backend = storage.fileBackend else { return nil }
        return backend.isOnQueue ? backend.queueState.lastReplacement : backend.queue.sync { backend.queueState.lastReplacement }
    }
}
