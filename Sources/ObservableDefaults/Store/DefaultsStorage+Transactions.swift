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

/// Changes made as one: `update` (a read-modify-write, made atomic by the back end), `commit` (a
/// batch of sets applied in one locked section), and the store-wide observers that hear of each as
/// one.
extension DefaultsStorage {
    // MARK: Update

    /// Runs `transform` on the freshest entry of `key` and makes its result durable with respect to
    /// every other writer (the back end's `update`); returns after it.
    ///
    /// - Parameter transform: returns the new entry (its JSON set; `nil` removes the key), or `nil` to
    ///   write nothing (it keeps its own reason). It may run more than once.
    /// - Throws: why nothing was written (nothing is changed in memory); that cause counts as
    ///   reported, as for `flush()`.
    func update(
        _ key: String, timeout: Duration? = nil, notice: (after: Duration, call: () -> Void)? = nil,
        _ transform: @escaping (Entry?) -> Entry??
    ) throws(DefaultsError) {
        do {
            // A file's update waits for other processes' lock; etcd's has its store's timeout.
            if let file = fileBackend {
                try file.update(self, key: key, timeout: timeout, notice: notice, transform)
            } else {
                try backend.update(self, key: key, transform)
            }
        } catch {
            noteReported(error)
            throw error
        }
    }

    /// Runs an update's body on `entry`, marking this thread as in an update body meanwhile, so that
    /// a body that uses the store traps instead of deadlocking (on the file lock, or the back end's
    /// queue).
    package func runUpdateBody(_ transform: (Entry?) -> Entry??, on entry: Entry?) -> Entry?? {
        lock.withLock { state.updatingThread = pthread_self() }
        defer { lock.withLock { state.updatingThread = nil } }
        return transform(entry)
    }

    /// Applies a written update's entry in memory as this process's change, and returns what to tell
    /// observers. Called with the lock held.
    func commitUpdate(key: String, entry: Entry?, revision: Int64?) -> [Delivery] {
        let old = state.values[key]
        state.values[key] = entry
        state.version &+= 1
        state.keyVersions[key] = state.version
        state.dirty.removeValue(forKey: key)
        state.unencodableKeys.remove(key)
        guard _mayHaveObservers else { return [] }
        let before = KeyValue(name: key, entry: old, origin: .thisProcess, revision: revision, version: state.version)
        let after = KeyValue(name: key, entry: entry, origin: .thisProcess, revision: revision, version: state.version)
        let change = changeRecord(keys: [key], origin: .thisProcess, revision: revision).map { [Delivery.change($0)] } ?? []
        return [.key(old: before, new: after, isPrior: false)] + change
    }

    // MARK: Batches

    /// Applies `changes` (each key once; `nil` removes it) in one locked section, so that no reader
    /// and no write sees some of them without the others, and schedules one write for all of them;
    /// then notifies: `.prior` observers before, each key's observers after, the store-wide
    /// observers once, and reports the values that cannot be encoded (see `set`). Runs on the
    /// caller's thread.
    func commit(_ changes: [(key: String, entry: Entry?, encodingFailure: DefaultsError?)]) {
        guard !changes.isEmpty else { return }
        let observed = _mayHaveObservers
        let offsets = observed ? changes.map { DefaultsKeyNames.existingOffset(of: $0.key) } : []
        if observed, offsets.contains(where: wantsPrior) {
            notifyPrior(of: zip(changes, offsets).map { ($0.key, $1, $0.entry) })
        }
        lock.lock()
        if state.updatingThread != nil { checkNotInUpdateBody() }
        var olds: [Entry?] = []
        var failures: [DefaultsError] = []
        for (key, entry, encodingFailure) in changes {
            if let encodingFailure {
                if state.unencodableKeys.insert(key).inserted { failures.append(encodingFailure) }
            } else {
                state.unencodableKeys.remove(key)
            }
            let old = if let entry { state.values.updateValue(entry, forKey: key) } else { state.values.removeValue(forKey: key) }
            state.version &+= 1
            state.dirty[key] = state.version
            state.keyVersions[key] = state.version
            if observed { olds.append(old) }
        }
        if state.keepsOutbox {
            queueInOutbox(changes.map { PendingWrite.Change(key: $0.key, entry: $0.entry, version: state.keyVersions[$0.key]!) })
        }
        let needsWrite = !state.isWriteScheduled
        state.isWriteScheduled = true
        let change = observed ? changeRecord(keys: Set(changes.map(\.key)), origin: .thisProcess) : nil
        lock.unlock()

        // Observed before the write is scheduled: a back end that answers at once (etcd refusing
        // the write, and the storage taking its value again) is then told after this change.
        for ((key, entry, _), (old, offset)) in zip(changes, zip(olds, offsets)) {
            notifyKey(
                offset: offset, from: KeyValue(name: key, entry: old, origin: .thisProcess),
                to: KeyValue(name: key, entry: entry, origin: .thisProcess), phases: .change)
        }
        if let change { notifyStore(change) }
        if needsWrite { backend.writeSoon(self) }
        for failure in failures { report(failure) }
    }

    // MARK: Encoding

    /// Whether `value` is of a plain type that always encodes (a finite float, an integer, a string,
    /// a boolean): checked inline, and folded away by a specialised build. Any other value is
    /// encoded when it is set (`encodedEntry`), so that a NaN deep inside it is reported then.
    @inlinable
    static func isPlainlyEncodable<Value>(_ value: Value) -> Bool {
        switch value {
        case let number as Double: number.isFinite
        case let number as Float: number.isFinite
        case is Int, is String, is Bool, is Int64, is Int32, is UInt64, is UInt32, is UInt: true
        default: false
        }
    }

    /// The entry for a value set here, and the error if it cannot be encoded.
    func entry<Value: Codable & Sendable>(for value: Value, key: String) -> (Entry, DefaultsError?) {
        Self.isPlainlyEncodable(value) ? (Entry(typed: value, json: nil), nil) : encodedEntry(for: value, key: key)
    }

    /// Sets `value`, of a type that is not plainly encodable: encodes it now (the write reuses the
    /// encoding), and reports it if it cannot be encoded (see `set(_:for:offset:isEncodable:)`).
    @usableFromInline
    func setEncoding<Value: Codable & Sendable>(_ value: Value, for key: String, offset: Int) {
        let (entry, failure) = encodedEntry(for: value, key: key)
        if set(entry, for: key, offset: offset, isEncodable: failure == nil), let failure { report(failure) }
    }

    /// `entry(for:key:)` for a value that is not of a plain type, or a float that is not finite.
    func encodedEntry<Value: Codable & Sendable>(for value: Value, key: String) -> (Entry, DefaultsError?) {
        do {
            return (Entry(typed: value, json: try JSONValue(encoding: value)), nil)
        } catch {
            return (Entry(typed: value, json: nil), encodingFailure(key: key, error))
        }
    }

    /// The error of a value of `key` that cannot be encoded. For a secret key, without the encoding
    /// error's text: an `EncodingError`'s or a type's own error can quote the value.
    func encodingFailure(key: String, _ error: any Error) -> DefaultsError {
        let cause = DefaultsKeyNames.isSecret(key) ? "the encoder's error is not shown for a secret key" : Self.describe(error)
        return DefaultsError(
            .encodingFailed, location: backend.location, key: key,
            reason: "\(cause); the value stays in memory only, and flush() throws, until it is replaced"
        )
    }

    // MARK: Snapshots

    /// Every value now, as one snapshot.
    func values() -> [String: Entry] {
        lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            return state.values
        }
    }
}
