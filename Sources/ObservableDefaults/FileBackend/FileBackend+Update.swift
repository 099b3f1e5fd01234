extension FileBackend {
    /// Runs `transform` on the freshest entry of `key` (this process's pending change, else the
    /// file's value read under the file lock) and writes its result with the pending changes, in one
    /// durable write; returns after it. The queue makes updates of this process one at a time, the
    /// file lock makes them one at a time with other processes' (waited for off the queue).
    ///
    /// - Parameter transform: returns the new entry (its JSON set; `nil` removes the key), or `nil` to
    ///   write nothing (it keeps its own reason). Runs once.
    /// - Throws: `.writeFailed` if the file cannot be locked or written (nothing is changed in memory).
    func update(_ storage: DefaultsStorage, key: String, _ transform: @escaping (Entry?) -> Entry??) throws(DefaultsError) {
        try update(storage, key: key, timeout: nil, notice: nil, transform)
    }

    /// `update(_:key:_:)`, giving up after `timeout` (`.writeFailed`, `ETIMEDOUT`) while another
    /// process holds the lock file, and calling `notice` once if that lasts `notice.after`.
    func update(
        _ storage: DefaultsStorage, key: String, timeout: Duration?, notice: (after: Duration, call: () -> Void)?,
        _ transform: @escaping (Entry?) -> Entry??
    ) throws(DefaultsError) {
        try writeWaiting(storage, Transaction(key: key, body: transform), timeout: timeout, notice: notice)
    }

    /// Runs a transaction's body on the freshest entry of its key: this process's pending change if
    /// there is one, else `base` (the file as just read, under the file lock). Keeps the key's version
    /// at that moment in `version`. Runs on the queue.
    func runTransaction(
        _ storage: DefaultsStorage, _ transaction: Transaction, base: [String: JSONValue], version: inout UInt64?
    ) -> Entry?? {
        let key = transaction.key
        let (isPending, memory, current) = storage.withBackendSection { section in
            (section.isPending(key), section.entry(key), section.version(of: key))
        }
        version = current
        if isPending { return storage.runUpdateBody(transaction.body, on: memory) }
        // The memory's entry when it holds the file's value: its decoded value is cached there.
        if let memory, let json = base[key], memory.json == json { return storage.runUpdateBody(transaction.body, on: memory) }
        return storage.runUpdateBody(transaction.body, on: base[key].map { Entry(typed: nil, json: $0) })
    }
}
