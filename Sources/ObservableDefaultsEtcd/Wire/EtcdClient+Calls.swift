import Foundation
import KeyValueObserving

extension EtcdClient {
    /// The result of one request at one endpoint.
    enum Attempt {
        case success(EtcdJSON.Object)
        /// The request did not apply (or cannot have an effect): another endpoint may take it.
        /// `noReply` when it was sent and unanswered (a read).
        case tryElsewhere(String, noReply: Bool)
        case failed(EtcdError)
    }

    /// How long one attempt at one endpoint may wait for a connection and for its reply.
    struct AttemptTimeouts {
        var connect: Duration
        var request: Duration
    }

    /// Sends `body` to `path` with failover, back-off and authentication (see the type's discussion).
    /// With `resendable` (a write that cannot apply twice), a write whose reply was lost goes on to
    /// the next endpoint like a read; the call then throws `.replyLost` if no endpoint answered.
    func call(_ path: String, _ body: EtcdJSON.Object, _ what: String, mayWrite: Bool = false, resendable: Bool = false)
        throws(EtcdError) -> (reply: EtcdJSON.Object, endpoint: URL)
    {
        let data = EtcdJSON.encode(body)
        let deadline = options.callTimeout.map { ContinuousClock.now + $0 }
        var failures: [String] = []
        var unanswered = false
        var (rounds, outOfTime) = (0, false)
        calling: for round in 0..<options.attempts {
            if round > 0 {
                let pause = backoff(afterRound: round)
                if let deadline, ContinuousClock.now + pause >= deadline {
                    outOfTime = true
                    break
                }
                sleep(for: pause)
            }
            failures = []
            rounds += 1
            for index in endpointOrder() {
                guard let timeouts = attemptTimeouts(before: deadline) else {
                    outOfTime = true
                    break calling
                }
                let endpoint = endpoints[index]
                switch attempt(endpoint, path, data, what, mayWrite: mayWrite, resendable: resendable, timeouts: timeouts) {
                case .success(let reply):
                    state.withLock { $0.preferred = index }
                    return (reply, endpoint)
                case .failed(let error):
                    throw error
                case .tryElsewhere(let reason, let noReply):
                    failures.append("\(endpoint.absoluteString): \(reason)")
                    unanswered = unanswered || noReply
                }
            }
        }
        let kind: EtcdError.Kind = !unanswered ? .unreachable : mayWrite ? .replyLost : .timeout
        var reason = "\(what) failed on every endpoint in \(rounds) round\(rounds == 1 ? "" : "s")"
        if outOfTime, let callTimeout = options.callTimeout { reason += " within \(callTimeout)" }
        reason += "; last round: " + failures.joined(separator: "; ")
        if kind == .replyLost { reason += "; a reply was lost, so it may or may not have applied" }
        throw EtcdError(kind, endpoints: endpoints, reason: reason)
    }

    /// The options' timeouts, for an attempt with no deadline of its call.
    var defaultAttemptTimeouts: AttemptTimeouts {
        AttemptTimeouts(connect: options.connectTimeout, request: options.requestTimeout)
    }

    /// The bounds of the next attempt: the options' timeouts, cut to the time left before `deadline`.
    func attemptTimeouts(before deadline: ContinuousClock.Instant?) -> AttemptTimeouts? {
        var timeouts = defaultAttemptTimeouts
        guard let deadline else { return timeouts }
        let left = deadline - ContinuousClock.now
        guard left > .zero else { return nil }
        timeouts.connect = min(timeouts.connect, left)
        timeouts.request = min(timeouts.request, left)
        return timeouts
    }

    /// Sends a cheap read (a serializable count of `key`) to `endpoint` alone, waiting at most
    /// `timeout` to connect and `timeout` for the answer: whether the member answers (a watch's
    /// liveness probe). `.tryElsewhere` means it did not, or cannot serve (no leader).
    func probe(_ endpoint: URL, key: [UInt8], timeout: Duration) -> Attempt {
        let body = EtcdJSON.encode(["key": EtcdJSON.base64(key), "count_only": true, "serializable": true])
        return attempt(
            endpoint, "/v3/kv/range", body, "probe", mayWrite: false, resendable: false,
            timeouts: AttemptTimeouts(connect: min(options.connectTimeout, timeout), request: timeout))
    }

    /// The endpoint indices, the one that answered last first.
    func endpointOrder() -> [Int] {
        let first = state.withLock { $0.preferred }
        return endpoints.indices.map { (first + $0) % endpoints.count }
    }

    /// The back-off before round `round` (1-based): `initialBackoff` doubled per round, at most
    /// `maximumBackoff`.
    func backoff(afterRound round: Int) -> Duration {
        var delay = options.initialBackoff
        for _ in 1..<max(round, 1) where delay < options.maximumBackoff { delay *= 2 }
        return min(delay, options.maximumBackoff)
    }

    private func attempt(
        _ endpoint: URL, _ path: String, _ data: [UInt8], _ what: String, mayWrite: Bool, resendable: Bool, timeouts: AttemptTimeouts
    ) -> Attempt {
        var authenticatedAgain = false
        while true {
            let token: String?
            switch self.token(at: endpoint, timeouts: timeouts) {
            case .token(let value): token = value
            case .stop(let attempt): return attempt
            }
            let outcome = transport.exchange(
                endpoint: endpoint, path: path, body: data, token: token, connectTimeout: timeouts.connect,
                requestTimeout: timeouts.request)
            switch outcome {
            case .notSent(let reason):
                return .tryElsewhere(reason, noReply: false)
            case .noReply(let reason):
                guard mayWrite && !resendable else { return .tryElsewhere(reason, noReply: true) }
                return .failed(
                    EtcdError(
                        .replyLost, endpoints: [endpoint], reason: "\(what): \(reason) after sending it; it may or may not have applied"))
            case .tooLarge(let reason):
                return .failed(EtcdError(.replyTooLarge, endpoints: [endpoint], reason: "\(what): \(reason)"))
            case .reply(200, let body):
                do {
                    return .success(try EtcdJSON.decode(body))
                } catch {
                    return .failed(EtcdError(.malformedReply, endpoints: [endpoint], reason: "\(what): \(error.reason)"))
                }
            case .reply(let status, let body):
                let (message, code) = EtcdJSON.serverError(body)
                let failure = EtcdServerFailure.classify(message: message, code: code)
                switch failure {
                case .tokenInvalid, .authenticationRequired:
                    guard let credentials else {
                        return .failed(
                            EtcdError(
                                .authenticationFailed, endpoints: [endpoint],
                                reason: "\(what): the cluster requires authentication and no credentials were given (\(message))"))
                    }
                    guard !authenticatedAgain else {
                        return .failed(
                            EtcdError(
                                .authenticationFailed, endpoints: [endpoint],
                                reason: "\(what): refused right after authenticating (\(message))",
                                user: credentials.user))
                    }
                    authenticatedAgain = true
                    forgetToken(token, authenticationRequired: failure == .authenticationRequired)
                    continue
                case .notApplied:
                    return .tryElsewhere("\(message) (HTTP \(status))", noReply: false)
                case .maybeApplied where !mayWrite || resendable:
                    return .tryElsewhere("\(message) (HTTP \(status))", noReply: true)
                case .maybeApplied:
                    return .failed(
                        EtcdError(
                            .replyLost, endpoints: [endpoint],
                            reason: "\(what): etcd answered \"\(message)\"; it may or may not have applied",
                            status: status, code: code))
                default:
                    return .failed(serverError(failure, endpoint: endpoint, what: what, message: message, status: status, code: code))
                }
            }
        }
    }

    private func serverError(_ failure: EtcdServerFailure, endpoint: URL, what: String, message: String, status: Int, code: Int?)
        -> EtcdError
    {
        switch failure {
        case .permissionDenied:
            return EtcdError(
                .permissionDenied, endpoints: [endpoint], reason: "\(what): \(message)", user: credentials?.user, status: status, code: code
            )
        case .authenticationFailed:
            return EtcdError(.authenticationFailed, endpoints: [endpoint], reason: "\(what): \(message)", user: credentials?.user)
        case .compacted:
            return EtcdError(.compacted, endpoints: [endpoint], reason: "\(what): \(message)", status: status, code: code)
        default:
            return EtcdError(.server, endpoints: [endpoint], reason: "\(what): \(message)", status: status, code: code)
        }
    }

    // MARK: Authentication

    /// The token to send (nil without credentials or when authentication is off), authenticating at
    /// `endpoint` first when there is none (within `timeouts`, the options' by default).
    func token(at endpoint: URL, timeouts: AttemptTimeouts? = nil) -> TokenOutcome {
        guard let credentials else { return .token(nil) }
        let known: String?? = state.withLock { state in
            if state.authenticationDisabled { return .some(nil) }
            return state.token.map { .some($0) }
        }
        if let known { return .token(known) }
        let body = EtcdJSON.encode(["name": credentials.user, "password": credentials.password])
        let timeouts = timeouts ?? defaultAttemptTimeouts
        let outcome = transport.exchange(
            endpoint: endpoint, path: "/v3/auth/authenticate", body: body, token: nil, connectTimeout: timeouts.connect,
            requestTimeout: timeouts.request)
        switch outcome {
        case .notSent(let reason):
            return .stop(.tryElsewhere("authenticate: \(reason)", noReply: false))
        case .noReply(let reason):
            return .stop(.tryElsewhere("authenticate: \(reason)", noReply: true))
        case .tooLarge(let reason):
            return .stop(.failed(EtcdError(.replyTooLarge, endpoints: [endpoint], reason: "authenticate: \(reason)")))
        case .reply(200, let body):
            // The reply holds the token: never quote it in an error.
            guard let reply = try? EtcdJSON.decode(body), let token = reply["token"] as? String, !token.isEmpty else {
                return .stop(.failed(EtcdError(.malformedReply, endpoints: [endpoint], reason: "authenticate: the reply carries no token")))
            }
            state.withLock { $0.token = token }
            return .token(token)
        case .reply(let status, let body):
            let (message, code) = EtcdJSON.serverError(body)
            let error: EtcdError
            switch EtcdServerFailure.classify(message: message, code: code) {
            case .authenticationNotEnabled:
                state.withLock { $0.authenticationDisabled = true }
                return .token(nil)
            case .notApplied, .maybeApplied:
                return .stop(.tryElsewhere("authenticate: \(message) (HTTP \(status))", noReply: false))
            case .authenticationFailed, .tokenInvalid, .authenticationRequired:
                error = EtcdError(
                    .authenticationFailed, endpoints: [endpoint],
                    reason: "authenticate: etcd refused the user name or password (\(message))",
                    user: credentials.user)
            default:
                error = EtcdError(
                    .server, endpoints: [endpoint], reason: "authenticate: \(message)", user: credentials.user, status: status, code: code)
            }
            return .stop(.failed(error))
        }
    }

    /// Drops `token` (if it is still the current one) so that the next request authenticates again.
    func forgetToken(_ token: String?, authenticationRequired: Bool) {
        state.withLock { state in
            if state.token == token { state.token = nil }
            if authenticationRequired { state.authenticationDisabled = false }
        }
    }

    /// Drops the current token, whichever it is.
    func forgetCurrentToken() {
        state.withLock { $0.token = nil }
    }

    /// The token to send, or how the attempt ended while getting it.
    enum TokenOutcome {
        case token(String?)
        case stop(Attempt)
    }

    private func sleep(for duration: Duration) {
        let microseconds = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        usleep(UInt32(clamping: microseconds))
    }
}
