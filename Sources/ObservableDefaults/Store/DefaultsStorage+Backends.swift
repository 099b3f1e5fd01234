import KeyValueObserving

/// What a back end may do to the storage it persists, in one locked step: read what is pending,
/// take it to write, mark it written, apply other writers' changes with their origin and revision.
/// A back end knows the storage through this section and the methods named in `DefaultsBackend`,
/// never through its fields.
extension DefaultsStorage {
    /// Runs `body` holding the storage's lock with a section through which it reads and changes the
    /// storage; then, with the lock released, tells the observers of the changes the section applied
    /// (on this thread, in the order applied), and returns what `body` returned.
    ///
    /// The lock is the one the back end was given at creation, so `body` may read and change the
    /// back end's own state guarded by it too: the storage's change and the back end's record of it
    /// are one step. `body` must not take the lock again (no other call on the storage, which would
    /// deadlock) and must not wait for another thread or process (the callers' sets wait for it).
    package func withBackendSection<Result>(_ body: (inout BackendSection) -> Result) -> Result {
        lock.lock()
        var section = BackendSection(self)
        let result = body(&section)
        let deliveries = section.deliveries
        lock.unlock()
        if !deliveries.isEmpty { deliver(deliveries) }
        return result
    }

    /// The storage as a back end sees it while `withBackendSection` holds its lock. Not copyable, and
    /// only ever lent to the section's body, so it cannot outlive the lock.
    package struct BackendSection: ~Copyable {
        // Invariant: a section exists only inside `withBackendSection`, with `storage.lock` held;
        // every access to `storage.state` below happens then.
        private let storage: DefaultsStorage
        /// What to tell observers once the lock is released.
        fileprivate var deliveries: [Delivery] = []

        fileprivate init(_ storage: DefaultsStorage) {
            self.storage = storage
        }

        // MARK: Reading

        /// The value of `key` in memory (`nil`: absent): this process's change if it made one, else
        /// the value last applied from the back end.
        package func entry(_ key: String) -> Entry? {
            storage.state.values[key]
        }

        /// The version of the last change of `key` applied here (a set, an update, another writer's
        /// change), or `nil` if none was: a change whose version is still the key's is its newest.
        package func version(of key: String) -> UInt64? {
            storage.state.keyVersions[key]
        }

        /// Whether this process changed `key` and the change is not written yet.
        package func isPending(_ key: String) -> Bool {
            storage.state.dirty[key] != nil
        }

        /// Whether this process has changes not written yet.
        package var hasPendingChanges: Bool {
            !storage.state.dirty.isEmpty
        }

        // MARK: Changes from elsewhere

        /// Sets the values first read from the back end, before any store uses the storage: no
        /// observer hears of them.
        package mutating func setLoadedValues(_ values: [String: JSONValue]) {
            storage.state.values = values.mapValues { Entry(typed: nil, json: $0) }
        }

        /// Applies changes made elsewhere (`nil`: removed), as one transaction with `origin` and
        /// `revision` (`nil` if the back end has none): each key's observers and the store-wide ones
        /// hear of it once the lock is released. A key this process changed and has not written yet
        /// keeps this process's value (its write is the newer one) and is skipped.
        package mutating func apply(_ changes: [(key: String, json: JSONValue?)], origin: DefaultsChangeOrigin, revision: Int64?) {
            var applied: [(key: String, entry: Entry?)] = []
            for (key, json) in changes where storage.state.dirty[key] == nil {
                applied.append((key, json.map { Entry(typed: nil, json: $0) }))
            }
            guard !applied.isEmpty else { return }
            deliveries += storage.applyExternal(applied, origin: origin, revision: revision)
        }

        /// The problems of `kinds` are over (a read or write succeeded): the next one is reported again.
        package mutating func forgetReportedCauses(of kinds: Set<DefaultsError.Kind>) {
            storage.forgetReportedCauses(of: kinds)
        }

        // MARK: This process's changes

        /// Takes every pending change to write it (each key once, with its entry and version); a
        /// change made after this schedules a new write (`writeSoon`). The changes stay pending
        /// until `markWritten`. Traps if called from an `update` body (the flush would deadlock).
        package mutating func takePendingChanges() -> [PendingWrite.Change] {
            if storage.state.updatingThread != nil { storage.checkNotInUpdateBody() }
            storage.state.isWriteScheduled = false
            let storage = storage
            return storage.state.dirty.map { key, version in
                PendingWrite.Change(key: key, entry: storage.state.values[key], version: version)
            }
        }

        /// `change` (taken by `takePendingChanges`) was written as `json`: unless the key was changed
        /// again since, it is not pending any more, and its value keeps `json` (not encoded again).
        /// Returns whether it stopped being pending.
        @discardableResult
        package mutating func markWritten(_ change: PendingWrite.Change, as json: JSONValue?) -> Bool {
            guard storage.state.dirty[change.key] == change.version else { return false }
            storage.state.dirty.removeValue(forKey: change.key)
            if let json, storage.state.values[change.key] != nil, storage.state.values[change.key]!.json == nil {
                storage.state.values[change.key]!.json = json
            }
            return true
        }

        /// If changes are pending and no write is scheduled, marks one scheduled and returns `true`:
        /// the caller then writes them (a retry, a write that waited for the back end). `false`: none
        /// is pending, or a write that will take them is scheduled already.
        package mutating func scheduleWriteIfPending() -> Bool {
            guard !storage.state.dirty.isEmpty, !storage.state.isWriteScheduled else { return false }
            storage.state.isWriteScheduled = true
            return true
        }

        /// Applies an update's result, written by the back end (at `revision`, if it has them), as
        /// this process's change: `key` is not pending any more, and its observers hear of it once
        /// the lock is released.
        package mutating func applyUpdate(_ key: String, entry: Entry?, revision: Int64?) {
            deliveries += storage.commitUpdate(key: key, entry: entry, revision: revision)
        }
    }
}
