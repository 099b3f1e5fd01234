/// What an error reply of etcd means for the request that got it.
enum EtcdServerFailure: Equatable, Sendable {
    /// The token is unknown or expired (or the auth store changed since it was issued): authenticate
    /// again and repeat.
    case tokenInvalid
    /// Authentication is enabled and the request carried no token.
    case authenticationRequired
    /// The user or password was refused.
    case authenticationFailed
    /// Authentication is not enabled: send requests without a token.
    case authenticationNotEnabled
    /// The user lacks the permission.
    case permissionDenied
    /// The member refused before proposing it (no leader, overloaded, a learner): the request
    /// certainly did not apply; another member may take it.
    case notApplied
    /// The member gave up waiting for the request's outcome (timeout, leader change, stopping): it
    /// may have applied.
    case maybeApplied
    /// The revision asked for was compacted.
    case compacted
    /// Any other refusal (invalid request, future revision, …).
    case other

    /// etcd's own error messages (3.x: `etcdserver/api/v3rpc/rpctypes`, after their `etcdserver: `
    /// prefix; the last two are gRPC's), in the order they are tried, and what each means. A reply
    /// whose message contains a phrase (case-insensitively) has its meaning. These words are the
    /// only ones of etcd the client depends on: the codes alone are too coarse (no leader and a
    /// lost leader are both UNAVAILABLE, and only one of them may have applied).
    static let phrases: [(phrase: String, failure: EtcdServerFailure)] = [
        ("invalid auth token", .tokenInvalid),
        ("revision of auth store is old", .tokenInvalid),
        ("user name is empty", .authenticationRequired),
        ("authentication failed, invalid user ID or password", .authenticationFailed),
        ("user name not found", .authenticationFailed),
        ("authentication is not enabled", .authenticationNotEnabled),
        ("permission denied", .permissionDenied),
        ("mvcc: required revision has been compacted", .compacted),
        ("no leader", .notApplied),
        ("too many requests", .notApplied),
        ("proposal dropped", .notApplied),
        ("not capable", .notApplied),
        ("unhealthy cluster", .notApplied),
        ("rpc not supported for learner", .notApplied),
        // Also "…, possibly due to previous leader failure", "…, possibly due to connection lost",
        // "…, leader transfer took too long", "…, waiting for the applied index took too long".
        ("request timed out", .maybeApplied),
        ("leader changed", .maybeApplied),
        ("server stopped", .maybeApplied),
        ("request cancelled", .maybeApplied),
        ("context canceled", .maybeApplied),
        ("context deadline exceeded", .maybeApplied),
    ]

    /// Classifies an error reply by etcd's message (`phrases`), else by its gRPC code:
    /// PERMISSION_DENIED (7) is `.permissionDenied`; CANCELLED (1), DEADLINE_EXCEEDED (4) and
    /// UNAVAILABLE (14) are `.maybeApplied`.
    static func classify(message: String, code: Int?) -> EtcdServerFailure {
        let text = message.lowercased()
        if let entry = phrases.first(where: { text.contains($0.phrase.lowercased()) }) { return entry.failure }
        switch code {
        case 7: return .permissionDenied
        case 1, 4, 14: return .maybeApplied
        default: return .other
        }
    }
}
