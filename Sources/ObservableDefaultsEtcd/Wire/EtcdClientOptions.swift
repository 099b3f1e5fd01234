import Dispatch

/// Timeouts, retries and back-off of an `EtcdClient`.
///
/// Every bound is finite. A call makes at most `attempts` rounds over the endpoints; in a round each
/// endpoint costs at most `connectTimeout` (no connection) or `requestTimeout` (sent, no reply: a
/// read, or a write that cannot apply twice, goes on to the next endpoint after that), and between
/// rounds the client sleeps `initialBackoff`, doubled per round up to `maximumBackoff`; with
/// `callTimeout`, the whole call also ends by then. With the defaults and members that refuse
/// connections or have no leader (an election), a call gives up after about 3.1 s of back-off
/// (0.1 + 0.2 + 0.4 + 0.8 + 1.6 s), which covers an etcd election with its default timers.
///
/// A watch probes its member every `watchLivenessInterval` while it streams: a member that does not
/// answer a probe within that interval (frozen, overloaded, cut off) is left, and the watch resumes
/// from its revision on the next endpoint.
///
/// ```swift
/// // A client for a fleet on a slow network: longer replies, the same back-off.
/// let options = EtcdClientOptions(requestTimeout: .seconds(10))
/// ```
package struct EtcdClientOptions: Sendable, Hashable {
    /// The longest wait for one attempt's reply at one endpoint once it is sent (default 5 s).
    package var requestTimeout: Duration
    /// The longest wait for a connection to one endpoint (default 2 s).
    package var connectTimeout: Duration
    /// How many rounds over all endpoints a call makes before it throws `.unreachable` (or
    /// `.timeout`) (default 6).
    package var attempts: Int
    /// The back-off before the second round; each further round doubles it (default 100 ms).
    package var initialBackoff: Duration
    /// The longest back-off between rounds, also the watch's longest wait between reconnect rounds
    /// (default 2 s).
    package var maximumBackoff: Duration
    /// A PEM file of certificate authorities trusted for https endpoints in addition to the
    /// system's trust store: a private CA (default none).
    package var trustedCertificatesFile: String?
    /// The largest reply body, and the longest line of a watch's stream, accepted, in bytes
    /// (default 64 MiB, `defaultMaximumReplySize`). A larger one fails with `.replyTooLarge` naming
    /// the cap (a watch stops: it would meet the same line again) instead of growing memory
    /// without bound.
    package var maximumReplySize: Int

    /// The default `maximumReplySize`: 64 MiB.
    package static let defaultMaximumReplySize = 64 * 1024 * 1024
    /// The longest a call takes, all its attempts and back-off included; a call still going then
    /// throws `.timeout` (or `.unreachable`, `.replyLost`) (default none: only `attempts` bound it).
    package var callTimeout: Duration?
    /// How often a streaming watch probes its member with a cheap read on a separate connection,
    /// and how long the probe waits for the answer before the watch moves to the next endpoint
    /// (default 1 s: a silent member is left within about 2 s).
    package var watchLivenessInterval: Duration

    /// Options with the documented defaults, or the given values.
    ///
    /// - Parameters:
    ///   - requestTimeout: The longest wait for a reply once a request is sent (positive).
    ///   - connectTimeout: The longest wait for a connection (positive).
    ///   - attempts: Rounds over all endpoints (at least 1).
    ///   - initialBackoff: The first back-off between rounds.
    ///   - maximumBackoff: The longest back-off.
    ///   - trustedCertificatesFile: A PEM file of private certificate authorities for https.
    ///   - maximumReplySize: The largest reply body and watch line accepted, in bytes (positive).
    ///   - callTimeout: The longest a call takes (positive), or nil for no bound beyond `attempts`.
    ///   - watchLivenessInterval: The interval of a watch's liveness probes and their deadline
    ///     (positive).
    package init(
        requestTimeout: Duration = .seconds(5),
        connectTimeout: Duration = .seconds(2),
        attempts: Int = 6,
        initialBackoff: Duration = .milliseconds(100),
        maximumBackoff: Duration = .seconds(2),
        trustedCertificatesFile: String? = nil,
        maximumReplySize: Int = EtcdClientOptions.defaultMaximumReplySize,
        callTimeout: Duration? = nil,
        watchLivenessInterval: Duration = .seconds(1)
    ) {
        precondition(attempts >= 1, "EtcdClientOptions: attempts must be at least 1 (got \(attempts))")
        precondition(
            requestTimeout > .zero && connectTimeout > .zero,
            "EtcdClientOptions: timeouts must be positive (got request \(requestTimeout), connect \(connectTimeout))")
        precondition(
            initialBackoff >= .zero && maximumBackoff >= initialBackoff,
            "EtcdClientOptions: back-off must satisfy 0 ≤ initialBackoff ≤ maximumBackoff")
        precondition(
            (callTimeout ?? .seconds(1)) > .zero && watchLivenessInterval > .zero,
            "EtcdClientOptions: callTimeout and watchLivenessInterval must be positive")
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.attempts = attempts
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        precondition(maximumReplySize > 0, "EtcdClientOptions: maximumReplySize must be positive (got \(maximumReplySize))")
        self.trustedCertificatesFile = trustedCertificatesFile
        self.callTimeout = callTimeout
        self.watchLivenessInterval = watchLivenessInterval
        self.maximumReplySize = maximumReplySize
    }
}

extension EtcdClientOptions {
    /// `size` bytes in words for an error message: "64 MiB", "1 KiB", "1000 bytes".
    static func describe(size: Int) -> String {
        if size >= 1 << 20 && size % (1 << 20) == 0 { return "\(size >> 20) MiB" }
        if size >= 1 << 10 && size % (1 << 10) == 0 { return "\(size >> 10) KiB" }
        return "\(size) bytes"
    }
}

extension Duration {
    /// This duration for Dispatch's deadlines (nanoseconds, clamped).
    var dispatchInterval: DispatchTimeInterval {
        .nanoseconds(Int(clamping: components.seconds &* 1_000_000_000 &+ components.attoseconds / 1_000_000_000))
    }
}
