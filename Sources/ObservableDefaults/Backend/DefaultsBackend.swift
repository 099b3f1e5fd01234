/// Where a `DefaultsStorage` keeps its values and how it hears of other writers: the seam between the
/// in-memory store (values, observers, batches, delivery: `DefaultsStorage`) and its persistence.
///
/// Two back ends exist: `FileBackend` (a JSON file, watched with inotify or kqueue, written under a
/// lock file) in this module, and the etcd back end in `ObservableDefaultsEtcd`. A back end belongs to
/// exactly one storage, which holds it; it holds no reference to the storage, which it is given on
/// each call (so that a write it schedules can keep the storage alive until it is done, and a
/// watch can hold it weakly). It is created with the storage's `Lock`, and guards its own state
/// with it, so that a change of the storage and the back end's record of it are one locked step.
///
/// A back end knows the storage only through the calls below, never through its fields.
///
/// What the storage does, and what it leaves to the back end:
/// - A `set`, `batch` or `reset` changes the values in memory and leaves the keys pending. If no
///   write was scheduled, it calls `writeSoon` (with no lock held). The back end writes off the
///   caller's thread.
/// - `withBackendSection { section in … }` runs a back end's locked step: it holds the storage's
///   lock while the body runs (the body may use the back end's own state too), then delivers the
///   changes the section applied to the observers, with the lock released. Through the section:
///   - a back end that writes every pending key together (a file) takes them with
///     `takePendingChanges()` (a change made after that schedules a new write), and marks each
///     one written with `markWritten(_:as:)` (a key changed again since stays pending); a write
///     that failed or waited is scheduled again with `scheduleWriteIfPending()`;
///   - `isPending(_:)`, `hasPendingChanges`, `entry(_:)` and `version(of:)` read what a write or a
///     read-modify-write needs;
///   - other writers' changes are applied with `apply(_:origin:revision:)` (a key pending here is
///     skipped: this process's write is the newer one), the first read with `setLoadedValues(_:)`,
///     a written `update` with `applyUpdate(_:entry:revision:)`; `forgetReportedCauses(of:)` says a
///     problem is over.
/// - A back end that sends each change on its own, in order, with revisions (etcd) calls
///   `keepOutbox()` at creation, then takes the oldest change with `nextWrite()` and ends it with
///   `finish(_:revision:unsent:)`; applies other writers' changes with `applyRemote` and complete
///   reads with `applyReload` (both in revision order: see `Revisions`), notes values it cannot read
///   with `noteUnreadable`, and brackets an update with `beginUpdate` and `endUpdate`. Each is one
///   locked step of its own, delivering after it.
/// - `update` runs the body through `runUpdateBody` (which traps if the body uses the store), never
///   inside a section.
/// - Problems go to `report` or `reportOnce` (once per cause until forgotten), and changes lost at
///   exit to `reportLostChanges(because:)`.
/// - A back end that can lose its connection (etcd) sets the storage's `DefaultsBackendStatus`
///   with `markUnreachable` (which says whether to report the error: once per outage) and
///   `markConnected`; a file's storage is `.unreachable` while its file does not read or parse.
package protocol DefaultsBackend: AnyObject, Sendable {
    /// Where the values live (named by every error of the store).
    var location: DefaultsLocation { get }

    /// Writes the storage's pending changes soon, off the caller's thread. Called with no lock held,
    /// by the change that found no write scheduled; a later change calls it again once the back end
    /// has taken what is pending (`takePendingChanges()`, or `nextWrite()` finding nothing left).
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
