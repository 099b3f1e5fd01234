/// The changes of one `DefaultsStore.batch(_:)`, made through it and applied together when the
/// batch's body returns.
///
/// ```swift
/// store.batch { batch in
///     batch[.host] = "db2.example.com"
///     batch[.port] += 1            // reads see the batch's own changes
/// }
/// ```
///
/// Use it only inside the body it is given, on that thread: it is not `Sendable`.
public final class DefaultsBatch {
    let store: DefaultsStore
    /// The batch's changes by key (`entry` `nil`: removed), and the keys in the order first changed.
    var changes: [String: (entry: DefaultsStorage.Entry?, encodingFailure: DefaultsError?)] = [:]
    var order: [String] = []

    init(store: DefaultsStore) {
        self.store = store
    }

    /// The value of `key`: as this batch left it, else as the store holds it now.
    public subscript<Value>(key: DefaultsKey<Value>) -> Value {
        get {
            guard let change = changes[key.name] else { return store[key] }
            return store.storage.value(of: change.entry, for: key)
        }
        set { set(newValue, for: key) }
    }

    /// Sets the value of `key` when the batch is applied. A value that cannot be encoded (NaN or
    /// infinity inside it) is reported then, as by `DefaultsStore.set(_:for:)`.
    public func set<Value>(_ value: Value, for key: DefaultsKey<Value>) {
        let (entry, failure) = store.storage.entry(for: value, key: key.name)
        record(entry, failure, for: key.name)
    }

    /// Removes `key` when the batch is applied.
    public func removeValue<Value>(for key: DefaultsKey<Value>) {
        record(nil, nil, for: key.name)
    }

    private func record(_ entry: DefaultsStorage.Entry?, _ failure: DefaultsError?, for key: String) {
        if changes.updateValue((entry, failure), forKey: key) == nil { order.append(key) }
    }
}

@available(*, unavailable, message: "a DefaultsBatch is used only inside the batch's body, on its thread")
extension DefaultsBatch: Sendable {}
