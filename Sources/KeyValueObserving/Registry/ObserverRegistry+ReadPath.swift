import Synchronization

// The set path's lock-free read: the observers of a property by storage offset, from the published
// set table, with no lock and no reference counting; tables replaced by a registration are freed
// once no reader can still be using them (epoch-based reclamation with two reader counters). A set
// on an object with observers of every key reads them, and the key it names, from the same table
// (`ObserverRegistry+AnyKey.swift`).
//
// Protocol (every operation on the atomics below is sequentially consistent):
// - A reader reads `readerEpochShift` (0 or 32), adds `1 << shift` to `readers` (one 32-bit counter
//   per epoch in one word), loads `setTable`, uses the table and the snapshots it holds (borrowed),
//   and subtracts what it added.
// - A writer (with the lock held) whose change makes the published table stale exchanges `nil` into
//   `setTable` and appends the old table to `state.retiredTables`: from then on no reader can load
//   it. The next table is built on demand: a reader that finds no table asks the registry
//   (`learnOffset`), which builds and publishes it under the lock and looks the offset up in it
//   there (a registration may unpublish it again as soon as the lock is dropped; the reader, counted
//   since before the table existed, keeps it alive all the same). A registration that no set
//   follows (register, drop) so builds no table at all.
// - `reclaim()` (with the lock held) reads `readers` once; each counter seen at zero then marks every
//   retired table: every reader counted there when the table was retired has left. A table marked
//   by both counters is freed (after unlocking: freeing releases snapshots, whose handlers own user
//   captures). While tables remain, it flips the epoch so that new readers count on the other
//   counter and the current one drains; the reader that brings a counter to zero while tables
//   remain calls `reclaim()`, so every table is freed once its readers have left.
//
// A reader that held the old table incremented its counter before loading it, and so before the
// retirement; a zero seen after the retirement therefore includes its decrement, which follows its
// last use. Handlers run inside the read section and may register, invalidate or set (nested
// readers): a writer never waits for readers, it only defers the free.

extension _ObserverRegistry {
    /// Enters a read section; returns what to pass to `exitReading`.
    @inlinable
    func enterReading() -> Int {
        let unit = 1 &<< readerEpochShift.load(ordering: .sequentiallyConsistent)
        readers.wrappingAdd(unit, ordering: .sequentiallyConsistent)
        return unit
    }

    /// Leaves a read section: after this, nothing loaded in it may be used.
    @inlinable
    func exitReading(_ unit: Int) {
        let remaining = readers.wrappingSubtract(unit, ordering: .sequentiallyConsistent).newValue
        // This counter's 32 bits: `unit` times 0xFFFF_FFFF.
        if _slowPath(remaining & (unit &* 0xFFFF_FFFF) == 0 && hasRetiredTables.load(ordering: .sequentiallyConsistent)) {
            reclaim()
        }
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
    func observersInReadSection(atOffset offset: Int, key: () -> AnyKeyPath) -> Unmanaged<_ObserverSnapshot>? {
        switch lookUpPublished(offset: offset) {
        case .observers(let snapshot):
            return snapshot
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
    func lookUpPublished(offset: Int) -> _ObserverSetTable.LookUp {
        guard let table = setTable.load(ordering: .sequentiallyConsistent) else { return .unknown }
        return table._withUnsafeGuaranteedRef { $0.lookUp(offset: offset) }
    }

    /// Learns which key is stored at `offset` if the registry is waiting to learn it, publishes the
    /// set table of the current state if the published one is stale (`nil`), and returns the
    /// observers that table has for `offset`, unretained. Called inside a read section, which keeps
    /// the table, and so the snapshot returned, alive until it ends, even if it is replaced meanwhile.
    @usableFromInline
    func learnOffset(_ offset: Int, key: () -> AnyKeyPath) -> Unmanaged<_ObserverSnapshot>? {
        var learnedKey: AnyKeyPath?
        while true {
            let found: Unmanaged<_ObserverSnapshot>?? = withLock {
                if state.needsLearning(offset: offset) {
                    // The key is asked for outside the lock, then this runs again.
                    guard let learnedKey else { return nil }
                    _ = state.learn(offset: offset, key: learnedKey)
                    // The mask and the state version change only when something was learned: a
                    // version bump would make every batch's shortcut take the lock again.
                    publish()
                }
                publishSetTable()
                if let table = setTable.load(ordering: .sequentiallyConsistent),
                    case .observers(let snapshot) = table._withUnsafeGuaranteedRef({ $0.lookUp(offset: offset) })
                {
                    return .some(snapshot)
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
        if let old = setTable.exchange(nil, ordering: .sequentiallyConsistent) { retire(old) }
    }

    /// Builds and publishes the set table of the current state, unless the published one is current.
    /// Called with the lock held.
    func publishSetTable() {
        guard state.setTableVersion != state.publishedSetTableVersion else { return }
        state.publishedSetTableVersion = state.setTableVersion
        let table = state.makeSetTable().map { Unmanaged.passRetained($0) }
        if let old = setTable.exchange(table, ordering: .sequentiallyConsistent) { retire(old) }
    }

    /// Queues `table`, just unpublished, to be freed once no reader can be using it. Lock held.
    private func retire(_ table: Unmanaged<_ObserverSetTable>) {
        state.retiredTables.append((table, 0))
        hasRetiredTables.store(true, ordering: .sequentiallyConsistent)
    }

    /// Frees the retired tables no reader can be using, if any wait. Called without the lock.
    func reclaimIfNeeded() {
        if hasRetiredTables.load(ordering: .sequentiallyConsistent) { reclaim() }
    }

    @usableFromInline
    func reclaim() {
        let freed = withLock { reclaimLocked() }
        for table in freed { table.release() }
    }

    /// The transition of `reclaim()`, with the lock held: returns the tables to free after unlocking.
    private func reclaimLocked() -> [Unmanaged<_ObserverSetTable>] {
        let counts = readers.load(ordering: .sequentiallyConsistent)
        let quiet: UInt8 = (counts & 0xFFFF_FFFF == 0 ? 1 : 0) | (counts &>> 32 == 0 ? 2 : 0)
        var freed: [Unmanaged<_ObserverSetTable>] = []
        var waiting: [(table: Unmanaged<_ObserverSetTable>, quietCounters: UInt8)] = []
        for var retired in state.retiredTables {
            retired.quietCounters |= quiet
            if retired.quietCounters == 3 {
                freed.append(retired.table)
            } else {
                waiting.append(retired)
            }
        }
        state.retiredTables = waiting
        if state.retiredTables.isEmpty {
            hasRetiredTables.store(false, ordering: .sequentiallyConsistent)
        } else {
            // New readers count on a counter every waiting table has seen at zero, so that the one
            // they still wait for drains; if both are still awaited, on the other counter than now.
            var awaited: UInt8 = 0
            for retired in waiting { awaited |= 3 & ~retired.quietCounters }
            let shift: Int
            switch awaited {
            case 1: shift = 32
            case 2: shift = 0
            default: shift = 32 &- readerEpochShift.load(ordering: .sequentiallyConsistent)
            }
            readerEpochShift.store(shift, ordering: .sequentiallyConsistent)
        }
        return freed
    }
}

extension _ObserverRegistry.State {
    /// Whether a set of the property at `offset` must reveal its key: some observed `@Observed`
    /// property's offset is still unknown and `offset` is not known to be another property.
    mutating func needsLearning(offset: Int) -> Bool {
        slots.contains { $0.kind == .storage && $0.offset == nil } && !learnedOffsets.contains { $0.offset == offset }
    }
}
