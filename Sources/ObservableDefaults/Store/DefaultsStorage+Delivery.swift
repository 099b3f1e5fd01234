import KeyValueObserving

/// How the storage's observers hear of changes: through the core registry, as explicitly notified
/// keys (`_ExplicitlyNotifiedKeys`). Each defaults key is `\DefaultsStorage[_key: offset]`, its
/// name interned to `offset` (`DefaultsKeyNames`); the store-wide notification, every key's and
/// the back end's status have reserved offsets. A notification carries a `KeyValue`: the entry,
/// where the change came from, its revision, and the version the stale-delivery rule checks.
extension DefaultsStorage: _ExplicitlyNotifiedKeys {
    package static func _explicitKey(for keyPath: AnyKeyPath) -> (offset: Int, key: AnyKeyPath)? {
        DefaultsKeyNames.explicitKey(for: keyPath)
    }

    package static func _explicitKeyName(for keyPath: AnyKeyPath) -> String? {
        DefaultsKeyNames.name(of: keyPath)
    }

    /// A key's value as its observers get it: the entry (`nil`: absent), with the change.
    @usableFromInline
    package struct KeyValue: Sendable, Equatable {
        @usableFromInline package let name: String
        @usableFromInline package let entry: Entry?
        @usableFromInline package let origin: DefaultsChangeOrigin
        /// The back end's revision of the change (etcd), 0 if none or not known yet.
        @usableFromInline package let revision: Int64
        /// The version the change was applied as, for a change delivered after the locked section
        /// that applied it (another process's, an update's): it is not delivered once the key has
        /// changed again (`isCurrent`). 0 for a set of this process and for `.initial`.
        @usableFromInline package let version: UInt64

        init(name: String, entry: Entry?, origin: DefaultsChangeOrigin, revision: Int64? = nil, version: UInt64 = 0) {
            self.name = name
            self.entry = entry
            self.origin = origin
            self.revision = revision ?? 0
            self.version = version
        }

        /// Equal stored values (for `removingDuplicates`): the typed values if both are `Equatable`
        /// values of one type, else the JSON.
        @usableFromInline
        package static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs.entry, rhs.entry) {
            case (nil, nil): return true
            case (let left?, let right?):
                if let typed = left.typed as? any Equatable, let other = right.typed { return typed.isEqual(to: other) }
                let leftJSON = left.json ?? left.typed.flatMap { try? JSONValue(encoding: $0) }
                return leftJSON != nil && leftJSON == (right.json ?? right.typed.flatMap { try? JSONValue(encoding: $0) })
            default: return false
            }
        }
    }

    /// The back end's status as its observers get it, with the version of the change.
    package struct StatusValue: Sendable {
        package let status: DefaultsBackendStatus
        /// 0 for `.initial`: no check.
        package let version: UInt64
    }

    /// The key interned at `offset`, as its observers get it (`.initial` reads it).
    package subscript(_key offset: Int) -> KeyValue {
        let name = DefaultsKeyNames.name(at: offset)
        return KeyValue(name: name, entry: lock.withLock { state.values[name] }, origin: .thisProcess)
    }

    /// What the store-wide observers get (nothing reads it: they ask for no `.initial`).
    package var _storeChange: ChangeRecord {
        ChangeRecord(keys: [], origin: .thisProcess, revision: nil, values: values(), sequence: 0)
    }

    /// What the observers of every key get (nothing reads it: they ask for no `.initial`).
    package var _anyKeyChange: KeyValue {
        KeyValue(name: "", entry: nil, origin: .thisProcess)
    }

    /// The back end's status, as its observers get it.
    package var _backendStatus: StatusValue {
        StatusValue(status: backendStatus, version: 0)
    }

    /// Whether `value` is still the key's newest change (always, for a change delivered in the
    /// locked section's wake that needs no check).
    @usableFromInline
    func isCurrent(_ value: KeyValue) -> Bool {
        value.version == 0 || lock.withLock { state.keyVersions[value.name] == value.version }
    }

    /// Whether `value` is still the back end's newest status.
    func isCurrent(_ value: StatusValue) -> Bool {
        value.version == 0 || lock.withLock { state.status.version == value.version }
    }

    // MARK: Deliveries

    /// What to tell observers once a locked section that changed values is over: one key's change
    /// (or its `.prior` notification), or a transaction's store-wide notification.
    enum Delivery {
        case key(old: KeyValue, new: KeyValue, isPrior: Bool)
        case change(ChangeRecord)
    }

    /// The store-wide notification of `keys` just changed, or `nil` if nothing observes the store or
    /// nothing changed. Called with the lock held.
    /// `keys` is built only then (a set's one-key `Set` costs more than the rest of its notification).
    func changeRecord(keys: @autoclosure () -> Set<String>, origin: DefaultsChangeOrigin, revision: Int64? = nil) -> ChangeRecord? {
        guard _mayHaveObservers(atOffset: DefaultsKeyNames.changesOffset) else { return nil }
        let keys = keys()
        guard !keys.isEmpty else { return nil }
        state.storeChanges &+= 1
        return ChangeRecord(keys: keys, origin: origin, revision: revision, values: state.values, sequence: state.storeChanges)
    }

    /// Applies changes made elsewhere (another process, another client of the back end) as one
    /// transaction: stores each key's new entry (`nil`: removed) and returns what to tell, `.prior`
    /// notifications first, then each key's change, then the store-wide notification. The caller
    /// has decided which keys to apply (not those this process changed and has not written).
    /// Called with the lock held; deliver the result after unlocking.
    func applyExternal(_ changes: [(key: String, entry: Entry?)], origin: DefaultsChangeOrigin, revision: Int64?) -> [Delivery] {
        let observed = _mayHaveObservers
        var priors: [Delivery] = []
        var records: [Delivery] = []
        var changed: Set<String> = []
        for (key, new) in changes {
            let old = state.values[key]
            state.values[key] = new
            state.version &+= 1
            state.keyVersions[key] = state.version
            changed.insert(key)
            guard observed else { continue }
            let before = KeyValue(name: key, entry: old, origin: origin, revision: revision, version: state.version)
            let after = KeyValue(name: key, entry: new, origin: origin, revision: revision, version: state.version)
            priors.append(.key(old: before, new: after, isPrior: true))
            records.append(.key(old: before, new: after, isPrior: false))
        }
        let change = observed ? changeRecord(keys: changed, origin: origin, revision: revision).map { [Delivery.change($0)] } ?? [] : []
        return priors + records + change
    }

    /// Delivers changes (with the lock *not* held), in order, to the observers registered now. A
    /// key's change whose key has changed again since (a set on another thread, or through a
    /// handler) is not delivered any further (each observer checks `isCurrent`): its observers have
    /// been or are being told the newer value, and must not end on this stale one. Store-wide
    /// notifications are always delivered: they name the keys and carry the values of their moment.
    func deliver(_ deliveries: [Delivery]) {
        for delivery in deliveries {
            switch delivery {
            case .key(let old, let new, let isPrior):
                notifyKey(offset: DefaultsKeyNames.existingOffset(of: new.name), from: old, to: new, phases: isPrior ? .prior : .change)
            case .change(let record):
                notifyStore(record)
            }
        }
    }

    /// Notifies the observers of the key at `offset` (none if it has none: never interned) and
    /// those of every key.
    func notifyKey(offset: Int?, from old: KeyValue, to new: KeyValue, phases: _ExplicitNotificationPhases) {
        withObservers(of: offset) { $0.notify(self, from: old, to: new, phases: phases) }
        notifyAnyKey(from: old, to: new, phases: phases)
    }

    /// Runs `body` with the observers of the key at `offset` (none for `nil`), looked up once.
    func withObservers<Result>(of offset: Int?, _ body: (_ExplicitKeyObservers) -> Result) -> Result {
        guard let offset else { return body(.none) }
        return _withExplicitKeyObservers(offset: offset, key: { DefaultsKeyNames.keyPath(at: offset) }, body)
    }

    /// Notifies the observers of every key.
    func notifyAnyKey(from old: KeyValue, to new: KeyValue, phases: _ExplicitNotificationPhases) {
        guard _mayHaveObservers(atOffset: DefaultsKeyNames.anyKeyOffset) else { return }
        _withExplicitKeyObservers(offset: DefaultsKeyNames.anyKeyOffset, key: { \DefaultsStorage._anyKeyChange }) {
            $0.notify(self, from: old, to: new, phases: phases)
        }
    }

    /// Whether an observer of every key asked for `.prior`.
    func anyKeyWantsPrior() -> Bool {
        _mayHaveObservers(atOffset: DefaultsKeyNames.anyKeyOffset)
            && _withExplicitKeyObservers(offset: DefaultsKeyNames.anyKeyOffset, key: { \DefaultsStorage._anyKeyChange }) { $0.wantsPrior }
    }

    /// Notifies the store-wide observers of one transaction.
    func notifyStore(_ record: ChangeRecord) {
        _notifyExplicitKey(
            offset: DefaultsKeyNames.changesOffset, key: { \DefaultsStorage._storeChange }, from: record, to: record, phases: .change)
    }

    /// Whether an observer of the key at `offset`, or of every key, asked for `.prior`.
    func wantsPrior(_ offset: Int?) -> Bool {
        withObservers(of: offset) { $0.wantsPrior } || anyKeyWantsPrior()
    }

    /// Sends the `.prior` notifications of this process's changes, before they are stored: with the
    /// values now as the old ones.
    func notifyPrior(of changes: [(key: String, offset: Int?, entry: Entry?)]) {
        let olds = lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            return changes.map { state.values[$0.key] }
        }
        for (change, old) in zip(changes, olds) {
            notifyKey(
                offset: change.offset, from: KeyValue(name: change.key, entry: old, origin: .thisProcess),
                to: KeyValue(name: change.key, entry: change.entry, origin: .thisProcess), phases: .prior)
        }
    }
}

extension Equatable {
    /// Whether `other` is a `Self` equal to this one.
    fileprivate func isEqual(to other: Any) -> Bool {
        (other as? Self) == self
    }
}

extension DefaultsStorage {
    /// The key path the observers of the key at `offset` are registered under, for a tracked
    /// observation's record of a read (`DefaultsStore.value(for:)`).
    @usableFromInline
    static func _keyPath(at offset: Int) -> AnyKeyPath {
        DefaultsKeyNames.keyPath(at: offset)
    }
}
