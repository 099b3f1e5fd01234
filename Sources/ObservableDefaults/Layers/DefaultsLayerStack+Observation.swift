import KeyValueObserving

/// How a layered store's observers hear of changes: each key is an explicitly notified key of the
/// stack (`\DefaultsLayerStack[_key: offset]`, the storage's offset of its name), carrying a
/// `LayeredValue`: what the layers and the storage held before and after the change. The handler
/// resolves both for its key's type and calls the observer only when the effective value changed
/// (see `DefaultsStore._observe`). The stack hears of the storage's changes (a set through any
/// store on the same file, another process's write) through one observer of every key of the
/// storage, made with its first observer.
extension DefaultsLayerStack: _ExplicitlyNotifiedKeys {
    /// One key's change as the stack's observers get it: both states, so that a handler can tell
    /// whether it changed the key's effective value for its type (passed as old and new value
    /// alike).
    package struct LayeredValue: Sendable {
        package enum Cause: Sendable, Equatable {
            /// `.initial`: before and after are now.
            case initial
            /// The storage's value changed (a set, another process, registered defaults).
            case store
            /// The layer at this index changed.
            case layer(Int)
        }

        let name: String
        let before: Holdings
        let after: Holdings
        /// The storage's value before and after (its origin, revision and version).
        let baseBefore: DefaultsStorage.KeyValue
        let baseAfter: DefaultsStorage.KeyValue
        let cause: Cause
        let origin: DefaultsChangeOrigin
        /// The slot's version for a layer's change (0: no staleness check).
        let version: UInt64
        let offset: Int
    }

    /// A store-wide change as the stack's observers get it.
    package struct LayeredStoreChange: Sendable {
        let keys: Set<String>
        let origin: DefaultsChangeOrigin
        let revision: Int64?
        let values: DefaultsSnapshot
    }

    package static func _explicitKey(for keyPath: AnyKeyPath) -> (offset: Int, key: AnyKeyPath)? {
        if keyPath == \DefaultsLayerStack._storeChange { return (DefaultsKeyNames.changesOffset, \DefaultsLayerStack._storeChange) }
        if keyPath == \DefaultsLayerStack._layerStatuses { return (DefaultsKeyNames.statusOffset, \DefaultsLayerStack._layerStatuses) }
        return keyPaths.withLock { table in table.offsets[keyPath].map { ($0, table.keyPaths[$0]!) } }
    }

    package static func _explicitKeyName(for keyPath: AnyKeyPath) -> String? {
        guard let (offset, _) = _explicitKey(for: keyPath) else { return nil }
        switch offset {
        case DefaultsKeyNames.changesOffset: return "changes"
        case DefaultsKeyNames.statusOffset: return "layerStatuses"
        default: return DefaultsKeyNames.name(at: offset)
        }
    }

    struct KeyPathTable {
        var keyPaths: [Int: KeyPath<DefaultsLayerStack, LayeredValue>] = [:]
        var offsets: [AnyKeyPath: Int] = [:]
    }

    static let keyPaths = Locked(KeyPathTable())

    /// The key path of the key interned at `offset`, made the first time.
    static func keyPath(at offset: Int) -> KeyPath<DefaultsLayerStack, LayeredValue> {
        keyPaths.withLock { table in
            if let keyPath = table.keyPaths[offset] { return keyPath }
            let keyPath = \DefaultsLayerStack[_key: offset]
            table.keyPaths[offset] = keyPath
            table.offsets[keyPath] = offset
            return keyPath
        }
    }

    /// The key interned at `offset` now (what `.initial` reads).
    package subscript(_key offset: Int) -> LayeredValue {
        let name = DefaultsKeyNames.name(at: offset)
        let (holdings, _) = holdings(for: name, offset: offset)
        let base = storage[_key: offset]
        return LayeredValue(
            name: name, before: holdings, after: holdings, baseBefore: base, baseAfter: base, cause: .initial, origin: .thisProcess,
            version: 0, offset: offset)
    }

    /// What the store-wide observers get (nothing reads it: they ask for no `.initial`).
    package var _storeChange: LayeredStoreChange {
        LayeredStoreChange(keys: [], origin: .thisProcess, revision: nil, values: snapshot())
    }

    /// Whether `value` is still the newest change of its key (a layer's change that a later one
    /// overtook is not delivered; the storage's are checked by the storage).
    func isCurrent(_ value: LayeredValue) -> Bool {
        switch value.cause {
        case .initial: return true
        case .store: return storage.isCurrent(value.baseAfter)
        case .layer:
            let index = (value.offset &- DefaultsKeyNames.firstKeyOffset) >> 3
            return lock.withLock { index < state.slots.count && state.slots[index]?.version == value.version }
        }
    }

    // MARK: Forwarding the storage's changes

    /// Makes the storage's observer of every key, which tells this stack's observers of the
    /// storage's changes (once; called at each registration).
    func forwardStorageChanges() {
        guard lock.withLock({ state.forwarding == nil }) else { return }
        weak let stack = self
        let token = storage.observe(\DefaultsStorage._anyKeyChange, options: [.old, .new]) { storage, change in
            guard let stack, let old = change.oldValue, let new = change.newValue, storage.isCurrent(new) else { return }
            stack.storageChanged(from: old, to: new)
        }
        let extra: KeyValueObservation? = lock.withLock {
            if state.forwarding == nil {
                state.forwarding = token
                return nil
            }
            return token
        }
        extra?.invalidate()
    }

    /// Makes the storage's store-wide observer that tells this stack's (once).
    func forwardStoreChanges() {
        forwardStorageChanges()
        guard lock.withLock({ state.forwardingStore == nil }) else { return }
        weak let stack = self
        let token = storage.observe(\DefaultsStorage._storeChange, options: [.new]) { _, change in
            guard let stack, let record = change.newValue else { return }
            // The keys a layer holds are shadowed: their change is not the store's.
            let keys = record.keys.filter { name in
                guard let offset = DefaultsKeyNames.existingOffset(of: name) else { return true }
                return stack.holdings(for: name, offset: offset).0.isEmpty
            }
            guard !keys.isEmpty else { return }
            stack.notifyStore(keys: Set(keys), origin: record.origin, revision: record.revision)
        }
        let extra: KeyValueObservation? = lock.withLock {
            if state.forwardingStore == nil {
                state.forwardingStore = token
                return nil
            }
            return token
        }
        extra?.invalidate()
    }

    /// The storage's value of a key changed: tell the key's observers here (the handler skips it
    /// where a layer shadows the key).
    func storageChanged(from old: DefaultsStorage.KeyValue, to new: DefaultsStorage.KeyValue) {
        guard let offset = DefaultsKeyNames.existingOffset(of: new.name), _mayHaveObservers(atOffset: offset) else { return }
        let (holdings, _) = holdings(for: new.name, offset: offset)
        let value = LayeredValue(
            name: new.name, before: holdings, after: holdings, baseBefore: old, baseAfter: new, cause: .store, origin: new.origin,
            version: 0, offset: offset)
        _notifyExplicitKey(offset: offset, key: { Self.keyPath(at: offset) }, from: value, to: value, phases: [.prior, .change])
    }

    /// Tells the store-wide observers of `keys` changed.
    func notifyStore(keys: Set<String>, origin: DefaultsChangeOrigin, revision: Int64?) {
        guard _mayHaveObservers(atOffset: DefaultsKeyNames.changesOffset) else { return }
        let record = LayeredStoreChange(keys: keys, origin: origin, revision: revision, values: snapshot())
        _notifyExplicitKey(
            offset: DefaultsKeyNames.changesOffset, key: { \DefaultsLayerStack._storeChange }, from: record, to: record, phases: .change)
    }

    // MARK: Layers' changes

    /// The memory layer `layer` changed the keys `names`.
    func layerChanged(_ layer: DefaultsMemoryLayer, names: Set<String>) {
        for (index, candidate) in layers.enumerated() {
            if case .memory(let memory) = candidate, memory === layer { layerChanged(at: index, names: names, origin: .thisProcess) }
        }
    }

    /// The layer at `index` changed the keys `names` (or may have): reads them again and tells
    /// their observers, then the store-wide ones, of the keys whose holdings changed.
    func layerChanged(at index: Int, names: Set<String>, origin: DefaultsChangeOrigin) {
        if case .text(let source) = layers[index] {
            for problem in source.problems { reportOnce(problem: problem, layer: index) }
            availabilityChanged(at: index, to: source.unavailability)
        }
        var changed: Set<String> = []
        // The keys the changed names spell, as written or in kebab case (a directory's file names):
        // a name no key was made of is nobody's change.
        let keys = DefaultsKeyNames.allNames().filter { names.contains($0) || names.contains(LayerKeyNames.kebabCase($0)) }
        for name in keys.sorted() {
            guard let offset = DefaultsKeyNames.existingOffset(of: name) else { continue }
            guard let value = reread(name, offset: offset, cause: .layer(index), origin: origin) else { continue }
            changed.insert(name)
            if _mayHaveObservers(atOffset: offset) {
                _notifyExplicitKey(offset: offset, key: { Self.keyPath(at: offset) }, from: value, to: value, phases: [.prior, .change])
            }
        }
        if !changed.isEmpty { notifyStore(keys: changed, origin: origin, revision: nil) }
    }

    /// Reads what the layers hold for `name` again and stores it; returns the change, or `nil` if
    /// nothing changed. A read overtaken by another thread's is done again, so that the slot ends
    /// with the newest holdings.
    func reread(_ name: String, offset: Int, cause: LayeredValue.Cause, origin: DefaultsChangeOrigin) -> LayeredValue? {
        let index = (offset &- DefaultsKeyNames.firstKeyOffset) >> 3
        while true {
            let seen = lock.withLock { index < state.slots.count ? state.slots[index]?.version : nil }
            let holdings = read(name)
            let base = storage[_key: offset]
            // The replaced slot (values of the layers, a cached value) is let go after the lock.
            let outcome: (stored: Bool, old: Holdings?, version: UInt64, replaced: Slot?) = lock.withLock {
                if index >= state.slots.count { state.slots.append(contentsOf: repeatElement(nil, count: index + 1 - state.slots.count)) }
                let current = state.slots[index]
                guard current?.version == seen else { return (false, nil, 0, nil) }
                let old = current?.holdings ?? []
                guard old != holdings else { return (true, nil, 0, nil) }
                state.version &+= 1
                state.slots[index] = Slot(holdings: holdings, version: state.version)
                return (true, old, state.version, current)
            }
            withExtendedLifetime(outcome.replaced) {}
            guard outcome.stored else { continue }
            guard let old = outcome.old else { return nil }
            return LayeredValue(
                name: name, before: old, after: holdings, baseBefore: base, baseAfter: base, cause: cause, origin: origin,
                version: outcome.version, offset: offset)
        }
    }

    // MARK: Statuses

    /// Each layer's status now, first first.
    package var _layerStatuses: [DefaultsLayerStatus] {
        statuses(unavailable: lock.withLock { state.unavailable })
    }

    /// The statuses of the layers, each unavailable for the reason at its index, or available.
    private func statuses(unavailable: [String?]) -> [DefaultsLayerStatus] {
        kinds.indices.map { DefaultsLayerStatus(kind: kinds[$0], place: places[$0], problem: unavailable[$0]) }
    }

    /// The layer at `index` is unavailable for `reason` now, or available (`nil`): if that is news,
    /// its loss is reported (each time: a layer can be lost again once back), and the observers of
    /// the statuses are told either way.
    func availabilityChanged(at index: Int, to reason: String?) {
        let old: [String?]? = lock.withLock {
            guard state.unavailable[index] != reason else { return nil }
            defer { state.unavailable[index] = reason }
            return state.unavailable
        }
        guard let old else { return }
        if let reason {
            let error = DefaultsError(
                .layerProblem, location: storage.backend.location,
                reason: "\(kinds[index]) layer: \(reason): its keys read from the layers below until it returns")
            if let errorHandler { errorHandler(error) } else { DefaultsStorage.printToStandardError(error) }
        }
        var new = old
        new[index] = reason
        _notifyExplicitKey(
            offset: DefaultsKeyNames.statusOffset, key: { \DefaultsLayerStack._layerStatuses }, from: statuses(unavailable: old),
            to: statuses(unavailable: new), phases: .change)
    }

    // MARK: Snapshots

    /// The effective values now: the storage's snapshot and what the layers hold for every key
    /// interned so far.
    func snapshot() -> DefaultsSnapshot {
        // Taken first: the holdings read below are at least this new.
        let layerChanges = lock.withLock { state.version }
        var layered: [String: Holdings] = [:]
        for name in DefaultsKeyNames.allNames() {
            let (holdings, _) = holdings(for: name, offset: DefaultsKeyNames.offset(of: name))
            if !holdings.isEmpty { layered[name] = holdings }
        }
        var snapshot = storage.snapshot()
        snapshot.generation.layerChanges = layerChanges
        snapshot.layers = DefaultsSnapshot.Layers(holdings: layered, secretLayers: secretLayers, kinds: kinds, stack: self)
        return snapshot
    }
}
