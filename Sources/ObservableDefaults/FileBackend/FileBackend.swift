import Dispatch
import KeyValueObserving

/// The file back end: one JSON file per store, watched for other processes' writes, written under a
/// lock file with the dirty keys merged into what the file holds.
///
/// File work (writing dirty keys, reloading after another process's write) happens on `queue`, one
/// serial queue for every file back end of the process (the "writer"), so a write and a reload never
/// interleave and any number of stores keep one thread busy, not one each. Nothing on it waits for
/// another process: a lock file held elsewhere is tried again later (see `flush()`).
final class FileBackend: DefaultsBackend, @unchecked Sendable {
    typealias Entry = DefaultsStorage.Entry

    // Invariant: `state`, `subscription`, `pollSubscription`, `targetWatch` and `awaitedDirectory`
    // are only accessed with `lock` held (the lock of the one storage this back end belongs to); `queueState` only on
    // `queue` (the writer, shared by every file back end, which runs one block at a time).
    let file: DefaultsFile
    let queue: DispatchQueue
    let lock: Lock
    @exclusivity(unchecked) var state = State()
    @exclusivity(unchecked) var queueState = QueueState()
    var subscription: FileWatcher.Subscription?
    var pollSubscription: FileWatcher.Subscription?
    /// If the file is a symbolic link: the file it points to, and the watch of that file's directory.
    var targetWatch: (path: String, subscription: FileWatcher.Subscription?)?
    /// While the file's directory does not exist: how its appearance is awaited.
    var awaitedDirectory: AwaitedDirectory?

    /// How long a write waits for more changes to join it.
    static let coalescingDelay = DispatchTimeInterval.milliseconds(5)
    /// How long a broken file must stay broken before it is reported (see `reload()`) or found
    /// broken by a write (see `writeDirtyKeys()`), in milliseconds.
    static let corruptionConfirmationDelay = 50
    /// How many times a write looks again at a broken file that keeps changing before it takes the
    /// last version it read as broken (see `writeDirtyKeys()`).
    static let corruptionConfirmationLooks = 5
    /// The delay before a failed batched write is tried again, in milliseconds; it doubles with each
    /// failure in a row, up to `maximumRetryDelay`.
    static let firstRetryDelay = 100
    static let maximumRetryDelay = 10_000
    /// How often a storage whose watched directory went away looks whether it exists again.
    static let rewatchInterval = DispatchTimeInterval.milliseconds(100)
    static let queueKey = DispatchSpecificKey<Bool>()
    /// The one serial queue every file back end's work runs on.
    static let writer: DispatchQueue = {
        let queue = DispatchQueue(label: "ObservableDefaults.writer")
        queue.setSpecific(key: queueKey, value: true)
        return queue
    }()

    /// What only the file back end keeps, guarded by the storage's lock.
    struct State {
        /// The file's values as this process last read or wrote them.
        var persisted: [String: JSONValue] = [:]
        var isReloadScheduled = false
        /// Replacements of the file made by this process (for tests: a batch is one).
        var fileWrites = 0
        /// Batched writes that failed in a row (the retry delay doubles with each).
        var failedWrites = 0
        /// Batched writes in a row that found the lock file held by another process.
        var lockWaits = 0
        /// The broken version of the file last confirmed broken (read at load, looked at twice by a
        /// reload or a write): a write that finds it again throws at once, without looking again.
        var confirmedCorruption: DefaultsFile.Identity?
        /// A write found the file broken and left its changes pending: the next read that parses
        /// the file (a reload after the watcher's event) schedules the write.
        var waitsForRepair = false
        /// For tests: called (on the queue, no lock held) when a write found a broken file and let go
        /// of the lock file to look again shortly.
        var corruptionSuspectedHook: (@Sendable () -> Void)?
        /// A broken content (its hash) whose copy aside failed, the failure, and how many times the
        /// copy was tried (see `copyAside(_:of:as:)`).
        var failedCopy: (content: Int, error: DefaultsError, attempts: Int)?
        /// For tests: called instead of writing a copy aside (to fail it as a full disk would).
        var copyAsideHook: (@Sendable ([UInt8]) throws(DefaultsError) -> String)?
        /// A store on this file declared secrets: a file this process creates is readable by its
        /// owner only (an existing file keeps its own mode).
        var createsPrivateFile = false
    }

    struct QueueState {
        /// A broken version of the file seen once and not reported yet: it may be another program's
        /// in-place rewrite caught half-way, so it is reported only if it is still there shortly after.
        var suspectedCorruption: DefaultsFile.Identity?
        /// When this process's last write replaced the file (`CLOCK_MONOTONIC`), for latency measurements.
        var lastReplacement: UInt64?
        /// Whether a write swept the temporary files of killed writers already.
        var hasSweptTemporaryFiles = false
        /// While a write waits for the file to parse (`State.waitsForRepair`): its storage, kept alive
        /// (a cycle through this back end) so that the changes are not dropped with its last store;
        /// the reload that finds the file parsing writes them, or the exit-time flush reports them
        /// lost. Let go once they are written (or there are none).
        var heldForRepair: DefaultsStorage?
    }

    /// The back end of `file`, guarding its state with `lock` (its storage's).
    init(file: DefaultsFile, lock: Lock) {
        self.file = file
        self.queue = Self.writer
        self.lock = lock
    }

    var location: DefaultsLocation { .file(path: file.path) }

    /// Whether the caller runs on the writer queue (that of every file back end).
    var isOnQueue: Bool {
        DispatchQueue.getSpecific(key: Self.queueKey) == true
    }

    func close() {
        // Let go outside the lock: a subscription's deinit takes the watcher's lock.
        let subscriptions = lock.withLock {
            defer {
                subscription = nil
                pollSubscription = nil
                targetWatch = nil
                awaitedDirectory = nil
            }
            return [subscription, pollSubscription, targetWatch?.subscription, awaitedDirectory?.subscription]
        }
        for subscription in subscriptions { subscription?.cancel() }
    }

    /// From now on, a file this back end creates has mode 0600 (a store declared secrets).
    func createsPrivateFile() {
        lock.withLock { state.createsPrivateFile = true }
    }
}

extension DefaultsStorage {
    /// The file back end, for the file-only hooks of tests and tools; `nil` for another back end.
    var fileBackend: FileBackend? { backend as? FileBackend }
}
