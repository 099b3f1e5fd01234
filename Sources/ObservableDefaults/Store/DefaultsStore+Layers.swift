import Dispatch
import KeyValueObserving

/// A store's layers (`DefaultsLayer`): registered defaults, where a value comes from, and the
/// observation of the effective value of a layered store.
extension DefaultsStore {
    // MARK: Registered defaults

    /// Registers `defaults`, as `UserDefaults.register(defaults:)` does: what each key reads while
    /// no layer and not the back end holds a value of it, before its own default. Registered
    /// defaults are shared by every store of this process on the same file (or etcd prefix), are
    /// never written, and last until the process ends; registering a key again replaces its
    /// registered value. Observers of a key whose effective value this changes are told, on this
    /// thread.
    ///
    /// ```swift
    /// store.register(["playbackSpeed": 1.0, "hosts": ["a.example", "b.example"]])
    /// ```
    ///
    /// A registered value of another type than a key's reads as that key's type when its JSON
    /// decodes as it (`1` registered reads as `1.0` for a `Double` key), else the key's default.
    ///
    /// - Parameter defaults: a value per key name.
    public func register(_ defaults: [String: any Codable & Sendable]) {
        for (name, value) in defaults { _ = DefaultsKeyNames.offset(of: name, readAs: type(of: value)) }
        storage.register(defaults.sorted { $0.key < $1.key }.map { ($0.key, DefaultsStorage.Entry(typed: $0.value, json: nil)) })
    }

    /// Removes the registered defaults of `names` (see `register(_:)`).
    ///
    /// - Parameter names: the key names.
    public func unregister(_ names: some Sequence<String>) {
        storage.register(names.map { ($0, nil) })
    }

    // MARK: Where a value comes from

    /// Where the value of `key` comes from, and what every layer holds for it: the answer to "why is
    /// my setting ignored?".
    ///
    /// ```swift
    /// let source = store.source(of: speed)
    /// if source.isShadowed { print("the file's value is ignored:", source) }
    /// ```
    ///
    /// Values of a secret key (`DefaultsKey.isSecret`) are `<redacted>` in it.
    ///
    /// - Parameter key: the key.
    /// - Returns: which layer answers, and what each holds.
    public func source<Value>(of key: DefaultsKey<Value>) -> DefaultsValueSource {
        _source(of: key, revealingSecrets: false)
    }

    /// `source(of:)`, with a secret's values shown if `revealingSecrets` (`kvo-defaults --reveal`).
    package func _source<Value>(of key: DefaultsKey<Value>, revealingSecrets: Bool) -> DefaultsValueSource {
        let holdings = layerStack?.holdings(for: key.name, offset: key.offset).0 ?? []
        let isSecret = key.isSecret || layerStack?.holdsSecret(holdings) == true
        // A secret key's values are redacted in every layer; a secret layer's values in any key.
        let redactsKey = key.isSecret && !revealingSecrets
        func shown(_ text: String?) -> String? { redactsKey ? DefaultsKeyNames.redacted : text }
        var layers: [DefaultsValueSource.Layer] = []
        var answering: Int?
        if let layerStack {
            for index in layerStack.kinds.indices {
                let redacts = redactsKey || (layerStack.secretLayers[index] && !revealingSecrets)
                func shown(_ text: String?) -> String? { redacts ? DefaultsKeyNames.redacted : text }
                let holding = holdings.isEmpty ? nil : holdings[index]
                var problem: String?
                var value: String?
                var spelling: String?
                if let holding {
                    switch holding {
                    case .text(let text):
                        value = shown(text.text ?? "(a flag without a value)")
                        spelling = text.spelling
                    case .memory(let memory):
                        value = shown((try? JSONValue(encoding: memory.value))?.compactText ?? "\(type(of: memory.value))")
                    }
                    if case .failure(let failure) = DefaultsLayerStack.decode(holding, as: Value.self) {
                        // A secret's reason could quote it ("1.5 is not an Int").
                        problem = "does not decode as \(Value.self)" + (redacts ? "" : ": \(failure.reason)")
                    } else if answering == nil {
                        answering = layers.count
                    }
                }
                layers.append(
                    DefaultsValueSource.Layer(
                        kind: layerStack.kinds[index], place: layerStack.places[index], spelling: spelling, value: value, problem: problem,
                        isSecret: layerStack.secretLayers[index]))
            }
        }
        let entry = storage.entry(for: key.name)
        var storeProblem: String?
        if let entry, storage.kind(of: entry, for: key) != .store { storeProblem = "does not decode as \(Value.self)" }
        if answering == nil, entry != nil, storeProblem == nil { answering = layers.count }
        layers.append(
            DefaultsValueSource.Layer(
                kind: .store, place: location.description, spelling: nil,
                value: entry.map { shown(Self.text(of: $0)) ?? "?" }, problem: storeProblem))
        let registered = storage.registeredValues()[key.name]
        let registeredAnswers = storage.hasRegisteredValue(key)
        if answering == nil, registeredAnswers { answering = layers.count }
        layers.append(
            DefaultsValueSource.Layer(
                kind: .registered, place: "register(_:)", spelling: nil,
                value: registered.map { shown(Self.text(of: $0)) ?? "?" },
                problem: registered != nil && !registeredAnswers ? "does not decode as \(Value.self)" : nil))
        if answering == nil { answering = layers.count }
        layers.append(
            DefaultsValueSource.Layer(
                kind: .defaultValue, place: "DefaultsKey.defaultValue", spelling: nil,
                value: shown((try? JSONValue(encoding: key.defaultValue))?.compactText ?? "\(key.defaultValue)"), problem: nil))
        return DefaultsValueSource(key: key.name, layers: layers, answeringIndex: answering!, isSecret: isSecret)
    }

    /// An entry's value as compact JSON.
    static func text(of entry: DefaultsStorage.Entry) -> String? {
        DefaultsStorage.json(of: entry)?.compactText
    }

    // MARK: Observing a layered store

    /// `_observe(_:options:removingDuplicates:changeHandler:)` for a store with layers: the
    /// observers of the stack, told of the effective value (see `DefaultsLayerStack`).
    @usableFromInline
    func _observeLayered<Value>(
        _ stack: DefaultsLayerStack,
        _ key: DefaultsKey<Value>,
        options: KeyValueObservingOptions,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        changeHandler: @escaping @Sendable (DefaultsStore, DefaultsChange<Value>) -> Void
    ) -> KeyValueObservation {
        stack.forwardStorageChanges()
        // What the layers hold now, so that the first change is told from it.
        _ = stack.holdings(for: key.name, offset: key.offset)
        weak let store = self
        // The change travels in the new value, and in the old one for `.prior`.
        var carried = options.union(.new)
        if options.contains(.prior) { carried.insert(.old) }
        return stack.observe(DefaultsLayerStack.keyPath(at: key.offset), options: carried) { stack, change in
            guard let store, let value = change.isPrior ? change.oldValue : change.newValue, stack.isCurrent(value),
                let (old, new) = stack.effectiveChange(value, for: key)
            else { return }
            let isInitial = value.cause == .initial
            if !isInitial, let isDuplicate, isDuplicate(old.value, new.value) { return }
            changeHandler(
                store,
                DefaultsChange(
                    key: key.name,
                    newValue: options.contains(.new) && !change.isPrior ? new.value : nil,
                    oldValue: options.contains(.old) && !isInitial ? old.value : nil,
                    isPrior: change.isPrior, origin: value.origin,
                    revision: value.baseAfter.revision <= 0 || value.cause != .store ? nil : value.baseAfter.revision,
                    layer: change.isPrior ? old.kind : new.kind, isSecret: stack.isSecret(old) || stack.isSecret(new)))
        }
    }

    /// `values(for:options:buffering:)` for a store with layers.
    func _valuesLayered<Value>(
        _ stack: DefaultsLayerStack,
        for key: DefaultsKey<Value>,
        options: KeyValueObservingOptions,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        buffering: KeyValueObservationBuffering
    ) -> KeyValueObservationValues<Value> {
        stack.forwardStorageChanges()
        _ = stack.holdings(for: key.name, offset: key.offset)
        let isLayeredDuplicate = isDuplicate.map { Self.isLayeredDuplicate(key, in: stack, $0) }
        return stack._values(
            for: DefaultsLayerStack.keyPath(at: key.offset), options: options, isDuplicate: isLayeredDuplicate, buffering: buffering,
            transform: Self.effectiveValue(of: key))
    }

    /// Whether a change of a layered key changed its effective value to one `isDuplicate` calls
    /// equal to the one before (a sequence's duplicate test; the stack passes the change as both).
    static func isLayeredDuplicate<Value>(
        _ key: DefaultsKey<Value>, in stack: DefaultsLayerStack, _ isDuplicate: @escaping @Sendable (Value, Value) -> Bool
    ) -> @Sendable (DefaultsLayerStack.LayeredValue, DefaultsLayerStack.LayeredValue) -> Bool {
        weak let stack = stack
        return { _, value in
            guard value.cause != .initial else { return false }
            guard let stack, let (old, new) = stack.effectiveChange(value, for: key) else { return true }
            return isDuplicate(old.value, new.value)
        }
    }

    /// The effective value a sequence or a throttle of a layered store gets, or `nil` for a change
    /// that did not change it (or that a later one overtook).
    static func effectiveValue<Value>(
        of key: DefaultsKey<Value>
    ) -> @Sendable (DefaultsLayerStack, DefaultsLayerStack.LayeredValue) -> Value? {
        { stack, value in stack.isCurrent(value) ? stack.effectiveChange(value, for: key)?.new.value : nil }
    }
}

extension DefaultsLayerStack {
    /// Whether `resolved` came from a secret layer.
    func isSecret<Value>(_ resolved: Resolved<Value>) -> Bool {
        resolved.layer.map { secretLayers[$0] } ?? false
    }

    /// What `value`, a change of `key`'s layers or storage, is for `key`'s observers: the effective
    /// values before and after, or `nil` if it did not change what the key resolves to (a set of a
    /// key a layer shadows; a layer's change below the answering one).
    func effectiveChange<Value>(_ value: LayeredValue, for key: DefaultsKey<Value>) -> (old: Resolved<Value>, new: Resolved<Value>)? {
        let new = resolve(key, holdings: value.after, base: { value.baseAfter })
        switch value.cause {
        case .initial:
            return (new, new)
        case .store:
            // Shadowed: the layer that answers did not change.
            guard new.layer == nil else { return nil }
            return (resolve(key, holdings: value.before, base: { value.baseBefore }), new)
        case .layer:
            let old = resolve(key, holdings: value.before, base: { value.baseBefore })
            guard old.layer != new.layer || old.holding != new.holding else { return nil }
            return (old, new)
        }
    }
}

/// Where a key's value comes from, and what every layer of its store holds for it
/// (`DefaultsStore.source(of:)`): for the operator asking why a setting is ignored. Its
/// `description` is a table, one line per layer, first first. The values of a key declared secret,
/// and those of a secret layer (`DefaultsLayer.isSecret`), read `<redacted>`: they are redacted when
/// the source is made, so no description, dump or mirror can show them.
public struct DefaultsValueSource: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What one layer holds for the key.
    public struct Layer: Sendable, Hashable {
        /// The layer's kind.
        public let kind: DefaultsLayerKind
        /// Where it reads: `the arguments given`, `prefix PLAYER` (the environment), a directory's
        /// path, `a DefaultsMemoryLayer`, the store's file or etcd prefix, `register(_:)`,
        /// `DefaultsKey.defaultValue`.
        public let place: String
        /// Where it holds the key's value: `--playback-speed`, `PLAYER_PLAYBACK_SPEED`, a file's
        /// path; `nil` where it holds none, or for the back end and the defaults.
        public let spelling: String?
        /// The value it holds as text (`<redacted>` for a secret key or a secret layer); `nil` if it
        /// holds none.
        public let value: String?
        /// Why its value is skipped (it does not decode for the key's type), or `nil`.
        public let problem: String?
        /// Whether the layer is secret as a whole (`DefaultsLayer.isSecret`).
        public let isSecret: Bool

        init(kind: DefaultsLayerKind, place: String, spelling: String?, value: String?, problem: String?, isSecret: Bool = false) {
            self.kind = kind
            self.place = place
            self.spelling = spelling
            self.value = value
            self.problem = problem
            self.isSecret = isSecret
        }
    }

    /// The key's name.
    public let key: String
    /// Every layer, in the order they are read: the store's layers, then its back end
    /// (`.store`), its registered defaults and the key's own default.
    public let layers: [Layer]
    /// The index in `layers` of the one that answers.
    public let answeringIndex: Int
    /// Whether the key's values are secret when the source was made: the key was declared secret
    /// (all its values read `<redacted>`), or a secret layer holds a value of it (that layer's
    /// value reads `<redacted>`).
    public let isSecret: Bool

    /// The layer that answers.
    public var answering: Layer { layers[answeringIndex] }

    /// Whether the back end holds a value of the key that a layer above it shadows: a set of the
    /// key is stored and does not change what the key reads.
    public var isShadowed: Bool {
        answering.kind != .store && answering.kind != .registered && answering.kind != .defaultValue
    }

    /// The layers above the back end that hold a value that decodes: what a set of the key does not
    /// change.
    public var shadowingLayers: [Layer] {
        layers.prefix { $0.kind != .store }.filter { $0.value != nil && $0.problem == nil }
    }

    public var description: String {
        var lines = ["\(key): \(answering.value ?? "?") from \(answering.kind) (\(answering.spelling ?? answering.place))"]
        for (index, layer) in layers.enumerated() {
            let mark = index == answeringIndex ? "→" : " "
            let held = layer.value.map { "\($0)" + (layer.spelling.map { " (\($0))" } ?? "") } ?? "nothing"
            let problem = layer.problem.map { "; skipped: \($0)" } ?? ""
            lines.append("  \(mark) \(layer.kind.rawValue.padding(12)) \(layer.place): \(held)\(problem)")
        }
        return lines.joined(separator: "\n")
    }

    public var debugDescription: String { description }
}

extension String {
    /// The string padded with spaces to `width` characters.
    fileprivate func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
