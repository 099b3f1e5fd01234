import KeyValueObserving

/// Registered defaults (`DefaultsStore.register(_:)`): what an absent key reads before its own
/// default, shared by every store of this process on the storage (as `UserDefaults`' registration
/// domain is by the process), never written.
extension DefaultsStorage {
    /// Registers `defaults` (a value per key name; `nil` removes one) and tells the observers of
    /// each key whose value they change (those the storage holds no value for), then the
    /// store-wide ones.
    func register(_ defaults: [(key: String, entry: Entry?)]) {
        guard !defaults.isEmpty else { return }
        let deliveries: [Delivery] = lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            var deliveries: [Delivery] = []
            var changed: Set<String> = []
            for (key, entry) in defaults {
                let old = state.registered[key]
                state.registered[key] = entry
                // A key the storage holds is not changed by its registered default.
                guard state.values[key] == nil, old != nil || entry != nil, _mayHaveObservers else { continue }
                state.version &+= 1
                state.keyVersions[key] = state.version
                changed.insert(key)
                // The registered entries themselves travel, so that the old one reads as it was.
                let before = KeyValue(
                    name: key, entry: old, origin: .thisProcess, revision: Self.registeredRevision, version: state.version)
                let after = KeyValue(
                    name: key, entry: entry, origin: .thisProcess, revision: Self.registeredRevision, version: state.version)
                deliveries.append(.key(old: before, new: after, isPrior: false))
            }
            let priors = deliveries.map { delivery -> Delivery in
                guard case .key(let old, let new, _) = delivery else { return delivery }
                return .key(old: old, new: new, isPrior: true)
            }
            let record = changeRecord(keys: changed, origin: .thisProcess).map { [Delivery.change($0)] } ?? []
            return priors + deliveries + record
        }
        deliver(deliveries)
    }

    /// The registered defaults now.
    func registeredValues() -> [String: Entry] {
        lock.withLock { state.registered }
    }

    /// The storage's values and registered defaults now, as a snapshot.
    func snapshot() -> DefaultsSnapshot {
        let (values, registered, sequence) = lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            return (state.values, state.registered, state.storeChanges)
        }
        var snapshot = DefaultsSnapshot(entries: values, registered: registered, storage: self)
        snapshot.generation.storeChanges = sequence
        return snapshot
    }
}
