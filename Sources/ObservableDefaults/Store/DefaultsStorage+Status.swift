import Foundation
import KeyValueObserving

/// The back end's connection state (`DefaultsBackendStatus`), set by the back end, read and
/// observed through the store.
struct StatusState {
    var current = DefaultsBackendStatus.connected(revision: nil)
    /// Bumped at each change, so that a change delivered late is not delivered after a newer one.
    var version: UInt64 = 0
}

extension DefaultsStorage {
    /// The back end's connection state.
    var backendStatus: DefaultsBackendStatus {
        lock.withLock { state.status.current }
    }

    /// The back end answers, and the store's values are current with `revision`: if it did not
    /// answer before (or has no revision yet: a store opening), the status becomes
    /// `.connected(revision:)` and its observers hear of it (on this thread). Cheap when nothing
    /// changes (one lock).
    package func markConnected(revision: Int64?) {
        changeStatus { current in
            if case .connected(let known) = current, known != nil || revision == nil { return nil }
            return .connected(revision: revision)
        }
    }

    /// The back end does not answer (`error` says why): returns whether that begins an outage (the
    /// status was `.connected`; it becomes `.unreachable` and its observers hear of it), so that the
    /// caller reports `error` once per outage.
    package func markUnreachable(_ error: DefaultsError) -> Bool {
        changeStatus { current in
            guard case .connected = current else { return nil }
            return .unreachable(since: Date(), error: error)
        }
    }

    /// Sets the status to what `change` returns for the current one (nothing if `nil`), then tells
    /// the observers (through the registry, at `DefaultsKeyNames.statusOffset`), each unless a newer
    /// change was made meanwhile (`isCurrent`). Returns whether it changed.
    @discardableResult
    private func changeStatus(_ change: (DefaultsBackendStatus) -> DefaultsBackendStatus?) -> Bool {
        let changed = lock.withLock { () -> (old: StatusValue, new: StatusValue)? in
            guard let new = change(state.status.current) else { return nil }
            let old = StatusValue(status: state.status.current, version: state.status.version)
            state.status.current = new
            state.status.version &+= 1
            return (old, StatusValue(status: new, version: state.status.version))
        }
        guard let (old, new) = changed else { return false }
        _notifyExplicitKey(
            offset: DefaultsKeyNames.statusOffset, key: { \DefaultsStorage._backendStatus }, from: old, to: new, phases: .change)
        return true
    }
}
