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
