import KeyValueObserving

/// The layers of one `DefaultsStore` (`DefaultsLayer`) above its storage's back end: what a read
/// resolves to, and the observable object the store's observers register on, so that they see the
/// effective value (a change of any layer that changes what a key resolves to, and no shadowed set).
///
/// Per key (by its interned offset) it keeps what each layer holds (`Slot`), read from the layers
/// the first time the key is read or observed, and again when a layer says the key changed (a
/// memory layer's set, a directory's file). The stack's state is guarded by its storage's lock, so
/// that a read checks the key's slot and the storage's read cache under one lock
/// (`cachedValue(offset:)`). Layer sources (their own locks) and the storage are never called with
/// that lock held, as the storage never calls out with it held.
@usableFromInline
package final class DefaultsLayerStack: KeyValueObservable, @unchecked Sendable {
    // Invariant: `state` is only accessed with `lock` (the storage's) held; `layers`, `kinds`,
    // `storage` and `errorHandler` are set in init and never change.

    /// One layer: a text source (arguments, environment, directory) or a memory layer.
    enum Layer: Sendable {
        case text(any TextLayerSource)
        case memory(DefaultsMemoryLayer)
    }

    /// What one layer holds for one key.
    package enum UpperValue: Sendable, Equatable {
        case text(LayerText)
        case memory(DefaultsMemoryLayer.MemoryValue)

        package static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs, rhs) {
            case (.text(let left), .text(let right)): left == right
            case (.memory(let left), .memory(let right)): left.generation == right.generation
            default: false
            }
        }
    }

    /// What every layer holds for one key: one element per layer, `nil` where it holds nothing;
    /// empty when none holds anything.
    package typealias Holdings = [UpperValue?]

    struct Slot {
        var holdings: Holdings
        /// Bumped at each change of `holdings`: a change computed from an older one is not stored
        /// nor delivered.
        var version: UInt64
        /// The value the last read resolved to when a layer answered (a
        /// `DefaultsStorage.CachedValue` of its type), and that layer.
        var cached: (box: AnyObject, layer: Int)?
    }

    struct State {
        /// Indexed by `(offset - DefaultsKeyNames.firstKeyOffset) / 8`.
        var slots: [Slot?] = []
        var version: UInt64 = 0
        /// The storage's changes forwarded to this stack's observers (made at the first observer).
        var forwarding: KeyValueObservation?
        var forwardingStore: KeyValueObservation?
        /// Problems reported, so that a read loop does not repeat them.
        var reported: Set<String> = []
        /// Why each layer holds nothing now (`TextLayerSource.unavailability`), `nil` while it is there.
        var unavailable: [String?] = []
    }

    let layers: [Layer]
    /// The kind of each layer.
    package let kinds: [DefaultsLayerKind]
    /// Whether each layer is secret as a whole (`DefaultsLayer.isSecret`).
    package let secretLayers: [Bool]
    /// Where each layer reads from, for `source(of:)`: the directory, the prefix.
    let places: [String]
    @usableFromInline let storage: DefaultsStorage
    let errorHandler: (@Sendable (DefaultsError) -> Void)?
    /// The storage's lock (see the type's description).
    let lock: Lock
    @exclusivity(unchecked) var state = State()

    /// The stack of `layers` over `storage`, reporting problems to `errorHandler` (standard error
    /// without one).
    init(layers descriptors: [DefaultsLayer], storage: DefaultsStorage, errorHandler: (@Sendable (DefaultsError) -> Void)?) {
        var layers: [Layer] = []
        var places: [String] = []
        for descriptor in descriptors {
            switch descriptor.source {
            case .arguments(let arguments):
                layers.append(.text(ArgumentLayer(arguments)))
                places.append("the arguments given")
            case .environment(let prefix, let variables):
                layers.append(.text(EnvironmentLayer(prefix: prefix, variables: variables)))
                places.append("prefix \(prefix)")
            case .directory(let path, let watching):
                var interval: Duration?
                if case .polling(let every) = watching { interval = every }
                layers.append(.text(DirectoryLayer(directory: path, pollingInterval: interval)))
                places.append(path)
            case .memory(let layer):
                layers.append(.memory(layer))
                places.append("a DefaultsMemoryLayer")
            }
        }
        self.layers = layers
        self.kinds = descriptors.map(\.kind)
        self.secretLayers = descriptors.map(\.isSecret)
        self.places = places
        self.storage = storage
        self.lock = storage.lock
        self.errorHandler = errorHandler
        state.unavailable = layers.map { layer in
            if case .text(let source) = layer { source.unavailability } else { nil }
        }
        super.init()
        for (index, layer) in layers.enumerated() {
            switch layer {
            case .memory(let memory):
                memory.attach(self)
            case .text(let source):
                for problem in source.problems { reportOnce(problem: problem, layer: index) }
                if let environment = source as? EnvironmentLayer {
                    for problem in EnvironmentLayer.collisions(among: DefaultsKeyNames.allNames(), prefix: environment.prefix) {
                        reportOnce(problem: problem, layer: index)
                    }
                }
                weak let stack = self
                source.startWatching { names in stack?.layerChanged(at: index, names: names, origin: .anotherProcess) }
            }
        }
        // Now, not at the first observer: a tracked observation's read registers on this stack
        // without `DefaultsStore` knowing.
        forwardStorageChanges()
    }

    deinit {
        for case .text(let source) in layers { source.stop() }
    }

    // MARK: Reading

    /// Whether a secret layer holds a value in `holdings` (`DefaultsValueSource.isSecret`).
    package func holdsSecret(_ holdings: Holdings) -> Bool {
        zip(holdings, secretLayers).contains { $0 != nil && $1 }
    }

    /// The cached value of the key interned at `offset`, once the key was read: the layer's that
    /// answered it, or, where no layer holds the key, the storage's read cache's
    /// (`DefaultsStorage.cachedValue(offset:)`), both under the one lock. `nil` if there is none,
    /// or it is stale.
    @usableFromInline
    func cachedValue(offset: Int) -> AnyObject? {
        let index = (offset &- DefaultsKeyNames.firstKeyOffset) >> 3
        lock.lock()
        var box: AnyObject?
        // A `switch` borrows the slot where `if let` would copy it.
        if index < state.slots.count, case .some(let slot) = state.slots[index] {
            box = slot.holdings.isEmpty ? storage.currentCachedValue(at: index) : slot.cached?.box
        }
        lock.unlock()
        return box
    }

    /// The key path a tracked observation's read of the key at `offset` records.
    @usableFromInline
    static func _keyPath(at offset: Int) -> AnyKeyPath {
        keyPath(at: offset)
    }

    /// The effective value of `key` (`resolvedValue(for:)`), the cached one if it is current. A
    /// tracked observation's evaluation records the read.
    @inlinable
    func value<Value>(for key: DefaultsKey<Value>) -> Value {
        _reportExplicitRead(offset: key.offset, key: { Self._keyPath(at: key.offset) }, of: Void.self)
        if let cached = cachedValue(offset: key.offset) as? DefaultsStorage.CachedValue<Value> { return cached.value }
        return resolvedValue(for: key)
    }

    /// The effective value of `key`: the first layer holding a value that decodes as `Value`, else
    /// the storage's (its value, the registered default, the key's default). The caller reported
    /// the read to a tracked observation, and found no `cachedValue(offset:)` of its type.
    @usableFromInline
    func resolvedValue<Value>(for key: DefaultsKey<Value>) -> Value {
        let index = (key.offset &- DefaultsKeyNames.firstKeyOffset) >> 3
        let (holdings, version) = self.holdings(for: key.name, offset: key.offset)
        if holdings.isEmpty { return storage.value(for: key) }
        let resolved = resolve(
            key, holdings: holdings,
            base: { DefaultsStorage.KeyValue(name: key.name, entry: storage.entry(for: key.name), origin: .thisProcess) })
        if let layer = resolved.layer {
            let box = DefaultsStorage.CachedValue(resolved.value)
            lock.withLock {
                if state.slots[index]?.version == version { state.slots[index]?.cached = (box, layer) }
            }
        }
        return resolved.value
    }

    /// What the layers hold for the key `name` (interned at `offset`), and the slot's version: read
    /// from the layers (without the stack's lock) the first time.
    func holdings(for name: String, offset: Int) -> (Holdings, UInt64) {
        let index = (offset &- DefaultsKeyNames.firstKeyOffset) >> 3
        if let slot = lock.withLock({ index < state.slots.count ? state.slots[index] : nil }) { return (slot.holdings, slot.version) }
        let holdings = read(name)
        return lock.withLock {
            if index >= state.slots.count { state.slots.append(contentsOf: repeatElement(nil, count: index + 1 - state.slots.count)) }
            if let slot = state.slots[index] { return (slot.holdings, slot.version) }
            state.version &+= 1
            state.slots[index] = Slot(holdings: holdings, version: state.version)
            return (holdings, state.version)
        }
    }

    /// What each layer holds for `name` now (empty if none holds anything). Called without the
    /// stack's lock: each source takes its own.
    func read(_ name: String) -> Holdings {
        var holdings: Holdings = []
        for (index, layer) in layers.enumerated() {
            let value: UpperValue? =
                switch layer {
                case .text(let source): source.text(forKey: name).map(UpperValue.text)
                case .memory(let memory): memory.value(forName: name).map(UpperValue.memory)
                }
            if case .text(let source) = layer, let environment = source as? EnvironmentLayer, let problem = environment.noteKey(name) {
                reportOnce(problem: problem, layer: index)
            }
            guard let value else { continue }
            if holdings.isEmpty { holdings = Holdings(repeating: nil, count: layers.count) }
            holdings[index] = value
        }
        return holdings
    }

    /// A key's effective value and where it came from: `layer` is the index of the layer that
    /// answered, `nil` for the storage (then `kind` says whether its back end, its registered
    /// default or the key's default).
    struct Resolved<Value> {
        let value: Value
        let layer: Int?
        let kind: DefaultsLayerKind
        /// What answered, to tell whether a layer's change changed the answer.
        let holding: UpperValue?
    }

    /// Resolves `key` over `holdings` and the storage's value `base` (read only if no layer answers).
    /// A value a layer holds that does not decode as `Value` is reported once, and the next layer
    /// answers.
    func resolve<Value>(
        _ key: DefaultsKey<Value>, holdings: Holdings, base: () -> DefaultsStorage.KeyValue
    ) -> Resolved<Value> {
        if let (value, index) = layerValueAndIndex(of: key, in: holdings) {
            return Resolved(value: value, layer: index, kind: kinds[index], holding: holdings[index])
        }
        let base = base()
        let value = storage.value(after: base, for: key)
        let kind = base.revision < 0 ? storage.kind(after: base, for: key) : storage.kind(of: base.entry, for: key)
        return Resolved(value: value, layer: nil, kind: kind, holding: nil)
    }

    /// The value of the first layer in `holdings` that holds one of `key` decoding as `Value`.
    func layerValue<Value>(of key: DefaultsKey<Value>, in holdings: Holdings) -> Value? {
        layerValueAndIndex(of: key, in: holdings)?.value
    }

    /// `layerValue(of:in:)` and the index of the layer.
    func layerValueAndIndex<Value>(of key: DefaultsKey<Value>, in holdings: Holdings) -> (value: Value, index: Int)? {
        for (index, holding) in holdings.enumerated() {
            guard let holding else { continue }
            switch Self.decode(holding, as: Value.self) {
            case .success(let value):
                return (value, index)
            case .failure(let failure):
                reportUndecodable(holding, layer: index, key: key.name, as: Value.self, reason: failure.reason)
            }
        }
        return nil
    }

    /// `holding` as a `Value`.
    static func decode<Value: Decodable>(_ holding: UpperValue, as _: Value.Type) -> Result<Value, LayerDecodingFailure> {
        switch holding {
        case .text(let text):
            return LayerTextDecoding.decode(text, as: Value.self)
        case .memory(let memory):
            if let value = memory.value as? Value { return .success(value) }
            do {
                return .success(try JSONValue(encoding: memory.value).decode(as: Value.self))
            } catch {
                return .failure(
                    LayerDecodingFailure(reason: "it holds a \(type(of: memory.value)), which does not decode as \(Value.self)"))
            }
        }
    }

    // MARK: Reporting

    /// Tells the store's error handler (or standard error) of `error`, once per `cause`.
    func reportOnce(_ error: DefaultsError, cause: String) {
        guard lock.withLock({ state.reported.insert(cause).inserted }) else { return }
        if let errorHandler { errorHandler(error) } else { DefaultsStorage.printToStandardError(error) }
    }

    /// Reports a problem of the layer at `layer` (a sentence of the source's: it holds no value).
    func reportOnce(problem: String, layer: Int) {
        reportOnce(
            DefaultsError(.layerProblem, location: storage.backend.location, reason: "\(kinds[layer]) layer: \(problem)"),
            cause: "\(layer)\u{0}\(problem)")
    }

    /// Reports that the layer at `layer` holds a value of `key` that does not decode as `Value`.
    func reportUndecodable<Value>(_ holding: UpperValue, layer: Int, key: String, as type: Value.Type, reason: String) {
        let isSecret = secretLayers[layer] || DefaultsKeyNames.isSecret(key)
        let (found, spelling): (String?, String) =
            switch holding {
            case .text(let text): (text.text, text.spelling)
            case .memory(let memory): ((try? JSONValue(encoding: memory.value))?.compactText, "a DefaultsMemoryLayer")
            }
        let cause: String =
            switch holding {
            case .text(let text): "\(layer)\u{0}\(key)\u{0}\(Value.self)\u{0}\(text.text ?? "\u{1}")"
            case .memory(let memory): "\(layer)\u{0}\(key)\u{0}\(Value.self)\u{0}\(memory.generation)"
            }
        reportOnce(
            DefaultsError(
                .layerProblem, location: storage.backend.location, key: key, found: found, isSecret: isSecret,
                reason: "the \(kinds[layer]) layer's value of key '\(key)' (\(spelling)) does not decode as \(Value.self)"
                    // A secret's reason is left out: it can quote the value, or a part of it.
                    + (isSecret ? "; " : ": \(reason); ") + "the next layer answers"),
            cause: cause)
    }
}

extension DefaultsStorage {
    /// Where the value of `entry` (the storage's, `nil` if absent) comes from for `key`: the back end,
    /// the registered defaults or the key's default.
    func kind<Value>(of entry: Entry?, for key: DefaultsKey<Value>) -> DefaultsLayerKind {
        if let entry, Self.decoded(entry, as: Value.self) != nil { return .store }
        return absentKind(for: key)
    }
}
