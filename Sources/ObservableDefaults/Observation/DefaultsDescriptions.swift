import KeyValueObserving

// Descriptions that never print a secret's value (`DefaultsKey.isSecret`): changes, store-wide
// changes and snapshots print `<redacted>` in its place, in `description`, `debugDescription` and
// `dump` (their mirrors) alike.

extension DefaultsChange: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `playbackSpeed: 1.0 → 1.5 (thisProcess, from store)`; a secret key's values read
    /// `<redacted>`.
    public var description: String {
        let isSecret = DefaultsKeyNames.isSecret(key)
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
        let isSecret = DefaultsKeyNames.isSecret(key)
        func shown(_ value: Value?) -> Any {
            guard let value else { return Optional<Value>.none as Any }
            return isSecret ? DefaultsKeyNames.redacted : value
        }
        return Mirror(
            self,
            children: [
                "key": key, "newValue": shown(newValue), "oldValue": shown(oldValue), "isPrior": isPrior, "origin": origin,
                "revision": revision as Any, "layer": layer,
            ])
    }
}

extension DefaultsStoreChange: CustomStringConvertible, CustomDebugStringConvertible {
    /// The keys, the origin and the values after the change (secret ones `<redacted>`).
    public var description: String {
        "keys \(keys.sorted()) (\(origin)\(revision.map { ", revision \($0)" } ?? "")): \(values)"
    }

    public var debugDescription: String { "DefaultsStoreChange(\(description))" }
}

extension DefaultsSnapshot: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Every key with a value, as JSON, sorted by name (secret ones `<redacted>`; a layer's value as
    /// its text).
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
            if let holdings = layers?.holdings[name], let first = holdings.lazy.compactMap({ $0 }).first {
                switch first {
                case .text(let text): return (name, text.text ?? "true")
                case .memory(let memory): return (name, (try? JSONValue(encoding: memory.value))?.compactText ?? "?")
                }
            }
            return (name, entries[name].flatMap(DefaultsStore.text(of:)) ?? "?")
        }
    }
}
