import KeyValueObserving

extension DefaultsStore {
    // MARK: Atomic updates

    /// Changes the value of `key` atomically: `body` gets the freshest value and the value it leaves
    /// is written before any other update of this key, in this process or another one sharing the
    /// file, reads it. This is how to count, append or toggle safely: `store[key] += 1` from two
    /// threads or two processes can lose an increment; `update` cannot.
    ///
    /// ```swift
    /// let hits = DefaultsKey("hits", default: 0)
    /// let total = try store.update(hits) { value in
    ///     value += 1
    ///     return value
    /// }
    /// ```
    ///
    /// The update holds the file's lock (the lock file every writer takes), reads the file again,
    /// runs `body` on the key's value (this process's pending change if there is one, else the
    /// file's; the key's default if it is absent), and writes the result together with this
    /// process's other pending changes in one durable write (temporary file, fsync, rename, fsync of
    /// the directory). It returns once that write is durable. The observers of `key` are then told,
    /// as for a `set`, on this thread (changes another process made meanwhile are reported as theirs
    /// first). A `set` of the same key from another thread while the update runs is ordered after
    /// it: its value wins.
    ///
    /// On etcd, the update is a transaction that applies only if the key's mod revision is still the
    /// one `body` read; when another writer got there first, `body` runs again on that writer's value
    /// (see the UsingEtcd article of `ObservableDefaultsEtcd`). It throws `.unreachable` when no
    /// member answers within the store's timeout.
    ///
    /// `body` must not use the store (or any store on the same file): it runs holding the file's
    /// lock, and may run more than once (other storage back ends retry it on a conflict). Using the
    /// store from it traps with a message, instead of deadlocking.
    ///
    /// - Parameters:
    ///   - key: the key to change.
    ///   - body: changes the value in place; what it returns, `update` returns.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` threw (nothing is written); or `DefaultsError`: `.typeMismatch` if the
    ///   file holds a value of `key` that does not decode as `Value` (nothing is written, so that
    ///   value is not lost), `.encodingFailed` if the new value cannot be encoded (NaN or infinity
    ///   inside it; nothing is written), `.corruptFile` if the file does not parse (`body` does not
    ///   run; nothing is written), `.writeFailed` if the file cannot be locked or written
    ///   (nothing changes, in memory or in the file).
    /// - Complexity: one durable write of the whole file per call: about a millisecond on a local
    ///   disk (see the README's figures), far more than a `set`. To count many events, add them up
    ///   in memory and apply the sum with one `update`.
    public func update<Value, Result>(_ key: DefaultsKey<Value>, _ body: (inout Value) throws -> Result) throws -> Result {
        let storage = self.storage
        var outcome: Swift.Result<Result, any Error>?
        try withoutActuallyEscaping(body) { body in
            try storage.update(key.name) { entry in
                var value: Value
                do {
                    value = try storage.decodedForUpdate(entry, key: key)
                } catch {
                    outcome = .failure(error)
                    return nil
                }
                do {
                    let result = try body(&value)
                    let (entry, failure) = storage.encodedEntry(for: value, key: key.name)
                    if let failure {
                        outcome = .failure(failure)
                        return nil
                    }
                    outcome = .success(result)
                    return .some(entry)
                } catch {
                    outcome = .failure(error)
                    return nil
                }
            }
        }
        return try outcome!.get()
    }

    // MARK: Batches

    /// Sets several keys as one change: other processes see all of them or none (one write, one
    /// rename), and observers in this process are told once every change is in place.
    ///
    /// ```swift
    /// store.batch { batch in
    ///     batch[.host] = "db2.example.com"
    ///     batch[.port] = 5433
    /// }   // observers of .host already read the new .port; the file gets both in one write
    /// ```
    ///
    /// The changes are made through `batch` (reads through it see them) and applied when `body`
    /// returns, in one step: then `.prior` observers, each changed key's observers (old and new
    /// values, once per key) and the store-wide observers (`observeChanges`, once) are called on
    /// this thread. The file is written shortly after, off this thread, as for `set`; `flush()`
    /// waits for it.
    ///
    /// A batch is not isolated: other threads see the store as it is until the batch is applied, and
    /// a `set` from another thread (or through the store rather than `batch`) while `body` runs is
    /// not part of the batch. If `body` throws, nothing is applied.
    ///
    /// - Parameter body: makes the changes through the batch it is given.
    /// - Returns: what `body` returned.
    /// - Complexity: O(n) in the keys changed, plus one write of the file.
    public func batch<Result>(_ body: (DefaultsBatch) throws -> Result) rethrows -> Result {
        let batch = DefaultsBatch(store: self)
        let result = try body(batch)
        storage.commit(batch.order.map { ($0, batch.changes[$0]!.entry, batch.changes[$0]!.encodingFailure) })
        return result
    }

    // MARK: Snapshots and store-wide observation

    /// Every value of the store at one instant, as a value that does not change.
    ///
    /// ```swift
    /// let settings = store.snapshot()
    /// connect(host: settings[.host], port: settings[.port])   // never a new host with an old port
    /// ```
    ///
    /// - Complexity: O(1): the snapshot shares the store's values until either changes.
    public func snapshot() -> DefaultsSnapshot {
        layerStack?.snapshot() ?? storage.snapshot()
    }

    /// Observes every change of the store: one notification per change made as one (a `set`, an
    /// `update`, a `batch`, a `reset()`, a reload of the file after another process's write, however
    /// many keys it changed), naming every key it changed, where it came from, and the store's
    /// values right after it. Keep the token: when it is deallocated or invalidated, the observation
    /// ends.
    ///
    /// ```swift
    /// let token = store.observeChanges { _, change in
    ///     if change.keys.contains(DefaultsKey<String>.host.name) { reconnect(change.values) }
    /// }
    /// ```
    ///
    /// The notification comes after the per-key notifications of the same change, on the same
    /// thread: the changing thread for this process's changes, the store's background queue for
    /// another process's. The handler may read and write the store and add or remove observers.
    public func observeChanges(_ handler: @escaping @Sendable (DefaultsStore, DefaultsStoreChange) -> Void) -> KeyValueObservation {
        weak let store = self
        if let layerStack {
            layerStack.forwardStoreChanges()
            return layerStack.observe(\._storeChange, options: [.new]) { _, change in
                guard let store, let record = change.newValue else { return }
                handler(
                    store, DefaultsStoreChange(keys: record.keys, origin: record.origin, revision: record.revision, values: record.values))
            }
        }
        return storage.observe(\._storeChange, options: [.new]) { storage, change in
            guard let store, let record = change.newValue else { return }
            var values = DefaultsSnapshot(entries: record.values, registered: storage.registeredValues(), storage: storage)
            values.generation.storeChanges = record.sequence
            handler(store, DefaultsStoreChange(keys: record.keys, origin: record.origin, revision: record.revision, values: values))
        }
    }
}

extension DefaultsStorage {
    /// The value of `entry` as a `Value` for `update`: the key's default if the key is absent.
    ///
    /// - Throws: `.typeMismatch` if the entry does not decode as `Value`.
    func decodedForUpdate<Value>(_ entry: Entry?, key: DefaultsKey<Value>) throws(DefaultsError) -> Value {
        guard let entry else { return key.defaultValue }
        if let typed = entry.typed.flatMap({ $0 as? Value }) { return typed }
        do {
            let json = try entry.json ?? JSONValue(encoding: entry.typed!)
            return try json.decode(as: Value.self)
        } catch {
            throw DefaultsError(
                .typeMismatch, location: backend.location, key: key.name, found: entry.json?.compactText,
                reason: "which does not decode as \(Value.self)\(Self.detail(of: error, key: key.name)); update leaves it as it is"
            )
        }
    }
}
