import Foundation

/// Whether a store's back end answers: what `DefaultsStore.backendStatus` says, and what its
/// observers hear of when it changes.
///
/// A store on etcd starts `.connected` at the revision of its first read, becomes `.unreachable`
/// when a request or its watch finds no member answering (the same moment its error handler hears
/// of the outage, once), and `.connected` again when a member answers. A file is
/// `.connected(revision: nil)` while it reads, and `.unreachable` while it cannot be read or does
/// not parse (the same moment its error handler hears of it, once), until it reads again. The end
/// of either is told only here, to the status observers (`DefaultsStore.observeBackendStatus`,
/// `DefaultsStore.observeLayerStatuses`): the error handler hears of problems, not of their end.
///
/// ```swift
/// let token = store.observeBackendStatus { _, change in
///     switch change.newValue! {
///     case .connected(let revision): print("answers again; up to date with revision \(revision ?? 0)")
///     case .unreachable(let since, let error): print("unreachable since \(since): \(error)")
///     }
/// }
/// ```
public enum DefaultsBackendStatus: Sendable, Hashable, CustomStringConvertible {
    /// The back end answers (a file reads). On etcd, `revision` is the last revision of etcd the store had seen
    /// when it connected (the first read's) or connected again (the last one its watch delivered
    /// before the outage): the watch delivers every change after it. `nil` for a file.
    case connected(revision: Int64?)
    /// No member of the etcd cluster has answered since `since`, or the file has not read (or
    /// parsed) since then; `error` is the failure that began the outage (the one the error handler
    /// got). Reads serve the last good values, and changes are sent (or written) when the back end
    /// answers again.
    case unreachable(since: Date, error: DefaultsError)

    /// Whether the back end answers.
    public var isConnected: Bool {
        if case .connected = self { true } else { false }
    }

    /// `connected (revision N)`, or `unreachable since DATE: ERROR`.
    public var description: String {
        switch self {
        case .connected(let revision?): "connected (revision \(revision))"
        case .connected(nil): "connected"
        case .unreachable(let since, let error): "unreachable since \(since): \(error)"
        }
    }
}
