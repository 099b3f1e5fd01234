import Foundation
import KeyValueObserving

/// A client of etcd v3's JSON gateway (`/v3/kv/…`, `/v3/watch`, `/v3/auth/authenticate`) for the
/// members of one cluster.
///
/// Every call but `watch` blocks until etcd answered or the bounded retries gave up: callers run
/// them on their own serial queue. A call tries the member that answered last first, then the others
/// (failover); a request that certainly did not reach a server (connection refused, unknown host, no
/// connection within `connectTimeout`, a member without a leader) goes to the next member, and after
/// a round over all of them failed, the next round starts after a back-off (`initialBackoff`,
/// doubling up to `maximumBackoff`), for `attempts` rounds (and within `callTimeout`). Each attempt
/// waits at most `requestTimeout` for its reply. A read that got no reply then goes on the same way,
/// and so does a transaction that cannot apply twice; any other write that got no reply throws
/// `.replyLost` at once, since it may have applied.
///
/// ```swift
/// let client = try EtcdClient(endpoints: [URL(string: "http://127.0.0.1:2379")!], credentials: nil)
/// let revision = try client.put(key: Array("app/speed".utf8), value: Array("1.5".utf8))
/// let (keyValues, _) = try client.range(prefix: Array("app/".utf8))
/// ```
package final class EtcdClient: Sendable {
    /// The endpoints (client URLs of the members).
    package let endpoints: [URL]
    /// The timeouts and retries.
    package let options: EtcdClientOptions
    let credentials: EtcdCredentials?
    let transport: EtcdTransport
    let state = Locked(State())

    struct State {
        /// The endpoint that answered last: tried first.
        var preferred = 0
        /// The authentication token, once obtained.
        var token: String?
        /// Whether the cluster said authentication is not enabled (then no token is sent).
        var authenticationDisabled = false
    }

    /// Makes a client; it connects only when a call needs it.
    ///
    /// - Parameters:
    ///   - endpoints: The client URLs of one cluster's members (http or https, with a host). https
    ///     certificates are verified against the system's trust store and
    ///     `options.trustedCertificatesFile`.
    ///   - credentials: A user and password when the cluster has authentication enabled.
    ///   - options: Timeouts, retries and back-off.
    /// - Throws: `EtcdError` `.invalidEndpoint` for an empty list, a URL that is not http(s) with a
    ///   host (or has a user or password, or a port outside 1…65535), or https when OpenSSL is
    ///   missing (always on Darwin) or `trustedCertificatesFile` cannot be loaded.
    package init(endpoints: [URL], credentials: EtcdCredentials?, options: EtcdClientOptions = .init()) throws(EtcdError) {
        guard !endpoints.isEmpty else { throw EtcdError(.invalidEndpoint, endpoints: [], reason: "no endpoint given") }
        for endpoint in endpoints {
            if let problem = Self.problem(with: endpoint) {
                // Never name an endpoint with a password in it.
                let named = endpoint.user == nil && endpoint.password == nil
                throw EtcdError(.invalidEndpoint, endpoints: named ? [endpoint] : [], reason: problem)
            }
        }
        var tls: EtcdTLS?
        if endpoints.contains(where: { $0.scheme?.lowercased() == "https" }) {
            do {
                tls = try EtcdTLS(trustedCertificatesFile: options.trustedCertificatesFile)
            } catch {
                throw EtcdError(.invalidEndpoint, endpoints: endpoints.filter { $0.scheme?.lowercased() == "https" }, reason: error.reason)
            }
        }
        transport = EtcdTransport(tls: tls, maximumReplySize: options.maximumReplySize)
        self.endpoints = endpoints
        self.credentials = credentials
        self.options = options
    }

    // MARK: Key-value calls

    /// Reads every key that starts with `prefix`.
    ///
    /// - Returns: The key-values in key order, and the store's revision they were read at.
    /// - Throws: `EtcdError`.
    /// - Complexity: One request; O(n) in the keys and bytes read.
    package func range(prefix: [UInt8]) throws(EtcdError) -> (keyValues: [EtcdKeyValue], revision: Int64) {
        let start = prefix.isEmpty ? [0] : prefix
        let (reply, endpoint) = try call(
            "/v3/kv/range", EtcdJSON.rangeRequest(key: start, rangeEnd: EtcdKeys.rangeEnd(forPrefix: prefix)), "range")
        return try decoded(endpoint, "range") { () throws(EtcdMalformedReply) in
            (try EtcdJSON.keyValues(reply), try EtcdJSON.revision(reply))
        }
    }

    /// Reads one key.
    ///
    /// - Returns: The key-value (nil when the key is absent) and the store's revision it was read at.
    /// - Throws: `EtcdError`.
    package func range(key: [UInt8]) throws(EtcdError) -> (keyValue: EtcdKeyValue?, revision: Int64) {
        let (reply, endpoint) = try call("/v3/kv/range", EtcdJSON.rangeRequest(key: key, rangeEnd: nil), "range")
        return try decoded(endpoint, "range") { () throws(EtcdMalformedReply) in
            (try EtcdJSON.keyValues(reply).first, try EtcdJSON.revision(reply))
        }
    }

    /// Puts `value` at `key`.
    ///
    /// - Returns: The revision of the put.
    /// - Throws: `EtcdError`; `.replyLost` when the request was sent and no reply came (it may have applied).
    package func put(key: [UInt8], value: [UInt8]) throws(EtcdError) -> Int64 {
        let (reply, endpoint) = try call(
            "/v3/kv/put", ["key": EtcdJSON.base64(key), "value": EtcdJSON.base64(value)], "put", mayWrite: true)
        return try decoded(endpoint, "put") { () throws(EtcdMalformedReply) in try EtcdJSON.revision(reply) }
    }

    /// Deletes `key` (nothing happens when it is absent).
    ///
    /// - Returns: The store's revision after the call (the deletion's when the key existed).
    /// - Throws: `EtcdError`; `.replyLost` as for `put`.
    package func delete(key: [UInt8]) throws(EtcdError) -> Int64 {
        let (reply, endpoint) = try call("/v3/kv/deleterange", ["key": EtcdJSON.base64(key)], "delete", mayWrite: true)
        return try decoded(endpoint, "delete") { () throws(EtcdMalformedReply) in try EtcdJSON.revision(reply) }
    }

    /// Runs a transaction: if every comparison holds, the `success` operations, else the `failure`
    /// ones, atomically, at one revision.
    ///
    /// ```swift
    /// // Compare-and-swap: put only if nobody changed the key since it was read at `read.modRevision`.
    /// let result = try client.transaction(
    ///     compare: [.modRevision(key: key, equals: read.modRevision)],
    ///     success: [.put(key: key, value: newValue)], failure: [.range(key: key)])
    /// ```
    ///
    /// A transaction that compares a key's mod revision and puts that key in its success branch
    /// applies at most once (see `appliesAtMostOnce(compare:success:)`): when its reply is lost, it
    /// is sent to the next member like a read, and if the lost one applied, the resent one's
    /// comparison fails and its failure branch runs.
    ///
    /// - Returns: Which branch ran, the revision, and what its `.range` operations read.
    /// - Throws: `EtcdError`; `.replyLost` as for `put` (unless every operation is a `.range`), for a
    ///   transaction that applies at most once only when no member answered.
    package func transaction(compare: [EtcdCompare], success: [EtcdOperation], failure: [EtcdOperation]) throws(EtcdError)
        -> EtcdTransactionResult
    {
        let readOnly = (success + failure).allSatisfy { if case .range = $0 { true } else { false } }
        let body = EtcdJSON.transactionRequest(compare: compare, success: success, failure: failure)
        let (reply, endpoint) = try call(
            "/v3/kv/txn", body, "transaction", mayWrite: !readOnly,
            resendable: Self.appliesAtMostOnce(compare: compare, success: success))
        return try decoded(endpoint, "transaction") { () throws(EtcdMalformedReply) in try EtcdJSON.transactionResult(reply) }
    }

    /// Compacts the history up to `revision` and waits until it is applied (for tests and operators).
    ///
    /// - Throws: `EtcdError`; `.compacted` when `revision` is already compacted.
    package func compact(revision: Int64) throws(EtcdError) {
        _ = try call("/v3/kv/compaction", ["revision": String(revision), "physical": true], "compaction", mayWrite: true)
    }

    /// Watches every key that starts with `prefix`, from `startRevision` (0: from now).
    ///
    /// The handler gets the events in revision order, all events of one revision in one notice, on
    /// one serial queue, never under a lock. The watch reconnects by itself (failing over to other
    /// members, with back-off) from the last delivered revision + 1, so no event is lost or repeated;
    /// see `EtcdWatchNotice` for what it reports. Keep the returned watch: its deinit cancels it.
    ///
    /// - Parameters:
    ///   - prefix: The key prefix (empty: every key).
    ///   - startRevision: The first revision to report (replayed if in the past); 0 for changes after now.
    ///   - handler: Called with each notice.
    /// - Returns: The watch; `cancel()` stops it.
    package func watch(prefix: [UInt8], startRevision: Int64, handler: @escaping @Sendable (EtcdWatchNotice) -> Void) -> EtcdWatch {
        let stream = EtcdWatchStream(
            client: self, key: prefix.isEmpty ? [0] : prefix, rangeEnd: EtcdKeys.rangeEnd(forPrefix: prefix), startRevision: startRevision,
            handler: handler)
        stream.start()
        return EtcdWatch(stream)
    }

    /// Whether a transaction cannot apply twice, however often it is sent: one of its comparisons
    /// requires a key's mod revision to be `r` and its success branch puts that key, which moves the
    /// key's mod revision past `r` for good. (With `r` = 0, "absent", that holds only while nobody
    /// deletes the key: a store's writes never compare its marker with 0, they come after the
    /// transaction that puts it, whose late copy can only put it again.)
    static func appliesAtMostOnce(compare: [EtcdCompare], success: [EtcdOperation]) -> Bool {
        compare.contains { comparison in
            guard case .modRevision(let key, _) = comparison else { return false }
            return success.contains { if case .put(key, _) = $0 { true } else { false } }
        }
    }

    private func decoded<Value>(_ endpoint: URL, _ what: String, _ body: () throws(EtcdMalformedReply) -> Value) throws(EtcdError) -> Value
    {
        do {
            return try body()
        } catch {
            throw EtcdError(.malformedReply, endpoints: [endpoint], reason: "\(what): \(error.reason)")
        }
    }
}
