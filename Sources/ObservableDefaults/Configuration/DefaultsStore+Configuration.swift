import KeyValueObserving

/// Typed configuration: a `Decodable` type decoded through every layer of a store, strictly, and
/// observed as a whole.
extension DefaultsStore {
    /// Decodes `type` from the store's values now: each stored property is a key, read through the
    /// store's layers, its back end and its registered defaults, first first, as a `DefaultsKey` of
    /// the property's type reads.
    ///
    /// ```swift
    /// struct ServerConfig: Decodable {
    ///     var port: Int                 // --port, MYAPP_PORT, "port" in the file
    ///     var maxConnections: Int       // --max-connections, MYAPP_MAX_CONNECTIONS
    ///     var logLevel: LogLevel        // an enum with raw values
    ///     var tlsCertificate: URL?      // optional: may be absent
    /// }
    /// let config = try store.decode(ServerConfig.self)   // at start-up: refuse bad configuration
    /// ```
    ///
    /// - A property's key is its coding key (`maxConnections`), spelled by each layer as it spells
    ///   keys (`--max-connections`, `PREFIX_MAX_CONNECTIONS`, a directory's `maxConnections` or
    ///   `max-connections`). A property of a nested type is one key holding JSON. An optional
    ///   property may be absent; a non-optional one must have a value somewhere (give it one with
    ///   `register(_:)` for a default).
    /// - Strictly (the default), a value that does not decode, in any layer, is an error, even where
    ///   another layer would answer: an operator who passed `--port abc` hears of it rather than
    ///   running on the file's port. With `strictly: false`, such a value is skipped and the next
    ///   source answers, as typed reads do.
    /// - The error lists every failing property (`DefaultsError.configurationProblems`), naming the
    ///   key, the layer and where it holds the value, never a secret's value. For a type whose
    ///   properties are numbers, strings, booleans, arrays and dictionaries of them, `URL`,
    ///   `Duration`, enums with raw values (`String`, integer or other; of 2 to 256 cases, or any
    ///   number if `CaseIterable`) and structs of these, all are listed. For other types at least
    ///   the first: where a property fails whose type gives no value to go on with (one that checks
    ///   its value in `init(from:)`), the properties after it are not checked, and the error says so.
    /// - The values are read at one instant (`snapshot()`), never half of a change.
    ///
    /// - Parameters:
    ///   - type: the configuration type.
    ///   - strictly: whether a value that does not decode in any source is an error (the default).
    /// - Returns: the configuration.
    /// - Throws: `DefaultsError` of kind `.invalidConfiguration`, with its `configurationProblems`.
    public func decode<Configuration: Decodable>(_ type: Configuration.Type, strictly: Bool = true) throws(DefaultsError) -> Configuration {
        try decodeConfiguration(type, strictly: strictly).value
    }

    /// `decode(_:strictly:)`, with the keys the type read and whether a value that answered is
    /// secret. A store with layers reads the keys the type names before its snapshot: the first
    /// decoding of a type learns them, and is done again if it met a key the layers had not read.
    func decodeConfiguration<Configuration: Decodable>(
        _ type: Configuration.Type, strictly: Bool
    ) throws(DefaultsError) -> (value: Configuration, keys: Set<String>, isSecret: Bool, generation: DefaultsSnapshot.Generation) {
        while true {
            let known = layerStack == nil ? [] : Set(DefaultsKeyNames.allNames())
            let snapshot = snapshot()
            let decoding = ConfigurationDecoding(snapshot: snapshot, strictly: strictly)
            let value = decoding.decode(Configuration.self)
            let keys = Set(decoding.requestedKeys)
            if layerStack != nil, !keys.isSubset(of: known) {
                for key in keys { _ = DefaultsKeyNames.offset(of: key) }
                continue
            }
            if let value { return (value, keys, decoding.holdsSecret, snapshot.generation) }
            throw decoding.error(Configuration.self, location: location)
        }
    }

    /// Observes the configuration `type` as a whole: the handler gets its new and old values once
    /// per change of the store that changes one of its keys (a set, a `batch`, a reload of another
    /// process's write, a layer's change), never a mix of half a change.
    ///
    /// ```swift
    /// let token = try store.observe(ServerConfig.self, options: [.old, .new]) { _, change in
    ///     if change.oldValue?.port != change.newValue?.port { rebind(to: change.newValue!.port) }
    /// }
    /// ```
    ///
    /// A change after which the type no longer decodes is not delivered: the observer keeps the
    /// last good value (the next good change has it as its old value), and the store's error
    /// handler is told (`.invalidConfiguration`, once until the configuration decodes again). A
    /// change whose values hold a secret (a key declared secret, or a secret layer's value) prints
    /// and reflects `<redacted>` in place of its values.
    ///
    /// - Parameters:
    ///   - type: the configuration type.
    ///   - options: `.initial` (the current value, at once), `.new` and `.old`.
    ///   - strictly: as for `decode(_:strictly:)`.
    ///   - changeHandler: called with the store and the change, on the thread that made it.
    /// - Returns: the observation: keep it, the observation ends when it is deallocated.
    /// - Throws: `DefaultsError` of kind `.invalidConfiguration` if the configuration does not
    ///   decode now.
    public func observe<Configuration: Decodable & Sendable>(
        _ type: Configuration.Type,
        options: KeyValueObservingOptions = [],
        strictly: Bool = true,
        changeHandler: @escaping @Sendable (DefaultsStore, KeyValueObservedChange<Configuration>) -> Void
    ) throws(DefaultsError) -> KeyValueObservation {
        // Registered first, so that no change is missed between the first decoding and the
        // observer: a change seen before the first value is known makes the first decoding again.
        let state = Locked(ObservedConfiguration<Configuration>())
        let token = observeChanges { store, change in
            let keys: Set<String>? = state.withLock { state in
                if state.keys == nil { state.changesBeforeFirst += 1 }
                return state.keys
            }
            guard let keys, !change.keys.isDisjoint(with: keys) else { return }
            let decoding = ConfigurationDecoding(snapshot: change.values, strictly: strictly)
            guard let new = decoding.decode(Configuration.self) else {
                let error = decoding.error(Configuration.self, location: store.location)
                let isNew = state.withLock { state in
                    defer { state.reportedProblems = error.configurationProblems }
                    return state.reportedProblems != error.configurationProblems
                }
                if isNew { store.storage.report(error) }
                return
            }
            // Changes made on two threads at once can be delivered in either order: one that is not
            // newer than the last delivered is not delivered (its values are in the last one).
            let generation = change.values.generation
            let old: (value: Configuration?, isSecret: Bool)? = state.withLock { state in
                guard state.generation.map({ generation.isNewer(than: $0) }) ?? true else { return nil }
                defer {
                    state.value = new
                    state.isSecret = decoding.holdsSecret
                    state.generation = generation
                    state.reportedProblems = nil
                }
                return (state.value, state.isSecret)
            }
            guard let old else { return }
            changeHandler(
                store,
                Self.configurationChange(
                    new: new, old: old.value, options: options, isSecret: decoding.holdsSecret || old.isSecret, isInitial: false))
        }
        var current: (value: Configuration, keys: Set<String>, isSecret: Bool, generation: DefaultsSnapshot.Generation)
        while true {
            let seen = state.withLock { $0.changesBeforeFirst }
            do {
                current = try decodeConfiguration(type, strictly: strictly)
            } catch {
                token.invalidate()
                throw error
            }
            let isCurrent = state.withLock { state in
                guard state.changesBeforeFirst == seen else { return false }
                state.value = current.value
                state.isSecret = current.isSecret
                state.keys = current.keys
                state.generation = current.generation
                return true
            }
            if isCurrent { break }
        }
        if options.contains(.initial) {
            changeHandler(
                self, Self.configurationChange(new: current.value, old: nil, options: options, isSecret: current.isSecret, isInitial: true))
        }
        return token
    }

    /// The change record an observer of a configuration gets.
    private static func configurationChange<Configuration>(
        new: Configuration, old: Configuration?, options: KeyValueObservingOptions, isSecret: Bool, isInitial: Bool
    ) -> KeyValueObservedChange<Configuration> {
        let change = KeyValueObservedChange(
            kind: .setting, newValue: options.contains(.new) || isInitial ? new : nil, oldValue: options.contains(.old) ? old : nil)
        return isSecret ? change._redactingValues() : change
    }
}

/// What an observer of a configuration keeps: its last good value (whether it holds a secret, and
/// the generation of its snapshot), the keys the type reads (`nil` until the first value is
/// known), the changes seen before that, and the problems last told (so that a run of bad changes
/// is told once).
private struct ObservedConfiguration<Configuration> {
    var value: Configuration?
    var isSecret = false
    var generation: DefaultsSnapshot.Generation?
    var keys: Set<String>?
    var changesBeforeFirst = 0
    var reportedProblems: [DefaultsConfigurationProblem]?
}

extension DefaultsSnapshot {
    /// Decodes `type` from the snapshot's values, as `DefaultsStore.decode(_:strictly:)` does from
    /// the store's: values from one instant, whatever changed since. Of a store with layers, the
    /// snapshot holds the layers' values of the keys the process had read, observed or decoded when
    /// it was taken; `DefaultsStore.decode(_:strictly:)` reads the type's keys first.
    ///
    /// - Parameters:
    ///   - type: the configuration type.
    ///   - strictly: whether a value that does not decode in any source is an error (the default).
    /// - Returns: the configuration.
    /// - Throws: `DefaultsError` of kind `.invalidConfiguration`, with its `configurationProblems`.
    public func decode<Configuration: Decodable>(_ type: Configuration.Type, strictly: Bool = true) throws(DefaultsError) -> Configuration {
        let decoding = ConfigurationDecoding(snapshot: self, strictly: strictly)
        if let value = decoding.decode(Configuration.self) { return value }
        throw decoding.error(Configuration.self, location: storage?.backend.location ?? .file(path: "?"))
    }
}
