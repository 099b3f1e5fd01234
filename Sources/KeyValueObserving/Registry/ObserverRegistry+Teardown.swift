// The object's deallocation: every observer goes quiet, deinit handlers run.

extension _ObserverRegistry.State {
    /// What `tearDown()` took out: what to release, what to call and what to report, after unlocking.
    struct TornDown {
        let slots: ContiguousArray<_ObserverRegistry.Slot>
        let anyKey: _AnyKeySnapshot
        let deinitHandlers: [(id: UInt64, handler: @Sendable () -> Void)]
        let unfinishedChanges: [_ObserverRegistry.PendingChange]
    }

    /// Deactivates and takes out every observer; no registration succeeds afterwards.
    mutating func tearDown() -> TornDown {
        isTornDown = true
        var unfinished: [_ObserverRegistry.PendingChange] = []
        for index in threads.indices {
            unfinished += threads[index].pendingChanges
            threads[index].pendingChanges = []
        }
        threads.removeAll { $0.isEmpty }
        let torn = TornDown(slots: slots, anyKey: anyKeyObservers, deinitHandlers: deinitHandlers, unfinishedChanges: unfinished)
        slots = []
        anyKeyObservers = _AnyKeySnapshot.none
        deinitHandlers = []
        for slot in torn.slots {
            for entry in slot.entries { entry.deactivate() }
        }
        torn.anyKey.observers.forEach { $0.deactivate() }
        return torn
    }
}

extension _ObserverRegistry {
    /// Called once, from the object's deinit: every observer goes quiet and is released.
    func tearDown() {
        let torn = withState { $0.tearDown() }
        withExtendedLifetime((torn.slots, torn.anyKey)) {}
        for (_, handler) in torn.deinitHandlers { handler() }
        for change in torn.unfinishedChanges {
            KeyValueObservingDiagnosticCenter.report(
                KeyValueObservingDiagnostic(
                    kind: .unbalancedChangeNotification,
                    objectType: KeyValueObservable.self,
                    keyPath: change.keyPath,
                    detail: "willChangeValue(for:) was never followed by didChangeValue(for:) before the object was "
                        + "deallocated; its observers were never notified of that change.",
                    fileID: change.fileID,
                    line: change.line
                ))
        }
    }
}
