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
    /// Every key with a value, sorted by name, each with the value that answers (JSON, or a layer's
    /// text) and, where more than one source holds it, which answers and what the others hold:
    /// `[port: 9000 from store (arguments: abc, skipped: does not decode as Int), speed: 1.5]`. A
    /// value is marked skipped where the store knows the key's type (a `DefaultsKey` made of it, a
    /// registered default, a decoded configuration type) and that type's read skips it; the values
    /// of a secret key, and those of a secret layer, read `<redacted>`.
    public var description: String {
        "[" + describedValues().map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "]"
    }

    public var debugDescription: String { "DefaultsSnapshot(\(description))" }

    public var customMirror: Mirror {
        Mirror(self, children: describedValues().map { (label: $0.key, value: $0.value as Any) }, displayStyle: .dictionary)
    }

    /// Each key's description (see `description`).
    private func describedValues() -> [(key: String, value: String)] {
        keys.sorted().map { ($0, describedValue(of: $0)) }
    }

    /// What one source holds of a key, as a snapshot shows it.
    private struct Holding {
        let kind: DefaultsLayerKind
        let text: String
        let isSecret: Bool
        /// Why the key's type skips it, or `nil`.
        let skipped: String?
    }

    /// How `name` is shown: its only value, or the one that answers, where from, and the others.
    private func describedValue(of name: String) -> String {
        let type = DefaultsKeyNames.knownType(of: name)
        var holdings: [Holding] = []
        if let layers, let held = layers.holdings[name] {
            for (index, holding) in held.enumerated() {
                guard let holding else { continue }
                let text: String =
                    switch holding {
                    case .text(let text): text.text ?? "true"
                    case .memory(let memory): (try? JSONValue(encoding: memory.value))?.compactText ?? "?"
                    }
                let skipped = type.flatMap { Self.skipReason(of: holding, as: $0) }
                holdings.append(Holding(kind: layers.kinds[index], text: text, isSecret: layers.secretLayers[index], skipped: skipped))
            }
        }
        if let entry = entries[name] {
            let skipped = type.flatMap { Self.skipReason(of: entry, as: $0) }
            holdings.append(Holding(kind: .store, text: DefaultsStore.text(of: entry) ?? "?", isSecret: false, skipped: skipped))
        }
        let isSecretKey = DefaultsKeyNames.isSecret(name)
        func shown(_ holding: Holding) -> String { isSecretKey || holding.isSecret ? DefaultsKeyNames.redacted : holding.text }
        // The back end's value alone, as it reads: no need to say where it is from.
        if holdings.count == 1, holdings[0].kind == .store, holdings[0].skipped == nil { return shown(holdings[0]) }
        let answering = holdings.firstIndex { $0.skipped == nil }
        var text: String
        if let answering {
            text = "\(shown(holdings[answering])) from \(holdings[answering].kind)"
        } else if let entry = registered[name], type.map({ Self.skipReason(of: entry, as: $0) == nil }) ?? true {
            text = "\(isSecretKey ? DefaultsKeyNames.redacted : DefaultsStore.text(of: entry) ?? "?") from registered"
        } else {
            text = "the key's default"
        }
        let others = holdings.indices.filter { $0 != answering }.map { index in
            let holding = holdings[index]
            return "\(holding.kind): \(shown(holding)), " + (holding.skipped.map { "skipped: \($0)" } ?? "shadowed")
        }
        if !others.isEmpty { text += " (" + others.joined(separator: "; ") + ")" }
        return text
    }

    /// Why a read as `type` skips `holding`, or `nil` if it decodes.
    private static func skipReason<Value: Decodable>(of holding: DefaultsLayerStack.UpperValue, as type: Value.Type) -> String? {
        if case .success = DefaultsLayerStack.decode(holding, as: Value.self) { return nil }
        return "does not decode as \(Value.self)"
    }

    /// Why a read as `type` skips `entry`, or `nil` if it decodes.
    private static func skipReason<Value: Decodable>(of entry: DefaultsStorage.Entry, as type: Value.Type) -> String? {
        DefaultsStorage.decoded(entry, as: Value.self) == nil ? "does not decode as \(Value.self)" : nil
    }
}

// Mirrors of the types that hold values without printing them: `dump` and `Mirror` would otherwise
// reach their stored values (a store's storage, a memory layer's dictionary, a layer's arguments or
// variables), a secret's included. They show where the values are, never what they are.

extension DefaultsStore: CustomReflectable {
    /// The store's location and layers (each its kind, where it reads and whether it is secret);
    /// no value: print `snapshot()` for those, redacted where secret.
    public var customMirror: Mirror {
        var layers: [String] = []
        if let layerStack {
            for index in layerStack.kinds.indices {
                let secret = layerStack.secretLayers[index] ? ", secret" : ""
                layers.append("\(layerStack.kinds[index]) (\(layerStack.places[index])\(secret))")
            }
        }
        return Mirror(self, children: ["location": location, "layers": layers], displayStyle: .class)
    }
}

extension DefaultsMemoryLayer: CustomReflectable {
    /// The names of the keys the layer holds, sorted; no value (a store may hold the layer as a
    /// secret one).
    public var customMirror: Mirror {
        Mirror(self, children: ["keys": keys.sorted()], displayStyle: .class)
    }
}

extension DefaultsLayer: CustomReflectable {
    /// The layer's kind, whether it is secret, and where it reads: the directory, the environment's
    /// prefix and the names of the variables given, the number of arguments given; no value (an
    /// argument or a variable may hold a secret key's value in a layer that is not secret).
    public var customMirror: Mirror {
        var children: KeyValuePairs<String, Any> = [:]
        switch source {
        case .arguments(let arguments):
            children = ["kind": kind, "isSecret": isSecret, "argumentCount": arguments.count]
        case .environment(let prefix, let variables):
            children = ["kind": kind, "isSecret": isSecret, "prefix": prefix, "variableNames": variables.map { $0.keys.sorted() } as Any]
        case .directory(let path, let watching):
            children = ["kind": kind, "isSecret": isSecret, "directory": path, "watching": watching]
        case .memory(let layer):
            children = ["kind": kind, "isSecret": isSecret, "layer": layer]
        }
        return Mirror(self, children: children, displayStyle: .struct)
    }
}

extension DefaultsBatch: CustomReflectable {
    /// The names of the keys the batch changed so far, in order; no value.
    public var customMirror: Mirror {
        Mirror(self, children: ["store": store, "changedKeys": order], displayStyle: .class)
    }
}
