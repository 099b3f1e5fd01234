import Dispatch
import Foundation
import KeyValueObserving

/// A running watch (`EtcdClient.watch(prefix:startRevision:handler:)`). Keep it: `cancel()` or its
/// deinit stops the watch.
package final class EtcdWatch: Sendable {
    private let stream: EtcdWatchStream

    init(_ stream: EtcdWatchStream) {
        self.stream = stream
    }

    deinit {
        stream.cancel()
    }

    /// Stops the watch. After it returns no handler call starts (a call that already started, on the
    /// watch's queue, may finish). Idempotent; it may be called from the handler.
    package func cancel() {
        stream.cancel()
    }

    // MARK: Test hooks

    /// The revision the watch asks for when it (re)connects: the last queued event's + 1.
    package var nextRevision: Int64 { stream.snapshot.nextRevision }

    /// How many connections the watch started (the first one included).
    package var connectionAttempts: Int { stream.snapshot.attempts }

    /// Returns once every notice queued so far was delivered (or skipped after `cancel()`).
    package func waitForDeliveries() { stream.waitForDeliveries() }
}

/// The machinery of one watch: one streaming `POST /v3/watch` at a time, reconnected (with failover
/// and back-off) from the last delivered revision + 1 until cancelled.
///
/// The connection's thread parses the stream (in order); `control` connects and schedules
/// reconnects (authentication blocks there); `probes` checks that the member still answers;
/// `delivery` calls the handler, one notice at a time. The state is behind one lock, never held
/// while calling out.
final class EtcdWatchStream: Sendable {
    struct State {
        var cancelled = false
        /// Set after `compacted`: the watch ended.
        var finished = false
        /// The next revision to ask for (the last delivered one + 1; 0 until known).
        var nextRevision: Int64
        /// Identifies the current connection; callbacks of older ones are ignored.
        var generation = 0
        var connection: EtcdHTTPStream?
        /// Whether the current connection's watch was created (it streams).
        var created = false
        /// The endpoint of the current (or next) connection.
        var cursor = 0
        /// Failed connection attempts in the current round over the endpoints.
        var failedInRound = 0
        /// Rounds that failed in the current outage (for the back-off).
        var failedRounds = 0
        /// Whether `disconnected` was delivered and `reconnected` not yet.
        var inOutage = false
        /// Connections started (for tests).
        var attempts = 0
    }

    private let client: EtcdClient
    private let key: [UInt8]
    private let rangeEnd: [UInt8]
    private let handler: @Sendable (EtcdWatchNotice) -> Void
    private let state: Locked<State>
    private let control = DispatchQueue(label: "ObservableDefaultsEtcd.watch.control")
    private let delivery = DispatchQueue(label: "ObservableDefaultsEtcd.watch.delivery")
    private let probes = DispatchQueue(label: "ObservableDefaultsEtcd.watch.probe")

    init(client: EtcdClient, key: [UInt8], rangeEnd: [UInt8], startRevision: Int64, handler: @escaping @Sendable (EtcdWatchNotice) -> Void)
    {
        self.client = client
        self.key = key
        self.rangeEnd = rangeEnd
        self.handler = handler
        state = Locked(State(nextRevision: max(startRevision, 0), cursor: client.endpointOrder().first ?? 0))
    }

    func start() {
        control.async { self.connect() }
    }

    func cancel() {
        let connection = state.withLock { state -> EtcdHTTPStream? in
            state.cancelled = true
            state.generation += 1
            defer { state.connection = nil }
            return state.connection
        }
        connection?.cancel()
    }

    var snapshot: State { state.current }

    /// The longest line of the stream accepted.
    var maximumLineLength: Int { client.options.maximumReplySize }

    func waitForDeliveries() {
        delivery.sync {}
    }

    // MARK: Connecting

    private func connect() {
        guard
            let (generation, endpoint, revision) = state.withLock({ state -> (Int, URL, Int64)? in
                guard !state.cancelled && !state.finished else { return nil }
                state.generation += 1
                state.created = false
                state.attempts += 1
                return (state.generation, client.endpoints[state.cursor % client.endpoints.count], state.nextRevision)
            })
        else { return }
        let token: String?
        switch client.token(at: endpoint) {
        case .token(let value):
            token = value
        case .stop(let attempt):
            switch attempt {
            case .failed(let error): fail(generation, endpoint: endpoint, reason: error.reason, kind: error.kind)
            case .tryElsewhere(let text, _): fail(generation, endpoint: endpoint, reason: text)
            case .success: fail(generation, endpoint: endpoint, reason: "authenticated")
            }
            return
        }
        let body = EtcdJSON.encode(EtcdJSON.watchRequest(key: key, rangeEnd: rangeEnd, startRevision: revision))
        let sink = EtcdWatchConnection(stream: self, generation: generation, endpoint: endpoint)
        let connection = client.transport.stream(
            endpoint: endpoint, path: "/v3/watch", body: body, token: token, connectTimeout: client.options.connectTimeout, sink: sink)
        let current = state.withLock { state in
            guard state.generation == generation && !state.cancelled else { return false }
            state.connection = connection
            return true
        }
        guard current else {
            connection.cancel()
            return
        }
        // A member that accepts the connection but never creates the watch counts as a failure.
        let limit = client.options.connectTimeout + client.options.requestTimeout
        control.asyncAfter(deadline: .now() + limit.dispatchInterval) {
            if self.state.withLock({ $0.generation == generation && !$0.created }) {
                self.fail(generation, endpoint: endpoint, reason: "the watch was not created within \(limit)")
            }
        }
    }

    /// The connection `generation` failed: move to the next endpoint, tell the handler when a whole
    /// round failed (once per outage), and connect again (at once within a round, after a back-off
    /// between rounds).
    /// `kind` is the kind of the `disconnected` notice's error if this failure ends a round
    /// (`.authenticationFailed` when the credentials are refused, `.unreachable` otherwise).
    func fail(_ generation: Int, endpoint: URL, reason: String, kind: EtcdError.Kind = .unreachable) {
        let endpointCount = client.endpoints.count
        let decision = state.withLock { state -> (connection: EtcdHTTPStream?, delay: Duration)? in
            guard state.generation == generation && !state.cancelled && !state.finished else { return nil }
            state.generation += 1
            let connection = state.connection
            state.connection = nil
            state.cursor += 1
            if state.created {
                // A running stream broke: try the other endpoints at once.
                state.created = false
                state.failedInRound = 0
                state.failedRounds = 0
                return (connection, .zero)
            }
            state.failedInRound += 1
            guard state.failedInRound >= endpointCount else { return (connection, .zero) }
            state.failedInRound = 0
            state.failedRounds += 1
            if !state.inOutage {
                state.inOutage = true
                let error = EtcdError(
                    kind, endpoints: client.endpoints, reason: "watch: no endpoint answered; last at \(endpoint.absoluteString): \(reason)",
                    user: kind == .authenticationFailed ? client.credentials?.user : nil)
                enqueue(.disconnected(error))
            }
            return (connection, client.backoff(afterRound: state.failedRounds))
        }
        guard let decision else { return }
        decision.connection?.cancel()
        control.asyncAfter(deadline: .now() + decision.delay.dispatchInterval) {
            self.connect()
        }
    }

    /// Probes the member of connection `generation` every `watchLivenessInterval` while it streams
    /// (on `probes`, not blocking `control`): a member that does not answer within the interval, or
    /// answers that it cannot serve (no leader), fails the connection, so the watch resumes from its
    /// revision on the next endpoint. A stream can be silent because nothing changed, so its silence
    /// alone proves nothing; a probe's silence does.
    private func probeLater(_ generation: Int, endpoint: URL) {
        let interval = client.options.watchLivenessInterval
        probes.asyncAfter(deadline: .now() + interval.dispatchInterval) {
            guard self.state.withLock({ $0.generation == generation && $0.created && !$0.cancelled && !$0.finished }) else { return }
            switch self.client.probe(endpoint, key: self.key, timeout: interval) {
            case .tryElsewhere(let reason, _):
                let reason = "the member did not answer a liveness probe within \(interval): \(reason)"
                self.fail(generation, endpoint: endpoint, reason: reason)
            case .success, .failed:
                // `.failed`: the member answered (a refusal is the stream's business, not liveness).
                self.probeLater(generation, endpoint: endpoint)
            }
        }
    }

    // MARK: The stream

    /// One line of the stream of connection `generation`.
    func received(line: [UInt8], generation: Int, endpoint: URL, status: Int) {
        let reply: EtcdWatchReply
        do {
            reply = try EtcdWatchReply.decode(line, status: status)
        } catch {
            fail(generation, endpoint: endpoint, reason: "malformed watch reply: \(error.reason)")
            return
        }
        switch reply {
        case .refused(let reason):
            fail(generation, endpoint: endpoint, reason: reason)
        case .compacted(let compactRevision):
            let connection = state.withLock { state -> EtcdHTTPStream? in
                guard state.generation == generation && !state.cancelled && !state.finished else { return nil }
                state.finished = true
                enqueue(.compacted(compactRevision: compactRevision))
                defer { state.connection = nil }
                return state.connection
            }
            connection?.cancel()
        case .cancelled(let reason):
            let failure = EtcdServerFailure.classify(message: reason, code: nil)
            if failure == .tokenInvalid || failure == .authenticationRequired {
                client.forgetCurrentToken()
            }
            fail(generation, endpoint: endpoint, reason: reason)
        case .events(let events, let headerRevision, let created):
            received(events, headerRevision: headerRevision, created: created, generation: generation, endpoint: endpoint)
        }
    }

    private func received(_ events: [EtcdWatchEvent], headerRevision: Int64, created: Bool, generation: Int, endpoint: URL) {
        let created = state.withLock { state -> Bool in
            guard state.generation == generation && !state.cancelled && !state.finished else { return false }
            if created {
                state.created = true
                state.failedInRound = 0
                state.failedRounds = 0
                if state.nextRevision == 0 { state.nextRevision = headerRevision + 1 }
                if state.inOutage {
                    state.inOutage = false
                    enqueue(.reconnected)
                }
            }
            if let last = events.last {
                state.nextRevision = last.modRevision + 1
                enqueue(.events(events, revision: max(headerRevision, last.modRevision)))
            }
            return created
        }
        if created { probeLater(generation, endpoint: endpoint) }
    }

    /// Ends the watch for good because of connection `generation`: the handler gets
    /// `.disconnected(error)`, then nothing more (a reconnect would meet the same reply again).
    func stop(_ generation: Int, error: EtcdError) {
        let connection = state.withLock { state -> EtcdHTTPStream? in
            guard state.generation == generation && !state.cancelled && !state.finished else { return nil }
            state.finished = true
            enqueue(.disconnected(error))
            defer { state.connection = nil }
            return state.connection
        }
        connection?.cancel()
    }

    // MARK: Delivery

    /// Queues `notice` for the handler. Called with the state's lock held, so notices are queued in
    /// the order the state changed.
    private func enqueue(_ notice: EtcdWatchNotice) {
        delivery.async {
            guard !self.state.withLock({ $0.cancelled }) else { return }
            self.handler(notice)
        }
    }
}

/// The sink of one watch connection: splits the stream into lines and hands them to the stream.
final class EtcdWatchConnection: EtcdStreamSink {
    private let stream: EtcdWatchStream
    private let generation: Int
    private let endpoint: URL
    private let splitter: Locked<(EtcdLineSplitter, status: Int)>

    init(stream: EtcdWatchStream, generation: Int, endpoint: URL) {
        self.stream = stream
        self.generation = generation
        self.endpoint = endpoint
        splitter = Locked((EtcdLineSplitter(maximumLineLength: stream.maximumLineLength), status: 0))
    }

    func received(status: Int) {
        splitter.withLock { $0.status = status }
    }

    func received(_ bytes: [UInt8]) {
        let (split, status) = splitter.withLock { ($0.0.append(bytes), $0.status) }
        // The lines before one over the cap are delivered, whatever the split.
        for line in split.lines { stream.received(line: line, generation: generation, endpoint: endpoint, status: status) }
        if split.exceeded {
            let cap = EtcdClientOptions.describe(size: stream.maximumLineLength)
            stream.stop(
                generation,
                error: EtcdError(
                    .replyTooLarge, endpoints: [endpoint],
                    reason: "watch: a line of the stream exceeds \(cap) (maximumReplySize); the watch stopped"))
        }
    }

    func ended(_ reason: String) {
        stream.fail(generation, endpoint: endpoint, reason: "the watch stream ended: \(reason)")
    }
}
