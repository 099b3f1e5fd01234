import KeyValueObserving

// Descriptions that never print a secret's value (a key declared secret, or a value of a secret
// layer): changes, store-wide changes and snapshots print `<redacted>` in its place, in
// `description`, `debugDescription`, `String(reflecting:)`, `dump` and `Mirror` alike.

extension DefaultsChange: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `playbackSpeed: 1.0 → 1.5 (thisProcess, from store)`; a secret key's values read
    /// `<redacted>`.
    public var description: String {
        let isSecret = isSecret
        func shown(_ value: Value?) -> String {
            guard let value else { return "–" }
            return isSecret ? DefaultsKeyNames.redacted : String(describing: value)
        }
        var text = "\(key): \(shown(oldValue)) → \(shown(newValue)) (\(origin), from \(layer)"
        if let revision { text += ", revision \(revision)" }
        return text + (isPrior ? ", prior)" : ")")
    }

    public var debugDescription: String { "DefaultsChange(\(description))" }

    public var customMirror: Mirror {
        let isSecret = isSecret
        func shown(_ value: Value?) -> Any {
            guard let value else { return Optional<Value>.none as Any }
            return isSecret ? DefaultsKeyNames.redacted : value
        }
        return Mirror(
            self,
            children: [
                "key": key, "newValue": shown(newValue), "oldValue": shown(oldValue), "isPrior": isPrior, "origin": origin,
                "revision": revision as Any, "layer": layer, "isSecret": isSecret,
            ])
    }
}

extension DefaultsStoreChange: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The keys, the origin and the values after the change (secret ones `<redacted>`).
    public var description: String {
        "keys \(keys.sorted()) (\(origin)\(revision.map { ", revision \($0)" } ?? "")): \(values)"
    }

    public var debugDescription: String { "DefaultsStoreChange(\(description))" }

    /// The keys, the origin, the revision and the values, as the snapshot's mirror shows them
    /// (secret ones `<redacted>`).
    public var customMirror: Mirror {
        Mirror(self, children: ["keys": keys, "origin": origin, "revision": revision as Any, "values": values], displayStyle: .struct)
    }
}

extension DefaultsSnapshot: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Every key with a value, as JSON, sorted by name (a layer's value as its text); the values of
    /// a secret key, and those of a secret layer, read `<redacted>`.
    public var description: String {
        "[" + describedValues().map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "]"
    }

    public var debugDescription: String { "DefaultsSnapshot(\(description))" }

    public var customMirror: Mirror {
        Mirror(self, children: describedValues().map { (label: $0.key, value: $0.value as Any) }, displayStyle: .dictionary)
    }

    /// Each key's value as text, the first layer's for a layered key.
    private func describedValues() -> [(key: String, value: String)] {
        keys.sorted().map { name in
            if DefaultsKeyNames.isSecret(name) { return (name, DefaultsKeyNames.redacted) }
            if let layers, let holdings = layers.holdings[name], let index = holdings.firstIndex(where: { $0 != nil }) {
                if layers.secretLayers[index] { return (name, DefaultsKeyNames.redacted) }
                switch holdings[index]! {
                case .text(let text): return (name, text.text ?? "true")
                case .memory(let memory): return (name, (try? JSONValue(encoding: memory.value))?.compactText ?? "?")
                }
            }
            return (name, entries[name].flatMap(DefaultsStore.text(of:)) ?? "?")
        }
    }
}
