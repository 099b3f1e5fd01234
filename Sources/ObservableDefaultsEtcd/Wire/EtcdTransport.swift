import Foundation
import KeyValueObserving

/// What became of one HTTP exchange with one endpoint.
enum EtcdExchangeOutcome: Sendable {
    /// The server answered (any status) with this body.
    case reply(status: Int, body: [UInt8])
    /// The request certainly did not reach a server: no byte of it was sent (connection refused,
    /// unknown host, no connection within the connect timeout).
    case notSent(String)
    /// The request was sent, wholly or partly, and no complete reply arrived (timeout, connection
    /// lost): it may have applied.
    case noReply(String)
    /// The reply's body exceeded the transport's `maximumReplySize` (the reason names the cap); the
    /// connection was closed. It would be as large from another member.
    case tooLarge(String)
}

/// Receives what a streaming request (a watch) gets, on the stream's own thread, in order.
protocol EtcdStreamSink: Sendable {
    /// The reply's status.
    func received(status: Int)
    /// Body bytes (HTTP framing removed), in any split.
    func received(_ bytes: [UInt8])
    /// The stream ended (or could not start), with the reason; called once, last.
    func ended(_ reason: String)
}

/// The HTTP/1.1 layer: a small client on POSIX sockets for `POST` requests with a JSON body.
///
/// Not FoundationNetworking: on Linux its `URLSession` traps (`fatalError`, Swift 6.3.1) on every
/// error reply of etcd's gateway, which ends with an HTTP trailer that corelibs mistakes for a new
/// header block. Owning the socket also tells exactly whether a request was sent, so that only
/// requests that certainly did not reach a server are retried. `https` uses the system's OpenSSL
/// (`EtcdTLS`).
///
/// Idle connections are kept per endpoint (at most `maximumIdle`) and reused after checking that
/// the server did not close them. A reply body larger than `maximumReplySize` is refused.
final class EtcdTransport: Sendable {
    /// Idle connections kept per endpoint.
    static let maximumIdle = 4

    private let idle = Locked<[String: [EtcdSocket]]>([:])
    /// TLS for https endpoints (nil when every endpoint is http).
    private let tls: EtcdTLS?
    /// The largest reply body accepted, in bytes.
    let maximumReplySize: Int

    init(tls: EtcdTLS?, maximumReplySize: Int = EtcdClientOptions.defaultMaximumReplySize) {
        self.tls = tls
        self.maximumReplySize = maximumReplySize
    }

    deinit {
        idle.withLock { $0.values.joined().forEach { $0.close() } }
    }

    /// The bytes of the POST request of `path` at `endpoint`.
    static func request(endpoint: URL, path: String, body: [UInt8], token: String?, keepAlive: Bool = true) -> [UInt8] {
        let base = endpoint.path.hasSuffix("/") ? String(endpoint.path.dropLast()) : endpoint.path
        var head = "POST \(base)\(path) HTTP/1.1\r\nHost: \(hostHeader(endpoint))\r\n"
        head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n"
        // gRPC metadata through the gateway: a member without a leader refuses at once ("no leader")
        // instead of queuing the request, and cancels a watch when it loses its leader.
        head += "Grpc-Metadata-hasleader: true\r\n"
        if let token { head += "Authorization: \(token)\r\n" }
        if !keepAlive { head += "Connection: close\r\n" }
        return Array((head + "\r\n").utf8) + body
    }

    private static func hostHeader(_ endpoint: URL) -> String {
        let host = endpoint.host ?? ""
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return endpoint.port.map { "\(bracketed):\($0)" } ?? bracketed
    }

    static func port(of endpoint: URL) -> Int {
        endpoint.port ?? (endpoint.scheme?.lowercased() == "https" ? 443 : 80)
    }

    /// Sends one request and reads its whole reply: at most `connectTimeout` to connect, then
    /// `requestTimeout` for sending and the reply.
    func exchange(
        endpoint: URL, path: String, body: [UInt8], token: String?, connectTimeout: Duration, requestTimeout: Duration
    ) -> EtcdExchangeOutcome {
        let request = EtcdTransport.request(endpoint: endpoint, path: path, body: body, token: token)
        let key = endpoint.absoluteString
        let socket: EtcdSocket
        if let reused = takeIdle(key) {
            socket = reused
        } else {
            do {
                socket = try connect(endpoint, deadline: .now + connectTimeout)
            } catch {
                return .notSent(error.reason)
            }
        }
        let deadline = ContinuousClock.now + requestTimeout
        let (sent, failure) = socket.send(request, deadline: deadline)
        if let failure {
            socket.close()
            return sent == 0 ? .notSent(failure.reason) : .noReply(failure.reason)
        }
        // The parser refuses a body over the cap (as soon as its length is known).
        var parser = EtcdHTTPParser(maximumBodySize: maximumReplySize)
        var status: Int?
        var reply: [UInt8] = []
        while !parser.isComplete {
            let events: [EtcdHTTPParser.Event]
            do {
                let chunk = try socket.receive(deadline: deadline)
                events = chunk.isEmpty ? try parser.finish() : try parser.feed(chunk)
            } catch let error as EtcdSocketFailure {
                socket.close()
                return .noReply(error.timedOut ? "no reply within \(requestTimeout)" : error.reason)
            } catch let error as EtcdHTTPFailure {
                socket.close()
                return error.kind == .tooLarge ? .tooLarge(error.reason) : .noReply(error.reason)
            } catch {
                socket.close()
                return .noReply("\(error)")
            }
            for event in events {
                switch event {
                case .head(let code, _): status = code
                case .body(let bytes): reply += bytes
                case .end: break
                }
            }
        }
        if parser.keepsConnection { putIdle(socket, key) } else { socket.close() }
        return .reply(status: status ?? 0, body: reply)
    }

    /// A new connection to `endpoint` (TLS for https).
    func connect(_ endpoint: URL, deadline: ContinuousClock.Instant) throws(EtcdSocketFailure) -> EtcdSocket {
        let secure = endpoint.scheme?.lowercased() == "https"
        return try EtcdSocket.connect(
            host: endpoint.host ?? "", port: EtcdTransport.port(of: endpoint), tls: secure ? tls : nil, deadline: deadline)
    }

    private func takeIdle(_ key: String) -> EtcdSocket? {
        while let socket = idle.withLock({ $0[key]?.popLast() }) {
            if socket.isReusable { return socket }
            socket.close()
        }
        return nil
    }

    private func putIdle(_ socket: EtcdSocket, _ key: String) {
        let kept = idle.withLock { idle in
            guard idle[key, default: []].count < EtcdTransport.maximumIdle else { return false }
            idle[key, default: []].append(socket)
            return true
        }
        if !kept { socket.close() }
    }

    /// Starts a streaming request on its own connection and thread; `sink` gets what arrives. The
    /// returned stream's `cancel()` ends it.
    func stream(endpoint: URL, path: String, body: [UInt8], token: String?, connectTimeout: Duration, sink: any EtcdStreamSink)
        -> EtcdHTTPStream
    {
        let stream = EtcdHTTPStream()
        let request = EtcdTransport.request(endpoint: endpoint, path: path, body: body, token: token, keepAlive: false)
        let thread = Thread {
            stream.run(transport: self, endpoint: endpoint, request: request, connectTimeout: connectTimeout, sink: sink)
        }
        thread.name = "ObservableDefaultsEtcd.stream"
        thread.start()
        return stream
    }
}

/// One streaming request: its thread connects, sends, and reads until the end or `cancel()`.
final class EtcdHTTPStream: Sendable {
    private struct State {
        var cancelled = false
        var socket: EtcdSocket?
    }

    private let state = Locked(State())

    /// Ends the stream: its thread wakes, closes the connection and calls the sink's `ended` (the
    /// sink ignores calls after cancelling).
    func cancel() {
        let socket = state.withLock { state in
            state.cancelled = true
            return state.socket
        }
        socket?.shutdown()
    }

    fileprivate func run(transport: EtcdTransport, endpoint: URL, request: [UInt8], connectTimeout: Duration, sink: any EtcdStreamSink) {
        let socket: EtcdSocket
        do {
            socket = try transport.connect(endpoint, deadline: .now + connectTimeout)
        } catch {
            sink.ended(error.reason)
            return
        }
        defer { socket.close() }
        let registered = state.withLock { state in
            guard !state.cancelled else { return false }
            state.socket = socket
            return true
        }
        guard registered else {
            sink.ended("cancelled")
            return
        }
        defer { state.withLock { $0.socket = nil } }
        // A member whose host vanished is noticed within about 20 s of silence.
        socket.enableKeepAlive(idleSeconds: 10, intervalSeconds: 5, count: 2)
        if let failure = socket.send(request, deadline: .now + connectTimeout).failure {
            sink.ended(failure.reason)
            return
        }
        var parser = EtcdHTTPParser()
        while true {
            let events: [EtcdHTTPParser.Event]
            do {
                let chunk = try socket.receive(deadline: nil)
                events = chunk.isEmpty ? try parser.finish() : try parser.feed(chunk)
            } catch let error as EtcdSocketFailure {
                sink.ended(error.reason)
                return
            } catch let error as EtcdHTTPFailure {
                sink.ended(error.reason)
                return
            } catch {
                sink.ended("\(error)")
                return
            }
            for event in events {
                switch event {
                case .head(let status, _): sink.received(status: status)
                case .body(let bytes): sink.received(bytes)
                case .end:
                    sink.ended("the stream ended")
                    return
                }
            }
            if parser.isComplete { return }
        }
    }
}
