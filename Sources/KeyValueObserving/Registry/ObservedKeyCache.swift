/// The key-path objects known to be `@Observed` keys of a class, so that registering again with the
/// same key path on an instance of that class skips the probe.
///
/// Recorded are the objects that *are* the key an `@Observed` accessor receives (uniqued key-path
/// literals, which the runtime keeps alive for the life of the process anyway), and objects equal to
/// one, each with the accessor's own object (the canonical key its setter notifies): a literal written
/// in another file than the accessor's is another object (each literal site is its own), and without
/// it every registration through it paid the probe (most of the cost of registering many objects'
/// observers). A key path built at run time, or one of a generic class, can
/// be a new object each time: `maximumEqualEntries` bounds what those keep alive (past it they are
/// probed, as before), apart from the uniqued literals, which are always recorded. It is per class
/// because a subclass's dependency table may declare inputs for an inherited stored property.
///
/// A `_HashTable` of the two identities, read without a lock (`_EpochPublished`): a look-up on every
/// registration is a hash and a comparison, where a `Dictionary` hashes with SipHash and a lock is
/// taken (the gate's `register-invalidate` measures it). An insertion (under `lock`) fills a copy of the table
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
    // Invariant: only accessed with `lock` held (as `keyPaths`).
    @exclusivity(unchecked) nonisolated(unsafe) private static var equalEntries = 0

    /// A key path's and a class's identities.
    struct Key: Equatable {
        let keyPath: UInt
        let type: UInt
    }

    struct Entry: _HashTableElement {
        let hashKey: Key
        let isZeroSized: Bool
        /// The identity of the accessor's own key-path object (`keyPaths` keeps it alive).
        let canonical: UInt

        static var free: Entry { Entry(hashKey: Key(keyPath: 0, type: 0), isZeroSized: false, canonical: 0) }
        var isFree: Bool { hashKey.keyPath == 0 }

        static func hash(of key: Key) -> UInt {
            ((key.keyPath &* _goldenMultiplier) ^ key.type) &* _goldenMultiplier
        }

        func release() {}
    }

    private static func key(_ keyPath: AnyKeyPath, _ type: AnyClass) -> Key {
        Key(keyPath: UInt(bitPattern: ObjectIdentifier(keyPath)), type: UInt(bitPattern: ObjectIdentifier(type)))
    }

    /// At most this many key paths equal to an accessor's, but other objects, are recorded.
    static let maximumEqualEntries = 1024

    /// Whether the property is zero-sized, if `keyPath` is a known `@Observed` key of `type`; else `nil`.
    static func isZeroSized(_ keyPath: AnyKeyPath, in type: AnyClass) -> Bool? {
        lookUp(keyPath, in: type)?.isZeroSized
    }

    /// The accessor's own key-path object for `keyPath` (the slot its setter notifies; `keyPath`
    /// itself for a uniqued literal) and whether the property is zero-sized, if `keyPath` is a known
    /// `@Observed` key of `type`; else `nil`.
    static func lookUp(_ keyPath: AnyKeyPath, in type: AnyClass) -> (canonical: AnyKeyPath, isZeroSized: Bool)? {
        let reading = storage.tables.enterReading()
        defer { storage.tables.exitReading(reading) { storage.tables.reclaim(lock: storage.lock) } }
        guard let entry = storage.tables.load()?._withUnsafeGuaranteedRef({ $0.element(for: key(keyPath, type)) }) else { return nil }
        guard entry.canonical != entry.hashKey.keyPath else { return (keyPath, entry.isZeroSized) }
        // Kept alive by `keyPaths`, never removed.
        let canonical = Unmanaged<AnyKeyPath>.fromOpaque(UnsafeRawPointer(bitPattern: entry.canonical)!).takeUnretainedValue()
        return (canonical, entry.isZeroSized)
    }

    /// Records `keyPath` as a key of `type` whose accessor's own object is `canonical` (`keyPath`
    /// itself for a uniqued literal).
    static func insert(_ keyPath: AnyKeyPath, canonical: AnyKeyPath? = nil, in type: AnyClass, isZeroSized: Bool) {
        let canonical = canonical ?? keyPath
        let entry = Entry(
            hashKey: key(keyPath, type), isZeroSized: isZeroSized, canonical: UInt(bitPattern: ObjectIdentifier(canonical)))
        storage.lock.lock()
        let current = storage.tables.load()
        let isEqualEntry = canonical !== keyPath
        if !isEqualEntry || equalEntries < maximumEqualEntries,
            current?._withUnsafeGuaranteedRef({ $0.element(for: entry.hashKey) }) == nil
        {
            // Kept alive before the table that names them is published.
            keyPaths.append(keyPath)
            if isEqualEntry {
                keyPaths.append(canonical)
                equalEntries += 1
            }
            // A published table is never written: the new key goes into a copy, published instead.
            let next = current?._withUnsafeGuaranteedRef { $0.copy(reserving: 1) } ?? .make(count: 1, extra: ())
            next.insert(entry)
            storage.tables.publish(next)
        }
        storage.lock.unlock()
        if storage.tables.needsReclaiming { storage.tables.reclaim(lock: storage.lock) }
    }
}
