import KeyValueObserving

extension DefaultsStore {
    /// Whether the store's back end answers: for etcd, `.unreachable` from the start of an outage
    /// (the moment the error handler hears of it) until a member answers again; for a file,
    /// `.unreachable` while it cannot be read or does not parse (from the moment the error handler
    /// hears of it) until it reads again (see `DefaultsBackendStatus`).
    public var backendStatus: DefaultsBackendStatus {
        storage.backendStatus
    }

    /// Observes the back end's connection state, as `observe(_:options:changeHandler:)` observes a
    /// key: the handler gets a change record whose `newValue` is the new status (with `.new`, or
    /// `.initial` for the current one, before this returns) and `oldValue` the one before (with
    /// `.old`). This is the counterpart of the error handler: an outage is reported there once,
    /// when it starts, and here both when it starts and when it ends. Keep the token: when it is
    /// deallocated or invalidated, the observation ends.
    ///
    /// ```swift
    /// let token = store.observeBackendStatus(options: [.initial, .new]) { _, change in
    ///     if case .connected(let revision)? = change.newValue { print("up to date with revision \(revision ?? 0)") }
    /// }
    /// ```
    ///
    /// A change is delivered on the thread that noticed it (the store's background queue, or a
    /// thread that called `flush()` or `update`), never under a lock; a change that a newer one
    /// overtook is not delivered after it.
    ///
    /// - Parameters:
    ///   - options: `.initial`, `.new` and `.old` (`.prior` makes no difference).
    ///   - changeHandler: called with the store and the change.
    /// - Returns: the token that keeps the observation.
    public func observeBackendStatus(
        options: KeyValueObservingOptions = [.new],
        changeHandler: @escaping @Sendable (DefaultsStore, KeyValueObservedChange<DefaultsBackendStatus>) -> Void
    ) -> KeyValueObservation {
        weak let store = self
        let wanted = options.subtracting(.prior)
        return storage.observe(\._backendStatus, options: wanted.union([.old, .new])) { storage, change in
            guard let store, let value = change.newValue, storage.isCurrent(value) else { return }
            let isInitial = change.oldValue == nil
            changeHandler(
                store,
                KeyValueObservedChange(
                    kind: .setting, newValue: wanted.contains(.new) || isInitial ? value.status : nil,
                    oldValue: wanted.contains(.old) ? change.oldValue?.status : nil))
        }
    }

    /// Observes the back end's connection state, the handler getting the new status itself.
    ///
    /// - Parameters:
    ///   - options: `.initial` to get the current status first; other options make no difference.
    ///   - changeHandler: called with the store and the new status.
    /// - Returns: the token that keeps the observation.
    @available(*, deprecated, message: "the handler gets a change record, as every other observe… handler: use change.newValue")
    @_disfavoredOverload
    public func observeBackendStatus(
        options: KeyValueObservingOptions = [],
        changeHandler: @escaping @Sendable (DefaultsStore, DefaultsBackendStatus) -> Void
    ) -> KeyValueObservation {
        observeBackendStatus(options: options.intersection(.initial).union(.new)) { store, change in
            if let status = change.newValue { changeHandler(store, status) }
        }
    }

    /// The back end's connection state as an `AsyncSequence`: the current status, then each change
    /// (see `observeBackendStatus(options:changeHandler:)`). The observation ends when the consuming
    /// task is cancelled or the sequence is dropped; the sequence finishes when the last store on the
    /// location is deallocated.
    ///
    /// ```swift
    /// for await status in store.backendStatusValues() where status.isConnected { print("back") }
    /// ```
    ///
    /// - Returns: the sequence of statuses.
    public func backendStatusValues() -> KeyValueObservationValues<DefaultsBackendStatus> {
        storage._values(for: \._backendStatus, options: [.initial, .new], isDuplicate: nil, buffering: .unbounded) { storage, value in
            storage.isCurrent(value) ? value.status : nil
        }
    }

    // MARK: Every layer's status

    /// Whether each of the store's layers, then its back end (`.store`), can be read now: a
    /// directory layer whose directory was removed is unavailable until it is back (a removal
    /// shorter than half a second, such as Kubernetes swapping its `..data` link, does not count),
    /// and so is a file that cannot be read or does not parse (`backendStatus`). The loss of
    /// either is reported to the error handler once, when it starts; its end only here.
    ///
    /// ```swift
    /// for status in store.layerStatuses where !status.isAvailable { print(status) }
    /// // directory /run/secrets: unavailable: /run/secrets does not exist (or is not a directory)
    /// ```
    public var layerStatuses: [DefaultsLayerStatus] {
        let backend: String? =
            switch backendStatus {
            case .connected: nil
            case .unreachable(_, let error): error.description
            }
        return (layerStack?._layerStatuses ?? []) + [DefaultsLayerStatus(kind: .store, place: location.description, problem: backend)]
    }

    /// Observes `layerStatuses`: the handler gets a change record whose `newValue` is every status
    /// after a change of one (with `.new`; the current ones with `.initial`, before this returns)
    /// and `oldValue` those before (with `.old`), on the thread that noticed the change. Keep the
    /// token: when it is deallocated or invalidated, the observation ends.
    ///
    /// ```swift
    /// let token = store.observeLayerStatuses { _, change in
    ///     for status in change.newValue! where !status.isAvailable { log("\(status)") }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - options: `.initial`, `.new` and `.old`.
    ///   - changeHandler: called with the store and the change.
    /// - Returns: the token that keeps the observation.
    public func observeLayerStatuses(
        options: KeyValueObservingOptions = [.new],
        changeHandler: @escaping @Sendable (DefaultsStore, KeyValueObservedChange<[DefaultsLayerStatus]>) -> Void
    ) -> KeyValueObservation {
        weak let store = self
        // `nil` until the observers are registered and the statuses read: a change before that is
        // in what is read then.
        let last = Locked<[DefaultsLayerStatus]?>(nil)
        let deliver: @Sendable () -> Void = {
            guard let store else { return }
            let current = store.layerStatuses
            let old: [DefaultsLayerStatus]? = last.withLock { last in
                guard let known = last, known != current else { return nil }
                defer { last = current }
                return known
            }
            guard let old else { return }
            changeHandler(
                store,
                KeyValueObservedChange(
                    kind: .setting, newValue: options.contains(.new) ? current : nil, oldValue: options.contains(.old) ? old : nil))
        }
        let backendToken = storage.observe(\._backendStatus, options: [.new]) { _, _ in deliver() }
        var token = backendToken
        if let layerStack {
            let layerToken = layerStack.observe(\._layerStatuses, options: [.new]) { _, _ in deliver() }
            token = KeyValueObservation(ending: layerToken) { backendToken.invalidate() }
        }
        let initial = layerStatuses
        last.withLock { $0 = $0 ?? initial }
        if options.contains(.initial) { changeHandler(self, KeyValueObservedChange(kind: .setting, newValue: initial)) }
        return token
    }
}
