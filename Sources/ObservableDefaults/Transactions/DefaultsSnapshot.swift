/// Every value of a `DefaultsStore` at one instant (`DefaultsStore.snapshot()`, or a store-wide
/// change's `values`): a value that later changes do not affect.
///
/// ```swift
/// let settings = store.snapshot()
/// print(settings[.host], settings[.port])   // from the same instant
/// ```
public struct DefaultsSnapshot: Sendable {
    /// The back end's values.
    let entries: [String: DefaultsStorage.Entry]
    /// The registered defaults (`DefaultsStore.register(_:)`).
    let registered: [String: DefaultsStorage.Entry]
    /// For reporting a value that does not decode; a snapshot does not keep the store alive.
    weak let storage: DefaultsStorage?
    /// For a store with layers: what they held for each key that one of them held a value of.
    var layers: Layers?
    /// When the snapshot was taken, to tell an older one from a newer one.
    var generation = Generation()

    /// The storage's store-wide changes and the layers' changes a snapshot had seen.
    struct Generation: Sendable, Equatable {
        var storeChanges: UInt64 = 0
        var layerChanges: UInt64 = 0

        /// Whether a snapshot of this generation may hold changes one of `other` does not: it has
        /// seen more of either (two snapshots taken at once can each have seen more of one).
        func isNewer(than other: Generation) -> Bool {
            storeChanges > other.storeChanges || layerChanges > other.layerChanges
        }
    }

    /// What a layered store's layers held.
    struct Layers: Sendable {
        let holdings: [String: DefaultsLayerStack.Holdings]
        /// Whether each layer was secret (`DefaultsLayer.isSecret`): its values are redacted where
        /// the snapshot is printed.
        let secretLayers: [Bool]
        /// The kind of each layer, to name it in a configuration's problems.
        let kinds: [DefaultsLayerKind]
        /// For decoding and reporting; a snapshot does not keep the store alive.
        weak let stack: DefaultsLayerStack?
    }

    init(entries: [String: DefaultsStorage.Entry], registered: [String: DefaultsStorage.Entry] = [:], storage: DefaultsStorage) {
        self.entries = entries
        self.registered = registered
        self.storage = storage
    }

    /// The value of `key` at the snapshot's instant: from the first layer that held a value of it
    /// (for a store with layers), else the back end's, else its registered default, else its own;
    /// a value that does not decode as `Value` is skipped (reported to the store's error handler
    /// while the store exists).
    public subscript<Value>(key: DefaultsKey<Value>) -> Value {
        if let layers, let holdings = layers.holdings[key.name] {
            if let stack = layers.stack {
                if let value = stack.layerValue(of: key, in: holdings) { return value }
            } else {
                for case .some(let holding) in holdings {
                    if case .success(let value) = DefaultsLayerStack.decode(holding, as: Value.self) { return value }
                }
            }
        }
        guard let entry = entries[key.name] else { return registeredValue(of: key) }
        if let typed = entry.typed.flatMap({ $0 as? Value }) { return typed }
        if let json = entry.json, let value = try? json.decode(as: Value.self) { return value }
        if let storage { _ = storage.value(of: entry, for: key) }
        return registeredValue(of: key)
    }

    /// The registered default of `key` at the snapshot's instant, else its own.
    private func registeredValue<Value>(of key: DefaultsKey<Value>) -> Value {
        registered[key.name].flatMap { DefaultsStorage.decoded($0, as: Value.self) } ?? key.defaultValue
    }

    /// Whether `key` had a value in the back end or in a layer (as opposed to reading a registered
    /// or its own default).
    public func hasValue<Value>(for key: DefaultsKey<Value>) -> Bool {
        entries[key.name] != nil || layers?.holdings[key.name] != nil
    }

    /// The names of the keys that had a value, in the back end or in a layer.
    public var keys: Set<String> { Set(entries.keys).union(layers.map { Array($0.holdings.keys) } ?? []) }
}
