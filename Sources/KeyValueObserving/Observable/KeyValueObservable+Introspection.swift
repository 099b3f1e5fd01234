extension KeyValueObservable {
    /// The keys of this object that have observers, with how many each, for debugging (Foundation's
    /// `observationInfo` is an opaque pointer).
    ///
    /// `@Observed` properties are named by the key path of the declaring class (`\Base.volume` for a
    /// property that a subclass inherits); other keys (dependent keys, keys notified manually) by the
    /// key path they were observed with, each observer counted once. A chain's observer counts as an
    /// observer of each key along the chain, on each object.
    ///
    /// ```swift
    /// print(player.observedKeyPaths)   // [\AudioPlayer.volume: 2]
    /// ```
    ///
    /// - Complexity: O(*k*) in the number of observed keys.
    public var observedKeyPaths: [AnyKeyPath: Int] {
        guard let registry = _existingRegistry else { return [:] }
        var counts: [AnyKeyPath: Int] = [:]
        for (key, count) in registry.observerCounts() {
            counts[key, default: 0] += count
        }
        return counts
    }

    /// Whether this object has allocated its observer registry (it does so on the first registration
    /// and keeps it until it is deallocated). Until then an instance costs one pointer more than an
    /// empty class.
    public var hasObserverRegistry: Bool {
        _existingRegistry != nil
    }
}
