import Dispatch
import Foundation
import KeyValueObserving
import ObservableDefaults

extension DefaultsStore {
    /// A user name and password for an etcd cluster with authentication enabled.
    ///
    /// The password is sent only to etcd's `/v3/auth/authenticate`; it never appears in an error,
    /// a log, a `description`, `String(reflecting:)`, `dump` or a `Mirror` (which show the user
    /// only). Over `http` it crosses the network in clear text: beyond loopback, use `https`
    /// endpoints.
    public struct EtcdCredentials: Sendable, CustomStringConvertible, CustomReflectable {
        /// The etcd user.
        public var user: String
        /// The user's password.
        public var password: String

        /// Credentials of `user`.
        ///
        /// - Parameters:
        ///   - user: the etcd user.
        ///   - password: the user's password (read it from a file or the environment, not argv).
        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }

        /// `EtcdCredentials(user: USER, password: <redacted>)`.
        public var description: String { "EtcdCredentials(user: \(user), password: <redacted>)" }

        /// The user, and `<redacted>` for the password: what `dump` and `Mirror` show.
        public var customMirror: Mirror {
            Mirror(self, children: ["user": user, "password": DefaultsKeyNames.redacted], displayStyle: .struct)
        }
    }

    /// A store on an etcd cluster: every key under `prefix`, observable across processes and
    /// machines, with the same keys, observation, `update`, `batch`, `snapshot()` and `flush()` as a
    /// file-backed store.
    ///
    /// ```swift
    /// let store = try DefaultsStore(etcd: [URL(string: "http://127.0.0.1:2379")!], prefix: "myapp/")
    /// let token = store.observe(.playbackSpeed, options: [.new]) { _, change in
    ///     print(change.newValue!, change.origin, change.revision ?? 0)
    /// }
    /// store[.playbackSpeed] = 1.5                        // observers now; the put is sent after
    /// try store.update(.launches) { $0 += 1 }            // a transaction on the key's revision
    /// ```
    ///
    /// - Storage: one etcd key per defaults key, `prefix` followed by the key's name, its value the
    ///   key's JSON (as in a defaults file). Names starting with U+0000 are reserved: the store
    ///   keeps its own bookkeeping key there (one per process that wrote, removed when it exits).
    /// - Reads are local: the initializer reads the whole prefix once (waiting up to `timeout`), and
    ///   one watch of the prefix keeps the values current. Stores of this process on the same
    ///   endpoints, prefix and user share those values and that watch, as stores on one file do.
    /// - Writes: `set` tells this process's observers at once and sends a put shortly after, off the
    ///   caller's thread, in order with this process's other changes (each exactly once, even when a
    ///   member dies mid-request); `flush()` waits until etcd acknowledged them. A `batch` is one
    ///   transaction: other processes see all of its keys or none, as one change.
    /// - Other writers' changes arrive through the watch, with `origin == .anotherProcess` and their
    ///   `revision`; a transaction of several keys is one store-wide change. The watch resumes from
    ///   the last revision seen after a disconnection, so nothing is missed or repeated; if etcd
    ///   compacted past it, the prefix is read again and the differences are delivered.
    /// - Failures: a cluster that stops answering is reported once through `errorHandler`, and
    ///   `backendStatus` is `.unreachable` until a member answers again (then `.connected`, the end
    ///   of the outage: observe it with `observeBackendStatus(options:changeHandler:)`); reads and
    ///   observers keep working on the last values, and changes are sent when it answers again. A
    ///   `flush()` that throws has given its changes up for good: they are never applied later.
    /// - A value that is not JSON (written by another program) affects its key only: reported once,
    ///   the key keeps its last good value, a `set` or removal replaces it, `update` throws.
    ///
    /// - Parameters:
    ///   - endpoints: the `http` or `https` URLs of the cluster's members; requests fail over from
    ///     one to the next. An `https` member's certificate is verified (TLS 1.2 or later, chain and
    ///     host name) against the system's trust store and `trustedCertificates`.
    ///   - prefix: the etcd key prefix of this store's keys, such as `"myapp/"`.
    ///   - credentials: for a cluster with authentication enabled.
    ///   - trustedCertificates: a PEM file of private certificate authorities trusted for `https`
    ///     endpoints in addition to the system's trust store (see the EtcdWire article for adding a
    ///     CA to the system's store instead).
    ///   - timeout: how long to wait for the first read, and for each request; how long `flush()`
    ///     and `update` go on without an answer before they give up. One attempt at one member gets
    ///     a quarter of it, then the next member is tried (a write too, when it cannot apply twice:
    ///     every write of the store); the watch probes its member every quarter of it and resumes on
    ///     the next member when a probe is not answered in that time.
    ///   - maximumReplySize: the largest reply body, and the longest line of the watch's stream,
    ///     accepted, in bytes (positive; default 64 MiB). A larger reply fails with `.remoteFailed`
    ///     naming the cap instead of growing memory without bound; a watch line over it (a replay of
    ///     many events at once) is reported once, and the store reads its prefix again and watches
    ///     after it, as after a compaction. Stores of this process that share one storage (same
    ///     endpoints, prefix and user) use the first one's cap.
    ///   - layers: read-only layers read before etcd, the first first (see `DefaultsLayer`).
    ///   - secrets: the names of the keys whose values are secret, declared before the store reads
    ///     anything: never printed by the library (descriptions, dumps, mirrors, errors, standard
    ///     error). Secrecy is process-wide and only grows (see `DefaultsKey.isSecret`).
    ///   - errorHandler: called with each problem met later (an outage when it starts, a refused
    ///     change, a value that is not JSON or does not decode), on the thread that met it; with no
    ///     handler, problems are printed to standard error. The end of an outage is a change of
    ///     `backendStatus`, not a call of this handler.
    /// - Throws: `DefaultsError`: `.invalidEndpoint` for no endpoint, one that is not an `http(s)`
    ///   URL with a host (or has a user or password in it, or a port outside 1…65535), or `https`
    ///   without a usable OpenSSL (always on macOS, where `https` is refused) or
    ///   `trustedCertificates` file; `.unreachable` if no member answered within
    ///   `timeout`, `.authenticationFailed`, `.permissionDenied` (the user may not read the
    ///   prefix), `.remoteFailed`.
    /// - Complexity: the initializer reads every key under the prefix once (when no store of this
    ///   process shares it yet); reads are then O(1) and local, and each change is one request.
    public convenience init(
        etcd endpoints: [URL],
        prefix: String,
        credentials: EtcdCredentials? = nil,
        trustedCertificates: URL? = nil,
        timeout: Duration = .seconds(5),
        maximumReplySize: Int = 64 * 1024 * 1024,
        layers: [DefaultsLayer] = [],
        secrets: [String] = [],
        errorHandler: (@Sendable (DefaultsError) -> Void)? = nil
    ) throws(DefaultsError) {
        try self.init(
            etcd: endpoints, prefix: prefix, credentials: credentials, trustedCertificates: trustedCertificates, timeout: timeout,
            maximumReplySize: maximumReplySize, sharesStorage: true, layers: layers, secrets: secrets, errorHandler: errorHandler)
    }

    /// `init(etcd:prefix:credentials:trustedCertificates:timeout:maximumReplySize:layers:secrets:errorHandler:)`, with
    /// `sharesStorage: false` giving this store its own values, client and watch (for tests: two
    /// "processes" in one).
    package convenience init(
        etcd endpoints: [URL],
        prefix: String,
        credentials: EtcdCredentials? = nil,
        trustedCertificates: URL? = nil,
        timeout: Duration = .seconds(5),
        maximumReplySize: Int = EtcdClientOptions.defaultMaximumReplySize,
        sharesStorage: Bool,
        layers: [DefaultsLayer] = [],
        secrets: [String] = [],
        errorHandler: (@Sendable (DefaultsError) -> Void)? = nil
    ) throws(DefaultsError) {
        // Before anything is read: a problem met while loading must not print a secret.
        DefaultsKeyNames.markSecret(secrets)
        precondition(timeout > .zero, "DefaultsStore(etcd:): the timeout must be positive (got \(timeout))")
        precondition(maximumReplySize > 0, "DefaultsStore(etcd:): maximumReplySize must be positive (got \(maximumReplySize))")
        try EtcdBackend.validate(endpoints)
        var identity = "etcd:" + endpoints.map(\.absoluteString).sorted().joined(separator: ",") + "\n" + prefix + "\n"
        identity += (credentials?.user ?? "") + "\n" + (trustedCertificates?.path ?? "")
        if !sharesStorage { identity += "\n" + String(UInt64.random(in: 0...UInt64.max), radix: 16) }
        let (storage, problems) = try DefaultsStorageRegistry.storage(identity: identity) { () throws(DefaultsError) in
            try EtcdBackend.open(
                endpoints: endpoints, prefix: prefix, credentials: credentials, trustedCertificates: trustedCertificates, timeout: timeout,
                maximumReplySize: maximumReplySize)
        }
        self.init(storage: storage, problems: problems, layers: layers, errorHandler: errorHandler)
    }
}

extension EtcdBackend {
    /// Refuses an endpoint with a user or password in its URL before anything names it (an error's
    /// location would show it). The client checks the rest (http, a host).
    static func validate(_ endpoints: [URL]) throws(DefaultsError) {
        guard endpoints.allSatisfy({ $0.user == nil && $0.password == nil }) else {
            throw DefaultsError(
                .invalidEndpoint, location: .etcd(endpoints: [], prefix: ""),
                reason: "an endpoint has a user or password in its URL: give them as credentials instead")
        }
    }

    /// A new storage on etcd: the client, the first read of the prefix (waited for up to
    /// `timeout`), and the watch from the read's revision + 1.
    static func open(
        endpoints: [URL], prefix: String, credentials: DefaultsStore.EtcdCredentials?, trustedCertificates: URL?, timeout: Duration,
        maximumReplySize: Int
    ) throws(DefaultsError) -> (DefaultsStorage, [DefaultsError]) {
        let location = DefaultsLocation.etcd(endpoints: endpoints, prefix: prefix)
        var options = clientOptions(timeout: timeout)
        options.trustedCertificatesFile = trustedCertificates?.path
        options.maximumReplySize = maximumReplySize
        let client: EtcdClient
        do {
            client = try EtcdClient(endpoints: endpoints, credentials: credentials, options: options)
        } catch {
            throw DefaultsError(error, location: location)
        }
        let lock = Lock()
        let backend = EtcdBackend(client: client, prefix: prefix, timeout: timeout, lock: lock)
        let storage = DefaultsStorage(backend: backend, lock: lock)
        storage.keepOutbox()
        let problems = Locked<[DefaultsError]>([])
        let id = storage.addErrorHandler { problem in problems.withLock { $0.append(problem) } }
        defer { storage.removeErrorHandler(id: id) }
        let read = try backend.firstRead(storage)
        storage.applyReload(read.values, unreadable: read.unreadable, revision: read.revision)
        storage.markConnected(revision: read.revision)
        backend.watch(storage, from: read.revision + 1)
        return (storage, problems.current)
    }

    /// The client's bounds for a store's `timeout`: a call ends within `timeout`; each attempt at one
    /// member waits at most a quarter of it (and at most 2 s to connect) before the next member is
    /// tried, so a member that stops answering costs a quarter of the timeout, not all of it; a call
    /// that finds no member answering makes only the rounds whose back-off fits in `timeout` (the
    /// client's defaults otherwise: 6 rounds, 3.1 s of back-off, for 5 s). The watch probes its
    /// member every quarter of the timeout, so it leaves a silent one within half the timeout.
    static func clientOptions(timeout: Duration) -> EtcdClientOptions {
        let attempt = timeout / 4
        var options = EtcdClientOptions(
            requestTimeout: attempt, connectTimeout: min(attempt, .seconds(2)), callTimeout: timeout, watchLivenessInterval: attempt)
        var (rounds, backoff, waited) = (1, options.initialBackoff, Duration.zero)
        while rounds < options.attempts, waited + backoff <= timeout {
            waited += backoff
            backoff = min(backoff * 2, options.maximumBackoff)
            rounds += 1
        }
        options.attempts = rounds
        return options
    }

    /// The first read of the prefix, given up after `timeout` (the client's own bounds are per
    /// request and per endpoint; this one is the initializer's promise).
    private func firstRead(_ storage: DefaultsStorage) throws(DefaultsError) -> PrefixRead {
        let result = Locked<Result<PrefixRead, EtcdError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { [self] in
            let outcome: Result<PrefixRead, EtcdError>
            do throws(EtcdError) {
                outcome = .success(try readPrefix(storage))
            } catch {
                outcome = .failure(error)
            }
            result.withLock { $0 = outcome }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout.dispatchInterval) == .success, let outcome = result.current else {
            throw DefaultsError(
                .unreachable, location: location,
                reason: "no member of \(endpoints.map(\.absoluteString).joined(separator: ", ")) answered within \(timeout)")
        }
        do {
            return try outcome.get()
        } catch {
            throw DefaultsError(error, location: location)
        }
    }
}
