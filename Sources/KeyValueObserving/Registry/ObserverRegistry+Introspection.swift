// Observer counts for debugging (`observationInfo`, `observerCountsByKeyPath`).

extension _ObserverRegistry.State {
    /// See `_ObserverRegistry.observerCounts()`.
    func observerCounts() -> (keys: [(key: AnyKeyPath, storageOffset: Int?, count: Int)], anyKey: Int, followers: Set<UInt64>) {
        var counts: [(key: AnyKeyPath, storageOffset: Int?, count: Int)] = []
        var seen: Set<UInt64> = []
        var followers: Set<UInt64> = []
        func count(_ key: AnyKeyPath, _ offset: Int?) {
            if let index = counts.firstIndex(where: { $0.key === key }) {
                counts[index].count += 1
            } else {
                counts.append((key, offset, 1))
            }
        }
        for slot in slots {
            for entry in slot.entries {
                if entry.isPathFollower {
                    followers.insert(entry.id)
                } else if entry.isDirect {
                    count(slot.keyPath, slot.kind == .storage ? slot.offset : nil)
                } else if let reading = entry as? _KeyPathObserver, seen.insert(entry.id).inserted {
                    count(reading.observedKey, nil)
                }
            }
        }
        return (counts, anyKeyObservers.observers.count, followers)
    }
}

extension _ObserverRegistry {
    /// The observed keys and how many registrations each has. Observers of `@Observed` properties
    /// count under the key of the declaring class's accessor; other observers (dependent keys, keys
    /// notified manually) once each, under the key they observed, though they sit in one slot per
    /// input; the internal observers that follow dependent keys' paths through other objects do not
    /// count.
    func observerCounts() -> (keys: [(key: AnyKeyPath, storageOffset: Int?, count: Int)], anyKey: Int, followers: Set<UInt64>) {
        readState { $0.observerCounts() }
    }
}
