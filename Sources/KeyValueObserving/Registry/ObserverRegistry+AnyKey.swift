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
        mutex.lock()
        defer { mutex.unlock() }
        return state.anyKeyObservers.observers.isEmpty ? nil : state.anyKeyObservers
    }
}
