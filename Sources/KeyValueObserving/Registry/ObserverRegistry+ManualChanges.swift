// `willChangeValue(for:)` calls waiting for their `didChangeValue(for:)`, in the thread's record.

extension _ObserverRegistry {
    /// A manual change announced by `willChangeValue(for:)`: the observers it will notify, and what
    /// they need from before the change.
    struct PendingChange {
        let keyPath: AnyKeyPath
        let fileID: String
        let line: UInt
        let snapshots: [_ObserverSnapshot]
        let oldValue: Any?
        let pending: [ContiguousArray<Any?>?]
    }

    func pushPendingChange(_ change: PendingChange) {
        let thread = _ThreadID.current
        withState { $0.withRecord(of: thread) { $0.pendingChanges.append(change) } }
    }

    /// The innermost pending change of this thread, left in place.
    func innermostPendingChange() -> PendingChange? {
        let thread = _ThreadID.current
        return readState { $0.record(of: thread)?.pendingChanges.last }
    }

    /// Removes the innermost pending change of this thread (the one `innermostPendingChange()` returned).
    func popPendingChange() {
        let thread = _ThreadID.current
        let removed = withState { $0.withRecord(of: thread) { $0.pendingChanges.popLast() } }
        withExtendedLifetime(removed) {}
    }
}
