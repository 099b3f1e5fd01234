/// The merged `keyPathsAffecting` tables, one per class, computed once.
enum _DependencyTable {
    /// The values hold the classes' tables, which hold their key paths; classes live for the life
    /// of the process.
    private static let tables = Locked<[Key: [AnyKeyPath: [AnyKeyPath]]]>([:])

    private struct Key: Hashable {
        let type: ObjectIdentifier
        /// `keyPathsNotAffecting` rather than `keyPathsAffecting`.
        let isOmissions: Bool
    }

    /// The table of `type` merged with its superclasses' tables (inputs of a key declared at several
    /// levels are united).
    static func merged(for type: KeyValueObservable.Type) -> [AnyKeyPath: [AnyKeyPath]] {
        merged(for: type, isOmissions: false) { $0.keyPathsAffecting }
    }

    /// The `keyPathsNotAffecting` table of `type` merged with its superclasses' tables.
    static func notAffecting(for type: KeyValueObservable.Type) -> [AnyKeyPath: [AnyKeyPath]] {
        merged(for: type, isOmissions: true) { $0.keyPathsNotAffecting }
    }

    private static func merged(
        for type: KeyValueObservable.Type,
        isOmissions: Bool,
        table: (KeyValueObservable.Type) -> [AnyKeyPath: [AnyKeyPath]]
    ) -> [AnyKeyPath: [AnyKeyPath]] {
        let id = Key(type: ObjectIdentifier(type), isOmissions: isOmissions)
        if let found = tables.withLock({ $0[id] }) {
            return found
        }
        // User code (the overrides) runs outside the lock.
        var merged: [AnyKeyPath: [AnyKeyPath]] = [:]
        var current: AnyClass? = type
        while let cls = current, let observable = cls as? KeyValueObservable.Type {
            for (key, inputs) in table(observable) {
                var united = merged[key, default: []]
                for input in inputs where !united.contains(input) { united.append(input) }
                merged[key] = united
            }
            current = _getSuperclass(cls)
        }
        tables.withLock { $0[id] = merged }
        return merged
    }
}
