// The set path's lock-free read: the observers of a property by storage offset, from the published
// set table, with no lock and no reference counting (`setTables`, an `_EpochPublished`: tables
// replaced by a registration are freed once no reader can still be using them).
//
// A writer (with the lock held) whose change makes the published table stale unpublishes it
// (`retireStaleSetTable`). The next table is built on demand: a reader that finds no table asks the
// registry (`learnOffset`), which builds and publishes it under the lock and looks the offset up in
// it there (a registration may unpublish it again as soon as the lock is dropped; the reader,
// counted since before the table existed, keeps it alive all the same). A registration that no set
// follows (register, drop) so builds no table at all. Handlers run inside the read section and may
// register, invalidate or set (nested readers).

extension _ObserverRegistry {
    /// Enters a read section of the set table; returns what to pass to `exitReading`.
    @inlinable
    @inline(__always)
    func enterReading() -> Int {
        setTables.enterReading()
    }

    /// Leaves a read section: after this, nothing loaded in it may be used.
    @inlinable
    @inline(__always)
    func exitReading(_ unit: Int) {
        setTables.exitReading(unit) { reclaim() }
    }

    /// The observers of the `@Observed` property stored at `offset`, unretained, or `nil` if it has
    /// none. Called inside a read section (`enterReading()`), and valid until its end: use them with
    /// `_withUnsafeGuaranteedRef`. `key` is called only while the registry still has to learn which
    /// property `offset` is.
    ///
    /// - Complexity: O(1): a hash look-up by storage offset, with no lock unless the offset is still
    ///   unknown.
    @inlinable
    @inline(__always)
    func observersInReadSection(atOffset offset: Int, key: () -> AnyKeyPath) -> _BorrowedObservers? {
        switch lookUpPublished(offset: offset) {
        case .observers(let observers):
            return observers
        case .none:
            return nil
        case .unknown:
            // Under the lock: learns the offset (or finds it has no observers), publishes a table
            // that knows it and looks it up there. Not loaded again: a registration may have
            // unpublished that table already (it stays valid until this read section ends).
            return learnOffset(offset, key: key)
        }
    }

    @inlinable
    @inline(__always)
    func lookUpPublished(offset: Int) -> _ObserverSetLookUp {
        guard let table = setTables.load() else { return .unknown }
        return table._withUnsafeGuaranteedRef { $0.lookUp(offset: offset) }
    }

    /// Learns which key is stored at `offset` if the registry is waiting to learn it, publishes the
    /// set table of the current state if the published one is stale (`nil`), and returns the
    /// observers that table has for `offset`, unretained. Called inside a read section, which keeps
    /// the table, and so the observers returned, alive until it ends, even if it is replaced meanwhile.
    @usableFromInline
    func learnOffset(_ offset: Int, key: () -> AnyKeyPath) -> _BorrowedObservers? {
        var learnedKey: AnyKeyPath?
        while true {
            let found: _BorrowedObservers?? = withLock {
                if state.needsLearning(offset: offset) {
                    // The key is asked for outside the lock, then this runs again.
                    guard let learnedKey else { return nil }
                    state.learn(offset: offset, key: learnedKey)
                    // The mask and the state version change only when something was learned.
                    publish()
                }
                publishSetTable()
                if let table = setTables.load(),
                    case .observers(let observers) = table._withUnsafeGuaranteedRef({ $0.lookUp(offset: offset) })
                {
                    return .some(observers)
                }
                return .some(nil)
            }
            guard let found else {
                learnedKey = key()
                continue
            }
            reclaimIfNeeded()
            return found
        }
    }

    /// Unpublishes the set table if the slots or the known offsets changed since it was built; the
    /// set path has the next one built when it needs it (`learnOffset`). Called with the lock held.
    func retireStaleSetTable() {
        guard state.setTableVersion != state.publishedSetTableVersion else { return }
        setTables.publish(nil)
    }

    /// Builds and publishes the set table of the current state, unless the published one is current.
    /// Called with the lock held.
    func publishSetTable() {
        guard state.setTableVersion != state.publishedSetTableVersion else { return }
        state.publishedSetTableVersion = state.setTableVersion
        setTables.publish(state.makeSetTable())
    }

    /// Frees the replaced set tables no reader can be using, if any wait. Called without the lock.
    func reclaimIfNeeded() {
        if setTables.needsReclaiming { reclaim() }
    }

    /// Frees the replaced set tables no reader can be using: the transition under the lock
    /// (`takeReclaimable()`), the releases after it.
    @usableFromInline
    func reclaim() {
        let freed = withLock { setTables.takeReclaimable() }
        for table in freed { table.release() }
    }
}

extension _ObserverRegistry.State {
    /// Whether a set of the property at `offset` must reveal its key: some observed `@Observed`
    /// property's offset is still unknown and `offset` is not known to be another property.
    mutating func needsLearning(offset: Int) -> Bool {
        slots.contains { $0.kind == .storage && $0.offset == nil } && !learnedOffsets.contains { $0.offset == offset }
    }
}
