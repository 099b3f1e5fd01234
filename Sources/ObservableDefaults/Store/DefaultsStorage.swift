#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import KeyValueObserving

/// The in-memory values of one store location (a file, an etcd prefix), shared by every
/// `DefaultsStore` of this process on it (see `DefaultsStorageRegistry`), with its observers; its
/// `backend` persists them and brings in other writers' changes.
///
/// Sets and reads happen on the caller's thread under `lock`; observers are called after the lock
/// is released. The back end's work (writing, reloading, watching) happens off the caller's thread,
/// on the back end's queue.
@usableFromInline
package final class DefaultsStorage: @unchecked Sendable {
    // Invariant: `state` is only accessed with `lock` held. That rule is what makes the accesses
    // exclusive, so the run-time exclusivity check is skipped on the set path. The back end guards
    // its own state with the same lock (it is given it at creation), so that a change applied from
    // elsewhere and the back end's record of it are one step.
    package let backend: any DefaultsBackend
    package let lock: Lock
    @exclusivity(unchecked) var state = State()

    /// One stored value: the typed value this process set, or the JSON read from the file, or both.
    @usableFromInline
    package struct Entry: Sendable {
        @usableFromInline package var typed: (any Codable & Sendable)?
        @usableFromInline package var json: JSONValue?

        @usableFromInline
        package init(typed: (any Codable & Sendable)?, json: JSONValue?) {
            self.typed = typed
            self.json = json
        }
    }

    /// A change as delivered to the type-erased observers.
    @usableFromInline
    struct Record: Sendable {
        @usableFromInline let key: String
        @usableFromInline let old: Entry?
        @usableFromInline let new: Entry?
        @usableFromInline let isPrior: Bool
        @usableFromInline let origin: DefaultsChangeOrigin
        /// The back end's revision of the change, if it has one (etcd) and knows it yet; 0 if not
        /// (a plain integer: the record is built on every set).
        @usableFromInline let revision: Int64

        init(key: String, old: Entry?, new: Entry?, isPrior: Bool, origin: DefaultsChangeOrigin, revision: Int64? = nil) {
            self.key = key
            self.old = old
            self.new = new
            self.isPrior = isPrior
            self.origin = origin
            self.revision = revision ?? 0
        }
    }

    final class Observer: Sendable {
        let id: UInt64
        /// The observed key, or `nil` for an observer of every key.
        let key: String?
        let wantsPrior: Bool
        let deliver: @Sendable (Record) -> Void
        /// Called when the storage goes away (finishes async sequences).
        let finish: (@Sendable () -> Void)?

        init(id: UInt64, key: String?, wantsPrior: Bool, deliver: @escaping @Sendable (Record) -> Void, finish: (@Sendable () -> Void)?) {
            self.id = id
            self.key = key
            self.wantsPrior = wantsPrior
            self.deliver = deliver
            self.finish = finish
        }
    }

    /// A transaction as delivered to the store-wide observers: the keys it changed, where it came
    /// from, and every value right after it.
    struct ChangeRecord: Sendable {
        let keys: Set<String>
        let origin: DefaultsChangeOrigin
        let revision: Int64?
        let values: [String: Entry]
    }

    final class ChangeObserver: Sendable {
        let id: UInt64
        let deliver: @Sendable (ChangeRecord) -> Void
        let finish: (@Sendable () -> Void)?

        init(id: UInt64, deliver: @escaping @Sendable (ChangeRecord) -> Void, finish: (@Sendable () -> Void)?) {
            self.id = id
            self.deliver = deliver
            self.finish = finish
        }
    }

    struct State {
        /// What reads return: the stored values with this process's changes applied.
        var values: [String: Entry] = [:]
        /// Keys changed (or removed) here and not written yet, with the version of their last change.
        var dirty: [String: UInt64] = [:]
        var version: UInt64 = 0
        /// The version of each key's last change applied here (a set or another process's value), so
        /// that another process's change is not delivered after a later change of the same key.
        var keyVersions: [String: UInt64] = [:]
        /// Whether the back end has been asked to write and has not taken every change yet.
        var isWriteScheduled = false
        var observers: [String: [Observer]] = [:]
        var anyKeyObservers: [Observer] = []
        /// Store-wide observers: one notification per transaction (see `DefaultsStore.observeChanges`).
        var changeObservers: [ChangeObserver] = []
        /// The thread running an `update` body, which must not use the storage (see `checkNotInUpdateBody`).
        var updatingThread: pthread_t?
        /// Keys whose value in memory cannot be encoded (NaN, a throwing `Encodable`): reported once
        /// when set, kept pending, and named by `flush()` until they are replaced.
        var unencodableKeys: Set<String> = []
        var priorObserverCount = 0
        var nextObserverID: UInt64 = 0
        var errorHandlers: [UInt64: @Sendable (DefaultsError) -> Void] = [:]
        /// The causes reported, or thrown to a caller, and not forgotten since (see
        /// `DefaultsStorage+Reporting`).
        var reportedCauses: Set<Cause> = []
        /// How many live stores on this storage were created without an error handler, and whether
        /// one was ever created with one (who hears of a problem no handler is left for).
        var storesWithoutHandler = 0
        var hasHadErrorHandler = false
        /// Type mismatches already reported (key and value found), so a read loop does not flood.
        var reportedMismatches: Set<String> = []
        /// Whether each change is also queued in `outbox`, for a back end that sends changes one by
        /// one, in order (etcd); `false` for a file, which writes the dirty keys together.
        var keepsOutbox = false
        var outbox = Outbox()
        /// For a back end with revisions (etcd): what it knows of each key (see `DefaultsStorage+Revisions`).
        var revisions = Revisions()
        /// The back end's connection state and its observers (see `DefaultsStorage+Status`).
        var status = StatusState()
    }

    /// A storage persisted by `backend`, which guards its own state with `lock`.
    package init(backend: any DefaultsBackend, lock: Lock) {
        self.backend = backend
        self.lock = lock
    }

    deinit {
        reportChangesLostAtRelease()
        backend.close()
        for observer in state.observers.values.joined() { observer.finish?() }
        for observer in state.anyKeyObservers { observer.finish?() }
        for observer in state.changeObservers { observer.finish?() }
        for observer in state.status.observers.values { observer.finish?() }
    }

    // MARK: Reading

    /// The entry for `key`, or `nil` if the key is absent.
    @usableFromInline
    func entry(for key: String) -> Entry? {
        lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            return state.values[key]
        }
    }

    /// Traps if this thread is running an `update` body of this storage: the body runs holding the
    /// file lock and may run again, so using the store from it would deadlock or act twice. Called
    /// with the lock held, only when some thread is in an update body.
    func checkNotInUpdateBody() {
        guard let thread = state.updatingThread, pthread_equal(thread, pthread_self()) != 0 else { return }
        preconditionFailure(
            "DefaultsStore.update: the body used the store (\(backend.location)). It runs holding the store's lock and may run more than once: compute the new value from the value passed in, and use the store after update returns"
        )
    }

    /// The value of `entry` as a `Value`: the typed value if it is one, else its JSON decoded; the
    /// default if the key is absent or its value does not decode (reported once per value found).
    @inlinable
    func value<Value>(of entry: Entry?, for key: DefaultsKey<Value>, caching: Bool = false) -> Value {
        guard let entry else { return key.defaultValue }
        if let typed = entry.typed as? Value { return typed }
        return decodedValue(of: entry, for: key, caching: caching)
    }

    /// `value(of:for:caching:)` for an entry that does not hold a `Value`: decode its JSON.
    @usableFromInline
    func decodedValue<Value>(of entry: Entry, for key: DefaultsKey<Value>, caching: Bool) -> Value {
        let json: JSONValue
        if let stored = entry.json {
            json = stored
        } else {
            // Set here with another type (two keys of the same name): go through its JSON.
            do {
                json = try JSONValue(encoding: entry.typed!)
            } catch {
                return key.defaultValue
            }
        }
        do {
            let decoded = try json.decode(as: Value.self)
            if caching {
                lock.withLock {
                    if state.values[key.name]?.json == json, state.values[key.name]?.typed == nil {
                        state.values[key.name]?.typed = decoded
                    }
                }
            }
            return decoded
        } catch {
            let found = json.compactText
            let isNew = lock.withLock { state.reportedMismatches.insert(key.name + "\u{0}" + found).inserted }
            if isNew {
                report(
                    DefaultsError(
                        .typeMismatch, location: backend.location, key: key.name, found: found,
                        reason: "which does not decode as \(Value.self) (\(Self.describe(error)))"
                    ))
            }
            return key.defaultValue
        }
    }

    /// Every key and its value as JSON.
    func jsonValues() throws -> [String: JSONValue] {
        let values = lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            return state.values
        }
        var result: [String: JSONValue] = [:]
        for (key, entry) in values {
            result[key] = try entry.json ?? JSONValue(encoding: entry.typed!)
        }
        return result
    }

    // MARK: Writing

    /// Stores `entry` for `key` (`nil` removes it), schedules the write and notifies the observers.
    ///
    /// - Parameter isEncodable: `false` when the entry's value cannot be encoded (it stays pending).
    /// - Returns: whether that is new for this key, so the caller reports it (after the observers).
    @usableFromInline @discardableResult
    func set(_ entry: Entry?, for key: String, isEncodable: Bool = true) -> Bool {
        lock.lock()
        if state.updatingThread != nil { checkNotInUpdateBody() }
        var isNewFailure = false
        if !isEncodable {
            isNewFailure = state.unencodableKeys.insert(key).inserted
        } else if !state.unencodableKeys.isEmpty {
            state.unencodableKeys.remove(key)
        }
        if state.priorObserverCount > 0 {
            let targets = (state.observers[key] ?? []).filter(\.wantsPrior) + state.anyKeyObservers.filter(\.wantsPrior)
            if !targets.isEmpty {
                let prior = Record(key: key, old: state.values[key], new: nil, isPrior: true, origin: .thisProcess)
                lock.unlock()
                for observer in targets { observer.deliver(prior) }
                lock.lock()
            }
        }
        let old = if let entry { state.values.updateValue(entry, forKey: key) } else { state.values.removeValue(forKey: key) }
        state.version &+= 1
        state.dirty[key] = state.version
        state.keyVersions[key] = state.version
        if state.keepsOutbox { queueInOutbox(key, entry) }
        let needsWrite = !state.isWriteScheduled
        state.isWriteScheduled = true
        let targets = state.observers[key]
        let anyKeyTargets = state.anyKeyObservers
        let change = state.changeObservers.isEmpty ? nil : changeDelivery(keys: [key], origin: .thisProcess)
        lock.unlock()

        if needsWrite { backend.writeSoon(self) }
        if targets != nil || !anyKeyTargets.isEmpty {
            let record = Record(key: key, old: old, new: entry, isPrior: false, origin: .thisProcess)
            if let targets {
                for observer in targets { observer.deliver(record) }
            }
            for observer in anyKeyTargets { observer.deliver(record) }
        }
        if let change { deliver([.change(change)]) }
        return isNewFailure
    }

    /// Removes every key, as one transaction.
    func removeAll() {
        let keys = lock.withLock { state.values.keys.sorted() }
        commit(keys.map { ($0, nil, nil) })
    }

    /// Makes the pending changes durable (file) or acknowledged (etcd); see `DefaultsStore.flush()`.
    /// What it throws counts as reported: the handlers do not hear of that cause again.
    func flush(timeout: Duration? = nil, notice: (after: Duration, call: () -> Void)? = nil) throws(DefaultsError) {
        do {
            try backend.flush(self, timeout: timeout, notice: notice)
        } catch {
            noteReported(error)
            throw error
        }
    }

    // MARK: Observers

    /// Registers an observer of `key` (or of every key) and returns its id.
    @usableFromInline
    func addObserver(
        key: String?,
        wantsPrior: Bool,
        deliver: @escaping @Sendable (Record) -> Void,
        finish: (@Sendable () -> Void)? = nil
    ) -> UInt64 {
        lock.withLock {
            state.nextObserverID += 1
            let observer = Observer(id: state.nextObserverID, key: key, wantsPrior: wantsPrior, deliver: deliver, finish: finish)
            if let key {
                state.observers[key, default: []].append(observer)
            } else {
                state.anyKeyObservers.append(observer)
            }
            if wantsPrior { state.priorObserverCount += 1 }
            return observer.id
        }
    }

    func removeObserver(id: UInt64, key: String?) {
        lock.withLock {
            var removed: Observer?
            if let key {
                if let index = state.observers[key]?.firstIndex(where: { $0.id == id }) {
                    removed = state.observers[key]!.remove(at: index)
                    if state.observers[key]!.isEmpty { state.observers.removeValue(forKey: key) }
                }
            } else if let index = state.anyKeyObservers.firstIndex(where: { $0.id == id }) {
                removed = state.anyKeyObservers.remove(at: index)
            } else if let index = state.changeObservers.firstIndex(where: { $0.id == id }) {
                state.changeObservers.remove(at: index)
            } else {
                // A backend-status observer (ids come from one counter: they never clash).
                state.status.observers.removeValue(forKey: id)
            }
            if removed?.wantsPrior == true { state.priorObserverCount -= 1 }
        }
    }

    /// What to tell observers once a locked section that changed values is over: one key's change,
    /// or a transaction's store-wide notification.
    enum Delivery {
        case key(KeyDelivery)
        case change(ChangeDelivery)
    }

    /// A change of one key, with the version it was applied as and the observers to tell, taken in
    /// the locked section that applied it.
    struct KeyDelivery {
        let record: Record
        let version: UInt64
        let observers: [Observer]
    }

    /// A transaction's store-wide notification and its observers, taken in the locked section that
    /// applied it (so its values are the store's right after the transaction).
    struct ChangeDelivery {
        let record: ChangeRecord
        let observers: [ChangeObserver]
    }

    /// The store-wide notification of `keys` just changed, or `nil` if nothing observes the store or
    /// nothing changed. Called with the lock held.
    func changeDelivery(keys: Set<String>, origin: DefaultsChangeOrigin, revision: Int64? = nil) -> ChangeDelivery? {
        guard !state.changeObservers.isEmpty, !keys.isEmpty else { return nil }
        return ChangeDelivery(
            record: ChangeRecord(keys: keys, origin: origin, revision: revision, values: state.values), observers: state.changeObservers)
    }

    /// Applies changes made elsewhere (another process, another client of the back end) as one
    /// transaction: stores each key's new entry (`nil`: removed) and returns what to tell, `.prior`
    /// notifications first for the observers that asked for them, then each key's change, then the
    /// store-wide notification. The caller has decided which keys to apply (not those this process
    /// changed and has not written). Called with the lock held; deliver the result after unlocking.
    func applyExternal(_ changes: [(key: String, entry: Entry?)], origin: DefaultsChangeOrigin, revision: Int64?) -> [Delivery] {
        var records: [Delivery] = []
        var priors: [Delivery] = []
        var changed: Set<String> = []
        for (key, new) in changes {
            let old = state.values[key]
            state.values[key] = new
            state.version &+= 1
            state.keyVersions[key] = state.version
            changed.insert(key)
            let observers = (state.observers[key] ?? []) + state.anyKeyObservers
            if state.priorObserverCount > 0 {
                let wantingPrior = observers.filter(\.wantsPrior)
                if !wantingPrior.isEmpty {
                    let prior = Record(key: key, old: old, new: nil, isPrior: true, origin: origin, revision: revision)
                    priors.append(.key(KeyDelivery(record: prior, version: state.version, observers: wantingPrior)))
                }
            }
            guard !observers.isEmpty else { continue }
            let record = Record(key: key, old: old, new: new, isPrior: false, origin: origin, revision: revision)
            records.append(.key(KeyDelivery(record: record, version: state.version, observers: observers)))
        }
        let change = changeDelivery(keys: changed, origin: origin, revision: revision).map { [Delivery.change($0)] } ?? []
        return priors + records + change
    }

    /// Delivers changes (with the lock *not* held), in order, each to the observers that were
    /// registered when it was applied. A key's change whose key has changed again since (a set on
    /// another thread, or through a handler) is not delivered any further: its observers have been
    /// or are being told the newer value, and must not end on this stale one. Store-wide
    /// notifications are always delivered: they name the keys and carry the values of their moment.
    func deliver(_ deliveries: [Delivery]) {
        for delivery in deliveries {
            switch delivery {
            case .key(let delivery):
                for observer in delivery.observers {
                    guard lock.withLock({ state.keyVersions[delivery.record.key] == delivery.version }) else { break }
                    observer.deliver(delivery.record)
                }
            case .change(let delivery):
                for observer in delivery.observers { observer.deliver(delivery.record) }
            }
        }
    }

    // MARK: Describing errors

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(let type, _): "expected \(type)"
        case DecodingError.dataCorrupted(let context): context.debugDescription
        case DecodingError.keyNotFound(let key, _): "missing key '\(key.stringValue)'"
        case DecodingError.valueNotFound(let type, _): "expected \(type), found null"
        case EncodingError.invalidValue(let value, let context):
            if value is Double || value is Float {
                "\(value)\(place(context.codingPath)) cannot be written: JSON has no NaN or infinity"
            } else {
                context.debugDescription + place(context.codingPath)
            }
        default: "\(error)"
        }
    }

    /// ` at a.b[2]` for a coding path, or nothing for the top level.
    private static func place(_ path: [any CodingKey]) -> String {
        guard !path.isEmpty else { return "" }
        var text = ""
        for key in path {
            if let index = key.intValue, key.stringValue == "Index \(index)" {
                text += "[\(index)]"
            } else {
                text += (text.isEmpty ? "" : ".") + key.stringValue
            }
        }
        return " at " + text
    }
}
