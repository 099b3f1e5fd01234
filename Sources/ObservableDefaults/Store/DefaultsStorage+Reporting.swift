import KeyValueObserving

/// How a storage tells of its problems: to every store's error handler, or on standard error where
/// the stores were created without one; once per distinct cause (`Cause`) until the back end says
/// the problem went away (`forgetReportedCauses(of:)`). A cause thrown to a caller (`flush()`,
/// `update`) counts as reported. Any back end can use it (`reportOnce`, `reportLostChanges`).
extension DefaultsStorage {
    /// What makes two reports the same cause: not the message, which can name a temporary file
    /// that differs each time.
    package struct Cause: Hashable, Sendable {
        let kind: DefaultsError.Kind
        let location: DefaultsLocation
        let errno: Int32?
        let key: String?
        let line: Int?
        let column: Int?
        let found: String?
        let corruptCopyPath: String?

        package init(_ error: DefaultsError) {
            kind = error.kind
            location = error.location
            errno = error.errno
            key = error.key
            line = error.line
            column = error.column
            found = error.found
            corruptCopyPath = error.corruptCopyPath
        }
    }

    // MARK: Handlers

    /// Registers a store's error handler and returns its id.
    package func addErrorHandler(_ handler: @escaping @Sendable (DefaultsError) -> Void) -> UInt64 {
        let (id, dropped) = lock.withLock {
            state.nextObserverID += 1
            state.errorHandlers[state.nextObserverID] = handler
            state.hasHadErrorHandler = true
            return (state.nextObserverID, dropReleasedStoresHandlersIfNothingPending())
        }
        withExtendedLifetime(dropped) {}
        return id
    }

    /// Lets go of the released stores' handlers once no change is pending (they are let go after
    /// the lock: what they capture may do anything in its deinit). Called with the lock held.
    private func dropReleasedStoresHandlersIfNothingPending() -> [@Sendable (DefaultsError) -> Void] {
        guard state.dirty.isEmpty, state.unencodableKeys.isEmpty, !state.releasedStoresHandlers.isEmpty else { return [] }
        defer { state.releasedStoresHandlers = [] }
        return state.releasedStoresHandlers
    }

    /// Removes a store's error handler as the store goes. While changes are still pending (a write
    /// that failed, the exit's flush to come) the handler is kept for them: a store given a handler
    /// never has its problems printed to standard error, even after it was let go.
    package func removeErrorHandler(id: UInt64) {
        let released: [@Sendable (DefaultsError) -> Void] = lock.withLock {
            let dropped = dropReleasedStoresHandlersIfNothingPending()
            guard let handler = state.errorHandlers.removeValue(forKey: id) else { return dropped }
            if !state.dirty.isEmpty || !state.unencodableKeys.isEmpty {
                state.releasedStoresHandlers.append(handler)
                return dropped
            }
            return dropped + [handler]
        }
        withExtendedLifetime(released) {}
    }

    /// The handlers to tell of a problem now, and whether to print it to standard error instead.
    /// Called with the lock held.
    private func recipients(of error: DefaultsError) -> (handlers: [@Sendable (DefaultsError) -> Void], toStandardError: Bool) {
        if !state.errorHandlers.isEmpty { return (Array(state.errorHandlers.values), false) }
        // No live store has a handler. With a live store without one, standard error; else the
        // handlers of the released stores whose changes are still pending.
        if state.storesWithoutHandler == 0, !state.releasedStoresHandlers.isEmpty { return (state.releasedStoresHandlers, false) }
        return ([], state.storesWithoutHandler > 0 || !state.hasHadErrorHandler || error.kind == .changesLost)
    }

    /// Counts a store created without an error handler (`delta` 1) or one going away (-1): while
    /// there is one, or if no store ever gave a handler, problems no handler hears go to standard
    /// error.
    package func countStoreWithoutHandler(_ delta: Int) {
        lock.withLock { state.storesWithoutHandler += delta }
    }

    // MARK: Reporting

    /// Tells every store's error handler; or, if none is installed, standard error, unless every
    /// store created on this storage gave a handler (they are gone: at exit, say). Changes lost
    /// (`.changesLost`) are the exception: with no handler left to tell, they go to standard error,
    /// so that a loss is never silent.
    package func report(_ error: DefaultsError) {
        let (handlers, toStandardError) = lock.withLock { recipients(of: error) }
        if !handlers.isEmpty {
            for handler in handlers { handler(error) }
        } else if toStandardError {
            DefaultsStorage.printToStandardError(error)
        }
    }

    /// Reports `error` unless its cause was reported (or thrown to a caller) since it was last
    /// forgotten; returns whether it was reported.
    @discardableResult
    package func reportOnce(_ error: DefaultsError) -> Bool {
        let isNew = lock.withLock { state.reportedCauses.insert(Cause(error)).inserted }
        if isNew { report(error) }
        return isNew
    }

    /// Records `error`'s cause as reported: it was told another way (thrown by `flush()` or
    /// `update`, or given to a new store's handler by its init), so `reportOnce` stays quiet about it.
    package func noteReported(_ error: DefaultsError) {
        lock.withLock { _ = state.reportedCauses.insert(Cause(error)) }
    }

    /// Forgets the reported causes of `kinds`, because the problem went away (a write or a read
    /// succeeded): the next one is reported again. Called with the lock held.
    func forgetReportedCauses(of kinds: Set<DefaultsError.Kind>) {
        guard !state.reportedCauses.isEmpty else { return }
        state.reportedCauses = state.reportedCauses.filter { !kinds.contains($0.kind) }
    }

    /// At exit, after the last write failed with `cause`: reports once that the changes still
    /// pending are lost (how many, which keys, why), a cause of its own. Nothing if none is pending.
    package func reportLostChanges(because cause: DefaultsError) {
        let keys = lock.withLock {
            let keys = state.dirty.keys.sorted()
            state.keysReportedLost.formUnion(keys)
            return keys
        }
        guard !keys.isEmpty else { return }
        reportOnce(Self.lostChanges(keys, location: backend.location, cause: cause))
    }

    /// The `.changesLost` error naming `keys` (the first ten), lost because of `cause` (or, without
    /// one, because the last store on the storage was let go) as the process exits.
    static func lostChanges(_ keys: [String], location: DefaultsLocation, cause: DefaultsError?) -> DefaultsError {
        let shown = keys.prefix(10).map { "'\($0)'" }.joined(separator: ", ")
        let more = keys.count > 10 ? " and \(keys.count - 10) more" : ""
        let count = keys.count == 1 ? "1 change" : "\(keys.count) changes"
        let written = "\(count) not written (key\(keys.count == 1 ? "" : "s") \(shown)\(more))"
        return DefaultsError(
            .changesLost, location: location, key: keys.count == 1 ? keys[0] : nil,
            reason: cause.map { "the process exits with \(written), now lost: \($0)" }
                ?? "the last store on it was let go with \(written), now lost"
        )
    }

    /// Called by deinit: changes still pending when the last store is let go (their write failed
    /// and nothing holds the storage for a retry) are lost; say so, to the handlers of the stores
    /// that had one, else on standard error, rather than lose them silently. Keys whose loss the exit
    /// told already (the exit's flush can hold the last reference) are not told again.
    func reportChangesLostAtRelease() {
        let keys = state.dirty.keys.filter { !state.keysReportedLost.contains($0) }.sorted()
        guard !keys.isEmpty, fileBackend != nil else { return }
        let error = Self.lostChanges(keys, location: backend.location, cause: nil)
        let (handlers, toStandardError) = recipients(of: error)
        for handler in handlers { handler(error) }
        if toStandardError { DefaultsStorage.printToStandardError(error) }
    }

    static func printToStandardError(_ error: DefaultsError) {
        writeLineToStandardError("ObservableDefaults: \(error)")
    }
}
