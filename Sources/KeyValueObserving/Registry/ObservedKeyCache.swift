/// The key-path objects known to be `@Observed` keys of a class, so that registering again with the
/// same key path on an instance of that class skips the probe.
///
/// Only objects that *are* the key an `@Observed` accessor receives are recorded: uniqued key-path
/// literals, which the runtime keeps alive for the life of the process anyway, so the cache is
/// bounded by the number of `@Observed` properties and classes in the program. It is per class
/// because a subclass's dependency table may declare inputs for an inherited stored property.
///
/// A `_HashTable` of the two identities, read without a lock (`_EpochPublished`): a look-up on every
/// registration costs a few instructions, where a `Dictionary` hashes with SipHash and a lock costs
/// more (the gate's `register-invalidate`). An insertion (under `lock`) fills a copy of the table
/// with the new key and publishes it; the table it replaces is freed once no reader is in it.
enum _ObservedKeyCache {
    /// The published table and the lock its writers hold, in one static (one lazy-initialization
    /// check per look-up).
    private struct Storage: ~Copyable, Sendable {
        let tables = _EpochPublished<_HashTable<Entry>>()
        let lock = LockPrimitive()
    }
    private static let storage = Storage()
    // Invariant: only accessed with `lock` held, so the dynamic exclusivity checks are redundant
    // (`@exclusivity(unchecked)`). It keeps the identified key paths alive, so an identifier is never
    // reused for another key path; classes live for the life of the process.
    @exclusivity(unchecked) nonisolated(unsafe) private static var keyPaths: [AnyKeyPath] = []

    /// A key path's and a class's identities.
    struct Key: Equatable {
        let keyPath: UInt
        let type: UInt
    }

    struct Entry: _HashTableElement {
        let hashKey: Key
        let isZeroSized: Bool

        static var free: Entry { Entry(hashKey: Key(keyPath: 0, type: 0), isZeroSized: false) }
        var isFree: Bool { hashKey.keyPath == 0 }

        static func hash(of key: Key) -> UInt {
            ((key.keyPath &* _goldenMultiplier) ^ key.type) &* _goldenMultiplier
        }

        func release() {}
    }

    private static func key(_ keyPath: AnyKeyPath, _ type: AnyClass) -> Key {
        Key(keyPath: UInt(bitPattern: ObjectIdentifier(keyPath)), type: UInt(bitPattern: ObjectIdentifier(type)))
    }

    /// Whether the property is zero-sized, if `keyPath` is a known `@Observed` key of `type`; else `nil`.
    static func isZeroSized(_ keyPath: AnyKeyPath, in type: AnyClass) -> Bool? {
        let reading = storage.tables.enterReading()
        defer { storage.tables.exitReading(reading) { storage.tables.reclaim(lock: storage.lock) } }
        return storage.tables.load()?._withUnsafeGuaranteedRef { $0.element(for: key(keyPath, type))?.isZeroSized }
    }

    static func insert(_ keyPath: AnyKeyPath, in type: AnyClass, isZeroSized: Bool) {
        let entry = Entry(hashKey: key(keyPath, type), isZeroSized: isZeroSized)
        storage.lock.lock()
        let current = storage.tables.load()
        if current?._withUnsafeGuaranteedRef({ $0.element(for: entry.hashKey) }) == nil {
            // A published table is never written: the new key goes into a copy, published instead.
            let next = current?._withUnsafeGuaranteedRef { $0.copy(reserving: 1) } ?? .make(count: 1, extra: ())
            next.insert(entry)
            storage.tables.publish(next)
            keyPaths.append(keyPath)
        }
        storage.lock.unlock()
        if storage.tables.needsReclaiming { storage.tables.reclaim(lock: storage.lock) }
    }
}
