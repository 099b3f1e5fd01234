#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif
import Dispatch
import KeyValueObserving

/// The in-memory values of one store location (a file, an etcd prefix), shared by every
/// `DefaultsStore` of this process on it (see `DefaultsStorageRegistry`); its `backend` persists
/// them and brings in other writers' changes. Its observers are the core registry's: each key is an
/// explicitly notified key (see `DefaultsStorage+Delivery`).
///
/// Sets and reads happen on the caller's thread under `lock`; observers are called after the lock
/// is released. The back end's work (writing, reloading, watching) happens off the caller's thread,
/// on the back end's queue.
@usableFromInline
package final class DefaultsStorage: KeyValueObservable, @unchecked Sendable {
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

    /// A transaction as delivered to the store-wide observers: the keys it changed, where it came
    /// from, and every value right after it.
    package struct ChangeRecord: Sendable {
        let keys: Set<String>
        let origin: DefaultsChangeOrigin
        let revision: Int64?
        let values: [String: Entry]
        /// Which store-wide change of the storage this is (`State.storeChanges`).
        let sequence: UInt64
    }

    struct State {
        /// What reads return: the stored values with this process's changes applied.
        var values: [String: Entry] = [:] {
            // Every change, wherever it is made, makes the reads cached before it stale.
            didSet { valuesGeneration &+= 1 }
        }
        /// Bumped at each change of `values` (see `readCache`).
        var valuesGeneration: UInt64 = 0
        /// Bumped at each store-wide change record (`changeRecord`), and taken by snapshots: which
        /// of two snapshots is newer (`DefaultsSnapshot.Generation`).
        var storeChanges: UInt64 = 0
        /// The typed values reads found (`ReadCache`), indexed by
        /// `(offset - DefaultsKeyNames.firstKeyOffset) / 8` of their key: a read of a key whose slot
        /// was cached at the current `valuesGeneration` needs neither its name hashed nor a cast
        /// from an existential.
        var readCache: [ReadCache?] = []
        /// Keys changed (or removed) here and not written yet, with the version of their last change.
        var dirty: [String: UInt64] = [:]
        var version: UInt64 = 0
        /// The version of each key's last change applied here (a set or another process's value), so
        /// that another process's change is not delivered after a later change of the same key.
        var keyVersions: [String: UInt64] = [:]
        /// Whether the back end has been asked to write and has not taken every change yet.
        var isWriteScheduled = false
        /// The thread running an `update` body, which must not use the storage (see `checkNotInUpdateBody`).
        var updatingThread: pthread_t?
        /// Keys whose value in memory cannot be encoded (NaN, a throwing `Encodable`): reported once
        /// when set, kept pending, and named by `flush()` until they are replaced.
        var unencodableKeys: Set<String> = []
        var nextObserverID: UInt64 = 0
        var errorHandlers: [UInt64: @Sendable (DefaultsError) -> Void] = [:]
        /// The handlers of stores let go while changes were pending: told of what happens to those
        /// changes when no live store has a handler (see `removeErrorHandler(id:)`). Dropped once
        /// nothing is pending, when a store comes or goes (or with the storage).
        var releasedStoresHandlers: [@Sendable (DefaultsError) -> Void] = []
        /// The causes reported, or thrown to a caller, and not forgotten since (see
        /// `DefaultsStorage+Reporting`).
        var reportedCauses: Set<Cause> = []
        /// Keys whose loss was told at exit (`reportLostChanges(because:)`): the release that can
        /// follow during exit does not tell it a second time.
        var keysReportedLost: Set<String> = []
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
        /// The back end's connection state (see `DefaultsStorage+Status`).
        var status = StatusState()
        /// The registered defaults (`DefaultsStore.register(_:)`): what an absent key reads before
        /// its own default. Never written.
        var registered: [String: Entry] = [:]
    }

    /// A typed value a read found in `State.values`, and the `valuesGeneration` it was found at:
    /// valid until any value changes.
    struct ReadCache {
        /// A `CachedValue<Value>`.
        let box: AnyObject
        let generation: UInt64
    }

    /// A typed value held by the read cache: a class, so that a read checks its type with a class
    /// cast rather than a cast from an existential.
    @usableFromInline
    final class CachedValue<Value: Sendable>: Sendable {
        @usableFromInline let value: Value

        init(_ value: Value) {
            self.value = value
        }
    }

    /// A storage persisted by `backend`, which guards its own state with `lock`.
    package init(backend: any DefaultsBackend, lock: Lock) {
        self.backend = backend
        self.lock = lock
        super.init()
    }

    /// The core's teardown (`KeyValueObservable.deinit`) finishes the observers' sequences.
    deinit {
        reportChangesLostAtRelease()
        backend.close()
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

    /// The value of `key` as a read returns it (`value(of:for:caching:)` of its entry), from the
    /// read cache when it holds one found since the last change of any value.
    @inlinable
    func value<Value>(for key: DefaultsKey<Value>) -> Value {
        if let cached = cachedValue(offset: key.offset) as? CachedValue<Value> { return cached.value }
        return readAndCache(key)
    }

    /// The read cache's `CachedValue` of the key interned at `offset`, if it is current; traps as
    /// `entry(for:)` does in an `update` body.
    @usableFromInline
    func cachedValue(offset: Int) -> AnyObject? {
        lock.lock()
        let box = currentCachedValue(at: (offset &- DefaultsKeyNames.firstKeyOffset) >> 3)
        lock.unlock()
        return box
    }

    /// `cachedValue(offset:)` with the lock held, by slot index (a layer stack's read calls it
    /// under the same lock, see `DefaultsLayerStack.cachedValue(offset:)`).
    @inline(__always)
    func currentCachedValue(at index: Int) -> AnyObject? {
        if state.updatingThread != nil { checkNotInUpdateBody() }
        guard index < state.readCache.count, let cached = state.readCache[index], cached.generation == state.valuesGeneration else {
            return nil
        }
        return cached.box
    }

    /// `value(for:)` without a current cached value: the entry's value, cached when the entry
    /// holds a typed `Value` (after a first read decoded it from JSON, it does).
    @usableFromInline
    func readAndCache<Value>(_ key: DefaultsKey<Value>) -> Value {
        lock.lock()
        if state.updatingThread != nil { checkNotInUpdateBody() }
        let entry = state.values[key.name]
        let generation = state.valuesGeneration
        lock.unlock()
        // `typed` is unwrapped first: `nil` as? an optional `Value` would succeed.
        guard let stored = entry?.typed, let typed = stored as? Value else { return value(of: entry, for: key, caching: true) }
        let cached = ReadCache(box: CachedValue(typed), generation: generation)
        let index = (key.offset &- DefaultsKeyNames.firstKeyOffset) >> 3
        lock.withLock {
            if index >= state.readCache.count {
                state.readCache.append(contentsOf: repeatElement(nil, count: index + 1 - state.readCache.count))
            }
            state.readCache[index] = cached
        }
        return typed
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
        guard let entry else { return absentValue(for: key) }
        if let typed = entry.typed.flatMap({ $0 as? Value }) { return typed }
        return decodedValue(of: entry, for: key, caching: caching)
    }

    /// The value of `key` while it is absent: its registered default, else its own.
    @usableFromInline
    func absentValue<Value>(for key: DefaultsKey<Value>) -> Value {
        registeredValue(lock.withLock { state.registered.isEmpty ? nil : state.registered[key.name] }, for: key)
    }

    /// The `revision` of a change of a registered default (`register(_:)`): its entries are
    /// registered values, not stored ones (`nil`: none, the key's own default).
    static let registeredRevision: Int64 = -1

    /// The value of `key` after `change` (`value(of:for:caching:)` of its entry, or for a change of
    /// a registered default, that default).
    @inlinable
    func value<Value>(after change: KeyValue, for key: DefaultsKey<Value>) -> Value {
        if change.revision >= 0 { return value(of: change.entry, for: key) }
        return registeredValue(change.entry, for: key)
    }

    /// `entry`, a registered default, as a `Value`: the key's default if `nil` or if it does not
    /// decode.
    @usableFromInline
    func registeredValue<Value>(_ entry: Entry?, for key: DefaultsKey<Value>) -> Value {
        entry.flatMap { Self.decoded($0, as: Value.self) } ?? key.defaultValue
    }

    /// `entry` as a `Value`: its typed value, else its JSON (stored, or the typed value encoded)
    /// decoded; `nil` if it does not read as one.
    static func decoded<Value: Decodable>(_ entry: Entry, as _: Value.Type) -> Value? {
        if let typed = entry.typed.flatMap({ $0 as? Value }) { return typed }
        return json(of: entry).flatMap { try? $0.decode(as: Value.self) }
    }

    /// Where the value of `key` after `change` comes from.
    @usableFromInline
    func kind<Value>(after change: KeyValue, for key: DefaultsKey<Value>) -> DefaultsLayerKind {
        if change.revision < 0 { return change.entry == nil ? .defaultValue : .registered }
        return change.entry == nil ? absentKind(for: key) : .store
    }

    /// Where an absent `key`'s value comes from: its registered default or its own.
    @usableFromInline
    func absentKind<Value>(for key: DefaultsKey<Value>) -> DefaultsLayerKind {
        hasRegisteredValue(key) ? .registered : .defaultValue
    }

    /// Whether `key` has a registered default that reads as a `Value`.
    func hasRegisteredValue<Value>(_ key: DefaultsKey<Value>) -> Bool {
        guard let entry = lock.withLock({ state.registered[key.name] }) else { return false }
        return Self.decoded(entry, as: Value.self) != nil
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
                return absentValue(for: key)
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
                        reason: "which does not decode as \(Value.self)" + Self.detail(of: error, key: key.name)
                    ))
            }
            return absentValue(for: key)
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

    /// Stores `entry` for `key` (`nil` removes it), schedules the write and notifies the observers:
    /// `.prior` before the value is stored, for the observers that asked for it, then the key's
    /// observers, then the store-wide ones.
    ///
    /// - Parameters:
    ///   - offset: the key's interned offset (`DefaultsKey.offset`), `nil` to look it up.
    ///   - isEncodable: `false` when the entry's value cannot be encoded (it stays pending).
    /// - Returns: whether that is new for this key, so the caller reports it (after the observers).
    @usableFromInline @discardableResult
    func set(_ entry: Entry?, for key: String, offset: Int? = nil, isEncodable: Bool = true) -> Bool {
        guard _mayHaveObservers else {
            let stored = store(entry, for: key, isEncodable: isEncodable, observed: false)
            if stored.needsWrite { backend.writeSoon(self) }
            return stored.isNewFailure
        }
        let offset = offset ?? DefaultsKeyNames.existingOffset(of: key)
        // The key's observers are looked up once, for `.prior` and for the change.
        return withObservers(of: offset) { observers in
            if observers.wantsPrior || anyKeyWantsPrior() { notifyPrior(of: [(key, offset, entry)]) }
            let (old, isNewFailure, change, needsWrite) = store(entry, for: key, isEncodable: isEncodable, observed: true)
            let before = KeyValue(name: key, entry: old, origin: .thisProcess)
            let after = KeyValue(name: key, entry: entry, origin: .thisProcess)
            observers.notify(self, from: before, to: after, phases: .change)
            notifyAnyKey(from: before, to: after, phases: .change)
            if let change { notifyStore(change) }
            // Observed before the write is scheduled: a back end that answers at once (etcd
            // refusing the write, and the storage taking its value again) is then told after
            // this change, never before it.
            if needsWrite { backend.writeSoon(self) }
            return isNewFailure
        }
    }

    /// `set`'s locked section: returns the entry replaced, whether the entry's failure to encode is
    /// new, (if `observed`) the store-wide notification, and whether the caller must schedule the
    /// back end's write (after notifying).
    private func store(
        _ entry: Entry?, for key: String, isEncodable: Bool, observed: Bool
    ) -> (old: Entry?, isNewFailure: Bool, change: ChangeRecord?, needsWrite: Bool) {
        lock.lock()
        if state.updatingThread != nil { checkNotInUpdateBody() }
        var isNewFailure = false
        if !isEncodable {
            isNewFailure = state.unencodableKeys.insert(key).inserted
        } else if !state.unencodableKeys.isEmpty {
            state.unencodableKeys.remove(key)
        }
        let old = if let entry { state.values.updateValue(entry, forKey: key) } else { state.values.removeValue(forKey: key) }
        state.version &+= 1
        state.dirty[key] = state.version
        state.keyVersions[key] = state.version
        if state.keepsOutbox { queueInOutbox(key, entry) }
        let needsWrite = !state.isWriteScheduled
        state.isWriteScheduled = true
        let change = observed ? changeRecord(keys: [key], origin: .thisProcess) : nil
        lock.unlock()
        return (old, isNewFailure, change, needsWrite)
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

    // MARK: Describing errors

    /// ` (why)` for a decoding error of the key `key`'s value; nothing for a secret key, whose
    /// decoding error can quote its value or a part of it.
    static func detail(of error: any Error, key: String) -> String {
        DefaultsKeyNames.isSecret(key) ? "" : " (\(describe(error)))"
    }

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
