import KeyValueObserving

/// The defaults key names of this process, each interned once to a stable offset under which the
/// core registry indexes its observers, like an `@Observed` property's storage offset (see
/// `_ExplicitlyNotifiedKeys`): a key's observers are registered under `\DefaultsStorage[_key: offset]`
/// on every storage, and a set finds them with the offset, never hashing the name.
///
/// Offsets are multiples of 8 (the registry's observed-mask bits stay apart for the first keys);
/// the first three are reserved for what is not one key. A name, once interned, stays for the
/// life of the process (a key name is a declaration: a process uses few).
@usableFromInline
package enum DefaultsKeyNames {
    /// Store-wide changes: one notification per transaction (`DefaultsStore.observeChanges`).
    package static let changesOffset = 0
    /// Every key's change (`observeJSON(key: nil)`).
    package static let anyKeyOffset = 8
    /// The back end's connection state (`DefaultsStore.observeBackendStatus`).
    package static let statusOffset = 16
    /// The first key's offset.
    static let firstKeyOffset = 24

    struct Table {
        /// The offset of `name`, interned now if it was not.
        mutating func intern(_ name: String) -> Int {
            if let offset = offsets[name] { return offset }
            let offset = DefaultsKeyNames.firstKeyOffset + names.count &* 8
            let keyPath = \DefaultsStorage[_key: offset]
            offsets[name] = offset
            names.append(name)
            keyPaths.append(keyPath)
            types.append(nil)
            byKeyPath[keyPath] = offset
            return offset
        }

        var offsets: [String: Int] = [:]
        /// Indexed by `(offset - firstKeyOffset) / 8`.
        var names: [String] = []
        var keyPaths: [KeyPath<DefaultsStorage, DefaultsStorage.KeyValue>] = []
        /// The offset of each key path (the registry asks with the key path a caller passed).
        var byKeyPath: [AnyKeyPath: Int] = [:]
        /// The names declared secret (`DefaultsStore`'s `secrets:`, `DefaultsKey(_:default:isSecret:)`,
        /// `kvo-defaults --secret`). Only ever grows.
        var secrets: Set<String> = []
        /// The type each key is read as, where known (the first `DefaultsKey` made of the name, the
        /// first registered default, or a configuration type's property), indexed as `names`: a
        /// snapshot's description marks the values that type's read skips.
        var types: [(any Decodable.Type)?] = []
    }

    static let table = Locked(Table())

    /// The offset of `name`, interned now if it was not.
    package static func offset(of name: String) -> Int {
        table.withLock { $0.intern(name) }
    }

    /// The offset of `name`, interned now if it was not, noting that it is read as `type` if no
    /// type was noted for it yet.
    package static func offset(of name: String, readAs type: any Decodable.Type) -> Int {
        table.withLock { table in
            let offset = table.intern(name)
            let index = (offset - firstKeyOffset) / 8
            if table.types[index] == nil { table.types[index] = type }
            return offset
        }
    }

    /// The type `name` is read as, if one was noted (see `Table.types`).
    static func knownType(of name: String) -> (any Decodable.Type)? {
        table.withLock { table in table.offsets[name].flatMap { table.types[($0 - firstKeyOffset) / 8] } }
    }

    /// The offset of `name` if it was interned: a key nobody made a `DefaultsKey` of, nor observed,
    /// has none (and no observer).
    static func existingOffset(of name: String) -> Int? {
        table.withLock { $0.offsets[name] }
    }

    /// Declares the key `name` secret in this process: its values are never printed (see
    /// `DefaultsKey.isSecret`).
    package static func markSecret(_ name: String) {
        table.withLock { _ = $0.secrets.insert(name) }
    }

    /// Declares the keys `names` secret in this process (a store's `secrets:`).
    package static func markSecret(_ names: some Sequence<String>) {
        table.withLock { $0.secrets.formUnion(names) }
    }

    /// Whether the key `name` was declared secret.
    package static func isSecret(_ name: String) -> Bool {
        table.withLock { $0.secrets.contains(name) }
    }

    /// What is printed in place of a secret's value.
    package static let redacted = "<redacted>"

    /// Every name interned so far.
    static func allNames() -> [String] {
        table.withLock { $0.names }
    }

    /// The name interned at `offset`.
    static func name(at offset: Int) -> String {
        table.withLock { $0.names[(offset - firstKeyOffset) / 8] }
    }

    /// The canonical key path of the key at `offset`.
    @usableFromInline
    static func keyPath(at offset: Int) -> KeyPath<DefaultsStorage, DefaultsStorage.KeyValue> {
        table.withLock { $0.keyPaths[(offset - firstKeyOffset) / 8] }
    }

    /// The offset and canonical key path of `keyPath`, if it is one of the interned keys or one of
    /// the reserved ones.
    static func explicitKey(for keyPath: AnyKeyPath) -> (offset: Int, key: AnyKeyPath)? {
        if keyPath == \DefaultsStorage._storeChange { return (changesOffset, \DefaultsStorage._storeChange) }
        if keyPath == \DefaultsStorage._anyKeyChange { return (anyKeyOffset, \DefaultsStorage._anyKeyChange) }
        if keyPath == \DefaultsStorage._backendStatus { return (statusOffset, \DefaultsStorage._backendStatus) }
        return table.withLock { table in
            table.byKeyPath[keyPath].map { ($0, table.keyPaths[($0 - firstKeyOffset) / 8]) }
        }
    }

    /// The name of the key at `keyPath`, for diagnostics.
    static func name(of keyPath: AnyKeyPath) -> String? {
        guard let (offset, _) = explicitKey(for: keyPath) else { return nil }
        switch offset {
        case changesOffset: return "changes"
        case anyKeyOffset: return "anyKey"
        case statusOffset: return "backendStatus"
        default: return name(at: offset)
        }
    }
}
