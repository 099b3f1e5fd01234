/// Every value of a `DefaultsStore` at one instant (`DefaultsStore.snapshot()`, or a store-wide
/// change's `values`): a value that later changes do not affect.
///
/// ```swift
/// let settings = store.snapshot()
/// print(settings[.host], settings[.port])   // from the same instant
/// ```
public struct DefaultsSnapshot: Sendable {
    let entries: [String: DefaultsStorage.Entry]
    /// For reporting a value that does not decode; a snapshot does not keep the store alive.
    weak let storage: DefaultsStorage?

    init(entries: [String: DefaultsStorage.Entry], storage: DefaultsStorage) {
        self.entries = entries
        self.storage = storage
    }

    /// The value of `key` at the snapshot's instant: its default if it was absent, or if its value
    /// does not decode as `Value` (reported to the store's error handler while the store exists).
    public subscript<Value>(key: DefaultsKey<Value>) -> Value {
        guard let entry = entries[key.name] else { return key.defaultValue }
        if let typed = entry.typed as? Value { return typed }
        if let storage { return storage.value(of: entry, for: key) }
        return (try? entry.json?.decode(as: Value.self)) ?? key.defaultValue
    }

    /// Whether `key` had a value (as opposed to reading its default).
    public func hasValue<Value>(for key: DefaultsKey<Value>) -> Bool {
        entries[key.name] != nil
    }

    /// The names of the keys that had a value.
    public var keys: Set<String> { Set(entries.keys) }
}
