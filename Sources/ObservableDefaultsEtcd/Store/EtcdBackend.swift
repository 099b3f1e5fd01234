import Dispatch
import Foundation
import KeyValueObserving
import ObservableDefaults

/// The etcd back end of a `DefaultsStorage`: one etcd key per defaults key under `prefix`, each
/// value the key's JSON. The storage's values are a cache filled by one range read (`start`) and
/// kept current by one watch of the prefix; this process's changes are sent from the storage's
/// outbox, one transaction per change, in order, on `queue`.
///
/// Exactly once: every write is a transaction that also puts this back end's *marker* key
/// (`PREFIX` + U+0000 + `kvo-writer/` + a random id) to a value naming the write, and compares the
/// marker's mod revision with the one this back end last wrote. A write whose reply was lost is
/// sent again unchanged: if the first attempt applied, the marker moved and the retry's comparison
/// fails, and its failure branch reads the marker, whose value says the write applied; if not, the
/// retry applies. So no write applies twice, and none is lost. The marker is put before the first
/// write (`claimMarker()`): none compares it with 0, which holds again once it is removed at exit.
/// Names that start with U+0000 are reserved for markers: the store does not see them.
final class EtcdBackend: DefaultsBackend, @unchecked Sendable {
    // Invariant: `state` is only accessed with `lock` held (the lock of the one storage this back
    // end belongs to); `queueState` only on `queue` (serial), the marker's bookkeeping included.
    let client: EtcdClient
    let endpoints: [URL]
    let prefix: String
    let prefixBytes: [UInt8]
    let markerKey: [UInt8]
    let timeout: Duration
    let queue: DispatchQueue
    let lock: Lock
    private let queueID: UInt64
    @exclusivity(unchecked) var state = State()
    @exclusivity(unchecked) var queueState = QueueState()

    /// The back-off before a failed send is tried again: it doubles with each failure in a row, up
    /// to `maximumRetryDelay`.
    static let firstRetryDelay = Duration.milliseconds(100)
    static let maximumRetryDelay = Duration.seconds(5)
    private static let queueKey = DispatchSpecificKey<UInt64>()

    struct State {
        var watch: EtcdWatch?
        /// Sends that failed in a row (the retry delay doubles with each).
        var failedSends = 0
        var isClosed = false
        /// The first write etcd refused since the last flush, which throws it.
        var refusal: DefaultsError?
        /// Values that are not JSON, reported once each (key and revision).
        var reportedValues: Set<String> = []
    }

    struct QueueState {
        /// The marker's mod revision after this back end's last write (0: it wrote none yet).
        var markerRevision: Int64 = 0
        /// How many updates this back end made (their marker values are `u1`, `u2`, …).
        var updates: UInt64 = 0
        /// The outbox write an attempt of which got no reply (it may have applied), if any.
        var uncertainWrite: UInt64?
        /// How many writes were given up (their fence values are `x1`, `x2`, …).
        var fences: UInt64 = 0
    }

    init(client: EtcdClient, prefix: String, timeout: Duration, lock: Lock) {
        self.client = client
        self.endpoints = client.endpoints
        self.prefix = prefix
        self.prefixBytes = Array(prefix.utf8)
        let id = UInt64.random(in: 1...UInt64.max)
        self.queueID = id
        self.markerKey = Array(prefix.utf8) + [0] + Array("kvo-writer/\(String(id, radix: 16))".utf8)
        self.timeout = timeout
        self.lock = lock
        self.queue = DispatchQueue(label: "ObservableDefaultsEtcd.sender")
        queue.setSpecific(key: Self.queueKey, value: id)
    }

    var location: DefaultsLocation { .etcd(endpoints: endpoints, prefix: prefix) }

    /// Whether the caller runs on this back end's queue.
    var isOnQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) == queueID }

    /// Sends the outbox soon, on the queue; the send keeps the storage alive until it is done.
    func writeSoon(_ storage: DefaultsStorage) {
        queue.async { [self] in _ = drain(storage) }
    }

    func close() {
        let watch = lock.withLock {
            state.isClosed = true
            defer { state.watch = nil }
            return state.watch
        }
        watch?.cancel()
        // The marker is only needed while this back end writes: remove it (best effort).
        queue.async { [self] in
            if queueState.markerRevision != 0 { _ = try? client.delete(key: markerKey) }
        }
    }

    // MARK: Keys and values

    /// The etcd key of the defaults key `name`.
    func etcdKey(_ name: String) -> [UInt8] {
        prefixBytes + Array(name.utf8)
    }

    /// The defaults key named by the etcd key `key`, or `nil` for a key the store does not show (a
    /// marker, or a name that is not UTF-8).
    func name(of key: [UInt8]) -> String? {
        guard key.count > prefixBytes.count, key.starts(with: prefixBytes) else {
            return key == prefixBytes ? "" : nil
        }
        let rest = key[prefixBytes.count...]
        if rest.first == 0 { return nil }
        return String(validating: rest, as: UTF8.self)
    }

    /// The JSON of a value read from etcd, or `nil` if it is not JSON: then the storage notes the
    /// key as unreadable (reads of it through the tool fail naming it; it keeps its last good
    /// value), and the problem is reported once per key and revision.
    func json(of value: [UInt8], key: String, revision: Int64, storage: DefaultsStorage) -> JSONValue? {
        do throws(JSONParseError) {
            return try JSONValue.parse(value)
        } catch {
            let isNew = lock.withLock { state.reportedValues.insert("\(revision)\u{0}\(key)").inserted }
            // The parser's reasons quote no character of the text, but say what kind of character
            // stopped it (a digit, a letter of a literal): nothing of a secret's value is told.
            let cause = DefaultsKeyNames.isSecret(key) ? "it does not parse" : error.reason
            let problem = DefaultsError(.corruptFile, location: location, key: key, reason: "\(cause) (revision \(revision))")
            storage.noteUnreadable(key, error: problem, revision: revision)
            if isNew { storage.report(problem) }
            return nil
        }
    }

    // MARK: Failures

    /// Marks the storage's status `.unreachable` and reports `error`, unless this outage began
    /// already (then neither).
    func reportOutage(_ error: DefaultsError, to storage: DefaultsStorage) {
        if storage.markUnreachable(error) { storage.report(error) }
    }

    /// Blocks the calling thread for `duration` (a back-off between tries, on the queue).
    static func pause(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var remaining = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        while true {
            let request = remaining
            guard nanosleep([request], &remaining) != 0, errno == EINTR else { return }
        }
    }

    /// A request succeeded: an outage is over (the storage's status becomes `.connected` at
    /// `revision`, by default the last one the watch delivered), and the next failure is a new one.
    func noteRecovered(_ storage: DefaultsStorage, revision: Int64? = nil) {
        let watched = lock.withLock {
            state.failedSends = 0
            return state.watch
        }
        storage.markConnected(revision: revision ?? watched.map { $0.nextRevision - 1 })
    }
}
