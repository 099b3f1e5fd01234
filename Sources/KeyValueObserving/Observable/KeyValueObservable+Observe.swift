extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Observes the property at `keyPath`: `changeHandler` runs synchronously, on the thread that made
    /// the change, after every assignment (equal values included), in registration order.
    ///
    /// ```swift
    /// let token = player.observe(\.volume, options: [.initial, .new]) { player, change in
    ///     print(change.newValue!)   // 0.5 at once, then every new volume
    /// }
    /// ```
    ///
    /// - With `.initial`, the current value is delivered before this method returns.
    /// - With `.prior`, a notification with `isPrior == true` precedes each change.
    /// - Observers added while a notification is being delivered receive the next change, not the
    ///   current one; an observer invalidated during a delivery receives no further call.
    /// - A handler may set properties (the same one included), register and invalidate observers;
    ///   notifications it causes are delivered depth-first, before the remaining observers of the
    ///   outer change.
    ///
    /// The handler must be `@Sendable` because it runs on whichever thread sets the property. A
    /// `@MainActor` closure is therefore rejected at compile time ("converting function value … loses
    /// global actor"), which rules out Swift 6's runtime trap of a main-actor closure called on a
    /// background thread; hop explicitly (`Task { @MainActor in … }`) or, where the property is only
    /// ever set on the main actor, use `MainActor.assumeIsolated`.
    ///
    /// A key that can never notify (not `@Observed` and reading no `@Observed` property) or a
    /// computed key is reported through `KeyValueObservingDiagnosticCenter`: Foundation's KVO accepts such
    /// registrations silently.
    ///
    /// - Parameters:
    ///   - keyPath: The property to observe: an `@Observed` property of this object (or of a
    ///     superclass), a dependent key, or a path through other objects (`\.engine.rpm`). Taken as an
    ///     autoclosure so that a literal is compiled into direct getter calls where the value is read
    ///     through the key (dependent keys, paths); an argument that captures variables is evaluated
    ///     once, at registration. An argument that captures nothing (a literal, a global or static
    ///     property) is evaluated again where the value is read, and must keep giving the same key
    ///     path: pass a global or static *variable* through a local constant, or it must not be
    ///     reassigned while observed.
    ///   - options: What to deliver; `[]` (the default, as in Foundation) calls the handler with
    ///     `newValue` and `oldValue` both `nil`.
    ///   - changeHandler: Called with the object and the change.
    ///   - fileID: The caller's file, named in diagnostics; leave the default.
    ///   - line: The caller's line, named in diagnostics; leave the default.
    /// - Returns: The token. Keep it: the observation ends when it is invalidated or deallocated.
    /// - Complexity: O(*k*) in the number of keys of this object already observed.
    @inlinable
    @inline(__always)
    public func observe<Value>(
        _ keyPath: @autoclosure @escaping () -> KeyPath<Self, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        _observe(keyPath(), again: keyPath, options: options, isDuplicate: nil, fileID: fileID, line: line, changeHandler: changeHandler)
    }

    /// Observes `keyPath` like `observe(_:options:changeHandler:)`, but an assignment of a value equal
    /// to the current one does not notify (nor send `.prior`): Foundation's KVO notifies every
    /// assignment, this is opt-in.
    ///
    /// ```swift
    /// let token = player.observe(\.volume, options: [.new], removingDuplicates: true) { _, change in
    ///     print(change.newValue!)   // only real changes
    /// }
    /// ```
    ///
    /// Available for `Equatable` values only. For keys whose value is read through their key path
    /// (dependent keys, keys notified manually), `.prior` is still sent before an assignment that turns
    /// out to change nothing; the notification after it is not.
    @inlinable
    @inline(__always)
    public func observe<Value: Equatable & SendableMetatype>(
        _ keyPath: @autoclosure @escaping () -> KeyPath<Self, Value>,
        options: KeyValueObservingOptions = [],
        removingDuplicates: Bool,
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        var isDuplicate: (@Sendable (Value, Value) -> Bool)?
        if removingDuplicates { isDuplicate = { (old: Value, new: Value) in old == new } }
        return _observe(
            keyPath(), again: keyPath, options: options, isDuplicate: isDuplicate, fileID: fileID, line: line, changeHandler: changeHandler)
    }

    /// - Parameter again: The closure `keyPath` came from, when `observe` got it as an autoclosure: the
    ///   reader of a key that is not an `@Observed` property calls it again (see `_reader`).
    @inlinable
    func _observe<Value>(
        _ keyPath: KeyPath<Self, Value>,
        again: (() -> KeyPath<Self, Value>)? = nil,
        options: KeyValueObservingOptions,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        fileID: String,
        line: UInt,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        // Inlinable so that the handler's wrapper below is specialised in the client: the set path
        // then calls concrete code, with no value-witness calls for the change record.
        let registration = _Registration.begin(observing: keyPath, of: self, fileID: fileID, line: line)
        // Built only for keys read through their key path (and for `.initial`): where the key path is
        // no literal, the reader is a closure to allocate.
        var reader: ((Self) -> Value)?
        // A path is probed with the reader too, when its objects change.
        var reading: (keyPath: AnyKeyPath, read: (KeyValueObservable) -> Void)?
        let entry: _ObserverEntry
        if registration.isDirect {
            if let isDuplicate {
                entry = _DeduplicatingDirectObserver<Self, Value>(
                    id: registration.id, options: options, isDuplicate: isDuplicate, handler: changeHandler)
            } else {
                entry = _RootedDirectObserver<Self, Value>(id: registration.id, options: options, handler: changeHandler)
            }
        } else {
            let read = _reader(again, registered: keyPath)
            reader = read
            if registration.followsPaths {
                reading = (keyPath, { _ = read(unsafeDowncast($0, to: Self.self)) })
            }
            if let isDuplicate {
                // Compare the values read before and after.
                let wantsOld = options.contains(.old)
                entry = _readingObserver(
                    id: registration.id,
                    options: options.union([.old, .new]),
                    keyPath: keyPath,
                    read: read,
                    initialValue: { read(self) }
                ) { object, change in
                    if !change.isPrior, let old = change.oldValue, let new = change.newValue, isDuplicate(old, new) { return }
                    changeHandler(
                        object,
                        KeyValueObservedChange(
                            settingNew: options.contains(.new) || change.isPrior ? change.newValue : nil,
                            old: wantsOld ? change.oldValue : nil,
                            isPrior: change.isPrior
                        ))
                }
            } else {
                entry = _readingObserver(
                    id: registration.id,
                    options: options,
                    keyPath: keyPath,
                    read: read,
                    initialValue: { read(self) },
                    handler: changeHandler
                )
            }
        }
        let token = registration.finish(adding: entry, reading: reading)
        if options.contains(.initial) {
            let value = options.contains(.new) ? (reader ?? _reader(again, registered: keyPath))(self) : nil
            changeHandler(self, KeyValueObservedChange(settingNew: value, old: nil))
        }
        return token
    }
}

/// The non-generic-over-the-handler part of `observe`, kept out of the client.
@usableFromInline
struct _Registration {
    @usableFromInline let registry: _ObserverRegistry
    @usableFromInline let id: UInt64
    let route: _ObservationRoute
    /// The observed object, for the chains of dependent keys.
    let object: KeyValueObservable

    @usableFromInline
    var isDirect: Bool {
        if case .direct = route { return true }
        return false
    }

    /// Whether the observation follows paths through other objects.
    @usableFromInline
    var followsPaths: Bool {
        !route.paths.isEmpty
    }

    /// Creates the registry if needed and finds where observers of `keyPath` go.
    @usableFromInline
    static func begin<Root: KeyValueObservable, Value>(
        observing keyPath: KeyPath<Root, Value>,
        of object: Root,
        fileID: String,
        line: UInt
    ) -> _Registration {
        let registry = object._registryCreatingIfNeeded()
        let route = _ObservationRoute.find(for: keyPath, of: object, in: registry, fileID: fileID, line: line)
        return _Registration(registry: registry, id: registry.makeID(), route: route, object: object)
    }

    /// - Parameter reading: The observed key and what reads it from the object, for an entry that
    ///   follows it as a path.
    @usableFromInline
    func finish(
        adding entry: _ObserverEntry,
        reading: (keyPath: AnyKeyPath, read: (KeyValueObservable) -> Void)? = nil
    ) -> KeyValueObservation {
        let type = Swift.type(of: object)
        func add(_ slot: _SlotKey) {
            var automatic = true
            if case .observedProperty(let key, _) = slot {
                automatic = type.automaticallyNotifiesObservers(for: key)
            }
            let added = registry.add(entry, for: slot, notifiesAutomatically: automatic)
            precondition(added, "KeyValueObserving: an object cannot be deallocated while it registers an observer")
        }
        switch route {
        case .direct(let slot):
            add(slot)
            return KeyValueObservation(registry: registry, id: id)
        case .throughKeyPath(let slots, let paths) where paths.isEmpty:
            slots.forEach(add)
            return KeyValueObservation(registry: registry, id: id)
        case .throughKeyPath(let slots, _):
            slots.forEach(add)
        }
        let paths = _DependencyPaths(root: object, paths: route.paths, announcingTo: entry, reading: reading)
        return KeyValueObservation(registry: registry, id: id, parts: [paths])
    }
}

/// What reads the value at a key path around each change, for observers that read their key (dependent
/// keys, paths, keys notified manually).
///
/// `observe` takes its key path as an autoclosure for this: the closure of a key-path literal captures
/// nothing, so a reader that calls it again is specialised by the optimiser (constant capture
/// propagation) into direct calls of the getters, where `root[keyPath: keyPath]` with the key-path
/// object would apply it at run time (several times the cost of the set, more for an optional
/// chain such as `\.track?.volume`; `dependent-key-set` and `chain-set` in `kvo-bench gate`,
/// Benchmarks/thresholds.json). A closure that captures something (a key path held in a variable) or that does
/// not give the same object again (a key path built with `appending`) is not called again: the reader
/// then applies the object it gave at registration.
@inlinable
@inline(__always)
func _reader<Root, Value>(_ again: (() -> KeyPath<Root, Value>)?, registered: KeyPath<Root, Value>) -> (Root) -> Value {
    // A thick closure whose context is nil captures nothing.
    guard let again, unsafeBitCast(again, to: (function: UnsafeRawPointer, context: UnsafeRawPointer?).self).context == nil,
        again() === registered
    else { return { $0[keyPath: registered] } }
    return { $0[keyPath: again()] }
}
