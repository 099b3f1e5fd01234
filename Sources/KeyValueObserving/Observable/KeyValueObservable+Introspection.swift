import Synchronization

extension KeyValueObservable {
    /// What observes this object now, by key name, for debugging and for metrics (Foundation's
    /// `observationInfo` is an opaque pointer).
    ///
    /// `@Observed` properties are listed under the key path of the declaring class (`\Base.volume`
    /// for a property that a subclass inherits); other keys (dependent keys, paths such as
    /// `\.engine.rpm`, keys notified manually) under the key path they were observed with, each
    /// observer counted once. Observers of every key (`observeAnyKey`) are counted apart, and so are
    /// the followers that observers of paths and of dependent keys reaching into other objects keep
    /// on each object along the way (`pathFollowerCount`).
    ///
    /// ```swift
    /// print(car.observationInfo)   // engine.rpm: 1, speed: 2; any key: 1
    /// ```
    ///
    /// - Complexity: O(*k*) in the number of observed keys.
    public var observationInfo: KeyValueObservationInfo {
        guard let registry = _existingRegistry else {
            return KeyValueObservationInfo(keys: [], anyKeyObserverCount: 0, pathFollowerCount: 0)
        }
        let (counts, anyKey, followers) = registry.observerCounts()
        var keys: [KeyValueObservationInfo.Key] = []
        for (key, offset, count) in counts {
            if let index = keys.firstIndex(where: { $0.keyPath == key }) {
                keys[index].observerCount += count
            } else {
                keys.append(.init(name: _KeyNames.name(of: key, storageOffset: offset), keyPath: key, observerCount: count))
            }
        }
        keys.sort { $0.name < $1.name }
        return KeyValueObservationInfo(keys: keys, anyKeyObserverCount: anyKey, pathFollowerCount: followers.count)
    }

    /// Whether this object has allocated its observer registry (it does so on the first registration
    /// and keeps it until it is deallocated). Until then an instance costs one pointer more than an
    /// empty class. A hook for the tests of that claim, not API.
    package var hasObserverRegistry: Bool {
        _existingRegistry != nil
    }

    /// How many replaced set tables still wait until no set can be reading them
    /// (`ObserverRegistry+ReadPath.swift`): 0 once no set is running. A hook for the tests of the
    /// reclamation, not API.
    package var retiredSetTableCount: Int {
        guard let registry = _existingRegistry else { return 0 }
        return registry.withLock { registry.setTables.retiredCount }
    }

    /// How many sets are reading the set path's table on each of the two reader counters, and which
    /// counter (0 or 1) new sets count on (`ObserverRegistry+ReadPath.swift`). A hook for the tests of
    /// the reclamation, not API.
    package var setTableReaders: (counts: [Int], newReadersCounter: Int) {
        guard let registry = _existingRegistry else { return ([0, 0], 0) }
        return registry.setTables.readerCounts
    }

    /// Whether the set path's table of observers is published: it is built when a set needs it, not
    /// on registration (`ObserverRegistry+ReadPath.swift`). A hook for the tests of that claim, not API.
    package var hasPublishedSetTable: Bool {
        _existingRegistry?.setTables.load() != nil
    }

    /// How many of the observed keys have a snapshot of their observers: a key with one observer
    /// has none until a path other than the set table asks for it (a batch's delivery, a manual
    /// notification), and the set table then holds the observer itself (`_BorrowedObservers`). A
    /// hook for the tests of that claim, not API.
    package var observedKeysWithSnapshot: Int {
        guard let registry = _existingRegistry else { return 0 }
        return registry.readState { $0.slots.lazy.filter(\.hasSnapshot).count }
    }

    /// Whether the process-wide cache of `@Observed` keys knows `keyPath` as a key of this object's
    /// class, and then whether the property is zero-sized (`nil`: unknown, the next registration
    /// probes the property). A hook for the tests of that cache, not API.
    package func cachedObservedKeyIsZeroSized(_ keyPath: AnyKeyPath) -> Bool? {
        _ObservedKeyCache.isZeroSized(keyPath, in: type(of: self))
    }

    /// The registration ids of the followers that observations of paths keep on this object (see
    /// `KeyValueObservationInfo.pathFollowerCount`): a follower registered again gets a new id. A
    /// hook for the tests of re-targeting, not API.
    package var pathFollowerIDs: Set<UInt64> {
        _existingRegistry?.observerCounts().followers ?? []
    }
}

/// The observers of one object at one moment (`KeyValueObservable.observationInfo`).
public struct KeyValueObservationInfo: @unchecked Sendable, CustomStringConvertible {
    // Invariant: immutable; key-path objects are immutable and safe to share.

    /// An observed key: its name (`"speed"`, `"engine.rpm"`), key path, and number of observers.
    public struct Key: @unchecked Sendable {
        // Invariant: immutable once built; key-path objects are immutable and safe to share.
        public let name: String
        public let keyPath: AnyKeyPath
        public internal(set) var observerCount: Int
    }

    /// The observed keys, sorted by name.
    public let keys: [Key]
    /// How many observers of every key (`observeAnyKey`) the object has.
    public let anyKeyObserverCount: Int
    /// How many observations of paths (`\.engine.rpm` observed on a car) and of dependent keys
    /// follow their path through this object (the engine), observing the properties they pass
    /// through.
    public let pathFollowerCount: Int

    /// Whether nothing observes the object.
    public var isEmpty: Bool {
        keys.isEmpty && anyKeyObserverCount == 0 && pathFollowerCount == 0
    }

    /// The number of observers of `keyPath` (0 if it has none); observers of every key not included.
    public func observerCount(for keyPath: AnyKeyPath) -> Int {
        keys.first { $0.keyPath == keyPath }?.observerCount ?? 0
    }

    /// The observer counts by key path (observers of every key not included).
    public var observerCountsByKeyPath: [AnyKeyPath: Int] {
        Dictionary(keys.map { ($0.keyPath, $0.observerCount) }, uniquingKeysWith: +)
    }

    /// `"engine.rpm: 1, speed: 2; any key: 1"`, or `"no observers"`.
    public var description: String {
        guard !isEmpty else { return "no observers" }
        var parts = keys.map { "\($0.name): \($0.observerCount)" }.joined(separator: ", ")
        if anyKeyObserverCount > 0 {
            parts += (parts.isEmpty ? "" : "; ") + "any key: \(anyKeyObserverCount)"
        }
        if pathFollowerCount > 0 {
            parts += (parts.isEmpty ? "" : "; ") + "path followers: \(pathFollowerCount)"
        }
        return parts
    }
}
