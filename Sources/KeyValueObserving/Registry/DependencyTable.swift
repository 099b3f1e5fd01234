/// The merged `keyPathsAffecting` tables, one per class, computed once.
enum _DependencyTable {
    private static let lock = Lock()
    // Invariant: only accessed with `lock` held. The values hold the classes' tables, which hold
    // their key paths; classes live for the life of the process.
    nonisolated(unsafe) private static var tables: [ObjectIdentifier: [AnyKeyPath: [AnyKeyPath]]] = [:]

    /// The table of `type` merged with its superclasses' tables (inputs of a key declared at several
    /// levels are united).
    static func merged(for type: KeyValueObservable.Type) -> [AnyKeyPath: [AnyKeyPath]] {
        let id = ObjectIdentifier(type)
        if let table = lock.withLock({ tables[id] }) {
            return table
        }
        // User code (the overrides) runs outside the lock.
        var merged: [AnyKeyPath: [AnyKeyPath]] = [:]
        var current: AnyClass? = type
        while let cls = current, let observable = cls as? KeyValueObservable.Type {
            for (key, inputs) in observable.keyPathsAffecting {
                var united = merged[key, default: []]
                for input in inputs where !united.contains(input) { united.append(input) }
                merged[key] = united
            }
            current = _getSuperclass(cls)
        }
        lock.withLock { tables[id] = merged }
        return merged
    }
}
