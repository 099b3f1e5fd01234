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
        return readState { $0.hasAnyKeyObservers ? $0.anyKeyObservers : nil }
    }
}

extension _ObserverRegistry {
    /// Remembers that the `@Observed` property stored at `offset` is `key`, and the class's answer
    /// for it (`automaticallyNotifiesObservers(for:)`), for the sets of a key without observers of
    /// its own on the locked path (observers of every key, a batch): the class is asked once per key
    /// and object.
    @usableFromInline
    func rememberAutomaticNotification(offset: Int, key: AnyKeyPath, notifies: Bool) {
        withState { state in
            state.recordOffset(offset, for: key)
            guard !state.automaticNotification.contains(where: { $0.offset == offset }) else { return }
            state.automaticNotification.append((offset, notifies))
        }
    }
}
