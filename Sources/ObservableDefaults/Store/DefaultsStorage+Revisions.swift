/// What a back end with revisions (etcd) knows of each key, and the rules that keep the values in
/// memory in revision order:
///
/// - A change from elsewhere at revision R is applied only if R is newer than what is known of the
///   key (`known`): the watch's echo of this process's own write, or a change older than one
///   applied already, is not delivered again.
/// - While this process has a change of the key in flight (dirty: set and not acknowledged, or an
///   update running), this process's value stays; the newest change from elsewhere is kept aside
///   (`shadows`) and applied when the last change in flight is finished, only if it is newer than
///   the revision at which that change was applied.
struct Revisions {
    /// The revision of each key's value as last known from the back end (for a removed key, the
    /// revision of its removal, so that an older put is not applied after it). 0 forgets the key's
    /// revision: the next reload applies whatever the back end holds.
    var known: [String: Int64] = [:]
    /// The newest change from elsewhere of a key with a change of this process in flight.
    var shadows: [String: (json: JSONValue?, revision: Int64)] = [:]
    /// The keys with an `update` in flight, and how many.
    var updating: [String: Int] = [:]
    /// The keys whose newest value in the back end cannot be read (not JSON), with the error naming
    /// it and the revision of that value. The key keeps its last good value in memory (if any); a
    /// change of this process, or a readable change from elsewhere, newer than the bad value ends it.
    var unreadable: [String: (error: DefaultsError, revision: Int64)] = [:]
}

extension DefaultsStorage {
    /// A key's value as the back end holds it: its JSON and the revision of its last change.
    package typealias RevisionedValue = (json: JSONValue, modRevision: Int64)

    /// Whether this process has a change of `key` in flight. Called with the lock held.
    private func isInFlight(_ key: String) -> Bool {
        state.dirty[key] != nil || state.revisions.updating[key] != nil
    }

    /// Applies `json` (`nil`: removed) at `revision` for `key` if it is newer than what is known,
    /// or keeps it aside while this process has a change of the key in flight. Returns the entry to
    /// apply, if any. Called with the lock held.
    private func admit(_ key: String, json: JSONValue?, revision: Int64) -> Entry?? {
        if !state.revisions.unreadable.isEmpty, let bad = state.revisions.unreadable[key], bad.revision < revision {
            state.revisions.unreadable.removeValue(forKey: key)
        }
        guard revision > state.revisions.known[key] ?? 0 else { return nil }
        if isInFlight(key) {
            if (state.revisions.shadows[key]?.revision ?? 0) < revision { state.revisions.shadows[key] = (json, revision) }
            return nil
        }
        state.revisions.known[key] = revision
        return .some(json.map { Entry(typed: nil, json: $0) })
    }

    // MARK: Changes from elsewhere

    /// Applies the changes of one revision made elsewhere (`nil`: removed), as one transaction:
    /// the keys' observers with `origin == .anotherProcess` and the revision, and the store-wide
    /// observers once. Keys whose change is not newer than what is known are skipped (see
    /// `Revisions`). Runs on the back end's watch queue.
    package func applyRemote(_ changes: [(key: String, json: JSONValue?)], revision: Int64) {
        let deliveries = lock.withLock {
            var applied: [(key: String, entry: Entry?)] = []
            for (key, json) in changes {
                if case .some(let entry) = admit(key, json: json, revision: revision) { applied.append((key, entry)) }
            }
            return applyExternal(applied, origin: .anotherProcess, revision: revision)
        }
        deliver(deliveries)
    }

    /// Applies a complete read of the store made at `revision` (at start, or after the back end lost
    /// track: a compacted watch, a refused write): every key whose value there is newer than what is
    /// known, and the removal of every key absent there, delivered as one transaction. Keys with a
    /// change of this process in flight keep this process's value (the read is kept aside for them).
    /// The `unreadable` keys (their value there is not JSON: see `noteUnreadable`) keep their last
    /// good value.
    package func applyReload(_ values: [String: RevisionedValue], unreadable: Set<String> = [], revision: Int64) {
        let deliveries = lock.withLock {
            var applied: [(key: String, entry: Entry?)] = []
            for key in Set(values.keys).union(state.values.keys).sorted() where !unreadable.contains(key) {
                if let value = values[key] {
                    if case .some(let entry) = admit(key, json: value.json, revision: value.modRevision) { applied.append((key, entry)) }
                } else if state.values[key] != nil || isInFlight(key) {
                    // Removed at some revision up to `revision`: no newer than the read.
                    if case .some(let entry) = admit(key, json: nil, revision: revision) { applied.append((key, entry)) }
                }
            }
            return applyExternal(applied, origin: .anotherProcess, revision: revision)
        }
        deliver(deliveries)
    }

    // MARK: Values that cannot be read

    /// Notes that the back end holds a value of `key` at `revision` that cannot be read (`error`
    /// names it): unless a newer value is known, the key's reads through `unreadableValueError(forKey:)`
    /// throw `error` until this process changes the key or a readable change newer than `revision`
    /// arrives. The key keeps its value in memory.
    package func noteUnreadable(_ key: String, error: DefaultsError, revision: Int64) {
        lock.withLock {
            guard revision > state.revisions.known[key] ?? 0, revision > state.revisions.unreadable[key]?.revision ?? 0 else { return }
            state.revisions.unreadable[key] = (error, revision)
        }
    }

    /// The error naming the unreadable value the back end holds for `key` (see `noteUnreadable`), or
    /// `nil` if its value is readable.
    package func unreadableValueError(forKey key: String) -> DefaultsError? {
        lock.withLock { state.revisions.unreadable[key]?.error }
    }

    /// This process changed `key`: its new value replaces the unreadable one. Called with the lock
    /// held, only when some key is unreadable.
    func forgetUnreadable(_ key: String) {
        state.revisions.unreadable.removeValue(forKey: key)
    }

    // MARK: This process's changes

    /// Finishes the outbox's first write: acknowledged at `revision`, or refused (`nil`) and dropped.
    /// Its keys that were not changed again since are clean again, except `unsent` ones (their value
    /// cannot be encoded: they stay pending). A refused key's revision is forgotten, so that the next
    /// reload puts the back end's value back. A key left with no change in flight gets the newest
    /// change kept aside for it, if that is newer than this write.
    package func finish(_ write: PendingWrite, revision: Int64?, unsent: Set<String> = []) {
        let deliveries = lock.withLock {
            precondition(
                state.outbox.first?.sequence == write.sequence, "DefaultsStorage.finish: write \(write.sequence) is not the outbox's first")
            state.outbox.removeFirst()
            for change in write.changes where !unsent.contains(change.key) {
                if let revision {
                    state.revisions.known[change.key] = max(state.revisions.known[change.key] ?? 0, revision)
                    if let bad = state.revisions.unreadable[change.key], bad.revision < revision { forgetUnreadable(change.key) }
                } else {
                    state.revisions.known[change.key] = 0
                }
                if state.dirty[change.key] == change.version { state.dirty.removeValue(forKey: change.key) }
            }
            return releaseShadows(of: write.changes.map(\.key))
        }
        deliver(deliveries)
    }

    /// Marks `key` as having an update in flight, and returns its entry and the revision the back
    /// end last reported for it (0 if none: absent), which the update's transaction compares.
    package func beginUpdate(_ key: String) -> (entry: Entry?, revision: Int64) {
        lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            state.revisions.updating[key, default: 0] += 1
            return (state.values[key], state.revisions.known[key] ?? 0)
        }
    }

    /// Ends an update of `key`: with its result, the entry written at `revision`, applied as this
    /// process's change (unless a newer value is known, or a `set` of this process made since is
    /// pending: that one wins); with `nil`, nothing was written. Then the change kept aside for the
    /// key, if newer, is applied. Delivers on this thread.
    package func endUpdate(_ key: String, result: (entry: Entry?, revision: Int64)?) {
        let deliveries = lock.withLock {
            if state.revisions.updating[key]! > 1 {
                state.revisions.updating[key]! -= 1
            } else {
                state.revisions.updating.removeValue(forKey: key)
            }
            var deliveries: [Delivery] = []
            if let (entry, revision) = result, revision > state.revisions.known[key] ?? 0 {
                state.revisions.known[key] = revision
                if let bad = state.revisions.unreadable[key], bad.revision < revision { forgetUnreadable(key) }
                if state.dirty[key] == nil { deliveries = commitUpdate(key: key, entry: entry, revision: revision) }
            }
            return deliveries + releaseShadows(of: [key])
        }
        deliver(deliveries)
    }

    /// Applies the changes kept aside for `keys` that have no change of this process in flight any
    /// more, if they are newer than what is known; each is its own revision. Called with the lock held.
    private func releaseShadows(of keys: [String]) -> [Delivery] {
        var deliveries: [Delivery] = []
        for key in keys where !isInFlight(key) {
            guard let shadow = state.revisions.shadows.removeValue(forKey: key) else { continue }
            if case .some(let entry) = admit(key, json: shadow.json, revision: shadow.revision) {
                deliveries += applyExternal([(key, entry)], origin: .anotherProcess, revision: shadow.revision)
            }
        }
        return deliveries
    }
}
