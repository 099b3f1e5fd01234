/// Where a `DefaultsStorage` keeps its values and how it hears of other writers: the seam between the
/// in-memory store (values, observers, batches, delivery: `DefaultsStorage`) and its persistence.
///
/// Two back ends exist: `FileBackend` (a JSON file, watched with inotify or kqueue, written under a
/// lock file) in this module, and the etcd back end in `ObservableDefaultsEtcd`. A back end belongs to
/// exactly one storage, which holds it; it holds no reference to the storage, which it is given on
/// each call (so that a write it schedules can keep the storage alive until it is done, and a
/// watch can hold it weakly).
///
/// What the storage does, and what it leaves to the back end:
/// - A `set`, `batch` or `reset` changes the values in memory and marks the keys dirty
///   (`State.dirty`). If no write was scheduled (`State.isWriteScheduled` was `false`; the storage
///   sets it), it calls `writeSoon`. The back end writes off the caller's thread and clears
///   `isWriteScheduled` when it has taken everything.
/// - Other writers' changes are applied by the back end through the storage (`applyExternal`), in
///   the storage's lock, and delivered after it.
/// - `update` runs the body through `runUpdateBody` (which traps if the body uses the store) and
///   applies its result with `commitUpdate`.
/// - A back end that can lose its connection (etcd) sets the storage's `DefaultsBackendStatus`
///   with `markUnreachable` (which says whether to report the error: once per outage) and
///   `markConnected`; a file's storage stays `.connected(revision: nil)`.
package protocol DefaultsBackend: AnyObject, Sendable {
    /// Where the values live (named by every error of the store).
    var location: DefaultsLocation { get }

    /// Writes the storage's pending changes soon, off the caller's thread. Called with no lock held,
    /// once `State.isWriteScheduled` was set.
    func writeSoon(_ storage: DefaultsStorage)

    /// Writes the pending changes and returns when they are durable (file) or acknowledged (etcd).
    ///
    /// - Parameters:
    ///   - timeout: how long to wait for another writer at most (`nil`: as long as it takes).
    ///   - notice: called once if that wait lasts `after`.
    /// - Throws: why the changes are not durable (file: they stay pending; etcd: the changes named
    ///   are given up for good, never applied later).
    func flush(_ storage: DefaultsStorage, timeout: Duration?, notice: (after: Duration, call: () -> Void)?) throws(DefaultsError)

    /// At exit: writes what is pending, reporting a failure once (no throw: nothing could act on it).
    func flushAtExit(_ storage: DefaultsStorage)

    /// Applies `transform` to the freshest entry of `key` atomically with respect to every other
    /// writer, and returns once its result is durable. `transform` returns the new entry (JSON set;
    /// `nil` removes the key) or `nil` to write nothing; it may run more than once (on a conflict).
    func update(
        _ storage: DefaultsStorage, key: String, _ transform: @escaping (DefaultsStorage.Entry?) -> DefaultsStorage.Entry??
    ) throws(DefaultsError)

    /// The storage is going away: stop watching. Pending writes already scheduled still run.
    func close()
}
