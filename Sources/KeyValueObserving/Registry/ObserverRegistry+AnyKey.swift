import Synchronization

// Observers of every key (`observeAnyKey`).

extension _ObserverRegistry {
    /// Adds an observer of every key. Returns `false` if the object is already gone.
    func addAnyKeyObserver(_ observer: _AnyKeyObserver) -> Bool {
        let (added, old): (Bool, _AnyKeySnapshot?) = withState { state in
            guard !state.isTornDown else { return (false, nil) }
            let old = state.anyKeyObservers
            state.anyKeyObservers = _AnyKeySnapshot(observers: old.observers + [observer])
            return (true, old)
        }
        withExtendedLifetime(old) {}
        return added
    }

    /// The observers of every key now, or `nil` if there are none.
    @usableFromInline
    func anyKeySnapshot() -> _AnyKeySnapshot? {
        guard hasAnyKeyObservers else { return nil }
        return readState { $0.anyKeyObservers.observers.isEmpty ? nil : $0.anyKeyObservers }
    }
}

// Sets that tell observers of every key without the lock (`Observed._setNotifyingAnyKeyUnlocked`):
// the set table carries them, and for each known offset its key and whether a set of it notifies.

extension _ObserverRegistry {
    /// The set table's element for the `@Observed` property stored at `offset`, with the table's
    /// observers of every key, both borrowed: valid until the read section (`enterReading()`) ends.
    /// `nil` if the table does not know the property's key or whether a set of it notifies.
    @inlinable
    @inline(__always)
    func knownElementInReadSection(
        atOffset offset: Int
    ) -> (element: _ObserverSetTable.Element, anyKey: Unmanaged<_AnyKeySnapshot>?)? {
        guard let table = setTables.load() else { return nil }
        return table._withUnsafeGuaranteedRef { table in
            table.knownElement(offset: offset).map { ($0, table.anyKeyObservers) }
        }
    }

    /// Teaches the registry the key of the `@Observed` property stored at `offset` and, when that
    /// key has no observers of its own, whether a set of it notifies, so that the set table
    /// published next knows both. `key` and `notifies` (the class's
    /// `automaticallyNotifiesObservers(for:)`, user code) are called outside the lock, at most once
    /// each.
    @usableFromInline
    func learnForAnyKeyObservers(offset: Int, key: () -> AnyKeyPath, notifies: (AnyKeyPath) -> Bool) {
        // The set table is built on demand (`ObserverRegistry+ReadPath.swift`): the set that called
        // this finds it published, unless a registration meanwhile made it stale again.
        defer {
            withLock { publishSetTable() }
            reclaimIfNeeded()
        }
        let (known, isDecided) = readState { $0.knowledge(ofOffset: offset) }
        let keyPath: AnyKeyPath
        if let known {
            keyPath = known
        } else {
            keyPath = key()
            // Resolves the slot waiting for this key, if one is: then its snapshot decides.
            let resolved = withState { $0.learn(offset: offset, key: keyPath) }
            if resolved != nil { return }
        }
        guard !isDecided else { return }
        let decision = notifies(keyPath)
        withState { state in
            guard !state.automaticNotification.contains(where: { $0.offset == offset }) else { return }
            state.automaticNotification.append((offset, decision))
        }
    }
}

extension _ObserverRegistry.State {
    /// What the registry knows of the `@Observed` property stored at `offset`: its key, and whether
    /// it is decided if a set of it notifies (a key with observers of its own: its snapshot says).
    mutating func knowledge(ofOffset offset: Int) -> (key: AnyKeyPath?, isDecided: Bool) {
        // By index, reading only the fields needed: copying a slot would retain its key and snapshot.
        for index in slots.indices where slots[index].kind == .storage && slots[index].offset == offset {
            return (slots[index].keyPath, true)
        }
        return (learnedOffsets.first { $0.offset == offset }?.key, automaticNotification.contains { $0.offset == offset })
    }
}
