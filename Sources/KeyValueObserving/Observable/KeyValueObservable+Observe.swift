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
    /// computed key is reported through `KeyValueObservingDiagnostics`: Foundation's KVO accepts such
    /// registrations silently.
    ///
    /// - Parameters:
    ///   - keyPath: The property to observe: an `@Observed` property of this object (or of a superclass).
    ///   - options: What to deliver; `[]` (the default, as in Foundation) calls the handler with
    ///     `newValue` and `oldValue` both `nil`.
    ///   - changeHandler: Called with the object and the change.
    /// - Returns: The token. Keep it: the observation ends when it is invalidated or deallocated.
    /// - Complexity: O(*k*) in the number of keys of this object already observed.
    public func observe<Value>(
        _ keyPath: KeyPath<Self, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        let registry = _registryCreatingIfNeeded()
        let id = registry.makeID()
        let route = _ObservationRoute.find(for: keyPath, of: self, in: registry, fileID: fileID, line: line)
        let entry: _ObserverEntry
        switch route {
        case .direct:
            entry = _DirectObserver<Value>(id: id, options: options) { object, change in
                changeHandler(unsafeDowncast(object, to: Self.self), change)
            }
        case .throughKeyPath:
            entry = _KeyPathObserver<Self, Value>(id: id, options: options, keyPath: keyPath, handler: changeHandler)
        }
        let added = registry.add(entry, for: route.key, matchesByEquality: route.matchesByEquality)
        assert(added, "an object being observed cannot have been deallocated")
        if options.contains(.initial) {
            changeHandler(self, KeyValueObservedChange(newValue: options.contains(.new) ? self[keyPath: keyPath] : nil))
        }
        return KeyValueObservation(registry: registry, id: id)
    }
}

/// How a registration is attached to the registry.
enum _ObservationRoute {
    /// An `@Observed` key of the object: values come from the setter.
    case direct(key: AnyKeyPath, matchesByEquality: Bool)
    /// Any other key: values are read through the observer's key path around changes of `key`.
    case throughKeyPath(key: AnyKeyPath, matchesByEquality: Bool)

    var key: AnyKeyPath {
        switch self {
        case .direct(let key, _), .throughKeyPath(let key, _): key
        }
    }

    var matchesByEquality: Bool {
        switch self {
        case .direct(_, let byEquality), .throughKeyPath(_, let byEquality): byEquality
        }
    }
}

extension _ObservationRoute {
    /// Finds which `@Observed` key (if any) notifies observers of `keyPath`, by reading the value once
    /// while the `@Observed` getters of this object report what they are asked for, and reports a key
    /// that can never notify.
    static func find<Root: KeyValueObservable, Value>(
        for keyPath: KeyPath<Root, Value>,
        of object: Root,
        in registry: _ObserverRegistry,
        fileID: String,
        line: UInt
    ) -> _ObservationRoute {
        var reads: [AnyKeyPath] = []
        for key in registry.probe({ _ = object[keyPath: keyPath] }) where !reads.contains(where: { $0 == key }) {
            reads.append(key)
        }
        if reads.count == 1 {
            let read = reads[0]
            if read === keyPath {
                return .direct(key: read, matchesByEquality: false)
            }
            if read == keyPath {
                // Equal but not identical: a generic class (whose key paths are not uniqued) or a key
                // path built at run time. Read again to learn whether the accessor's key is uniqued.
                let again = registry.probe { _ = object[keyPath: keyPath] }
                return .direct(key: read, matchesByEquality: again.first.map { $0 !== read } ?? true)
            }
            if _isInherited(read, by: keyPath) {
                // `\Subclass.property` for a property declared in a superclass: a different key-path
                // object, which cannot be told apart from a subclass's computed property reading that
                // one property; reading through the observer's own key path is right for both.
                return .throughKeyPath(key: read, matchesByEquality: false)
            }
        }
        let kind: KeyValueObservingDiagnostic.Kind = reads.isEmpty ? .unobservableKey : .undeclaredDependencies
        let type = type(of: object)
        let message: String
        if reads.isEmpty {
            message = "\(fileID):\(line): observing \(keyPath) on \(type), which is not @Observed and reads no @Observed property: its observers will never be notified. Fix: declare the property @Observed."
        } else {
            message = "\(fileID):\(line): observing \(keyPath) on \(type), a computed key that reads \(reads.count) @Observed propert\(reads.count == 1 ? "y" : "ies") (\(reads.map { "\($0)" }.joined(separator: ", "))) but is not itself @Observed: its observers will not be notified when they change. Fix: observe the @Observed inputs, or make it a stored @Observed property."
        }
        KeyValueObservingDiagnostics.report(KeyValueObservingDiagnostic(
            kind: kind,
            objectType: type,
            keyPath: keyPath,
            reads: reads,
            fileID: fileID,
            line: line,
            message: message
        ))
        return .throughKeyPath(key: keyPath, matchesByEquality: true)
    }

    private static func _isInherited(_ read: AnyKeyPath, by keyPath: AnyKeyPath) -> Bool {
        guard type(of: read).valueType == type(of: keyPath).valueType,
              let declaring = type(of: read).rootType as? AnyClass,
              let observing = type(of: keyPath).rootType as? AnyClass,
              declaring != observing
        else { return false }
        var current: AnyClass? = _getSuperclass(observing)
        while let candidate = current {
            if candidate == declaring { return true }
            current = _getSuperclass(candidate)
        }
        return false
    }
}
