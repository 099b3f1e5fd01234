import KeyValueObserving

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// Why a socket operation failed: whether its deadline passed, for decisions, and words for an
/// error message (callers decide by the flag, never by the words).
struct EtcdSocketFailure: Error {
    /// The deadline passed (anything else — refused, reset, TLS refused, truncated — is told by
    /// the reason).
    let timedOut: Bool
    let reason: String

    init(reason: String, timedOut: Bool = false) {
        self.timedOut = timedOut
        self.reason = reason
    }
}

/// One TCP connection, blocking calls bounded by deadlines (`poll`), never raising SIGPIPE.
///
/// `shutdown()` may be called from any thread to wake a blocked call; only the owner closes the
/// descriptor (`close()`), after its last use.
final class EtcdSocket: @unchecked Sendable {
    // Invariant: `descriptor` and `session` are written only by `init`, `connect` (before the socket
    // is shared) and `close()`; `close()` is called by the single owner after every other call on
    // this socket returned (a concurrent `shutdown()` is guarded by `lock`, which `close()` takes too).
    private var descriptor: Int32
    /// The TLS connection over the socket, for https (set once by `connect`, released by `close()`).
    private var session: EtcdTLSSession?
    private let lock = Lock()

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        close()
    }

    /// Connects to `host`:`port` (every address the name resolves to, in order) before `deadline`,
    /// and with `tls` completes a verified TLS handshake.
    ///
    /// - Throws: `EtcdSocketFailure` when nothing was connected: no byte of a request was sent then.
    static func connect(host: String, port: Int, tls: EtcdTLS?, deadline: ContinuousClock.Instant) throws(EtcdSocketFailure) -> EtcdSocket {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        // An enum's case in glibc's headers, a plain integer in Musl's and Darwin's.
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            throw EtcdSocketFailure(reason: "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(list) }
        var lastFailure = "no address for \(host)"
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let address = next {
            next = address.pointee.ai_next
            let descriptor = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
            guard descriptor >= 0 else {
                lastFailure = "socket: \(Self.errorText(errno))"
                continue
            }
            let socket = EtcdSocket(descriptor: descriptor)
            socket.configure()
            do {
                try socket.connect(address.pointee.ai_addr, address.pointee.ai_addrlen, deadline: deadline)
            } catch {
                lastFailure = error.reason
                continue
            }
            guard let tls else { return socket }
            // A refused certificate is final: the next address serves the same one.
            socket.session = try tls.handshake(descriptor: socket.descriptor, host: host) { (events) throws(EtcdSocketFailure) in
                try socket.wait(for: events, until: deadline, what: "TLS handshake")
            }
            return socket
        }
        throw EtcdSocketFailure(reason: lastFailure)
    }

    private func configure() {
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        var yes: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
        setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    /// Turns on TCP keep-alive probes (after `idleSeconds` of silence, every `intervalSeconds`,
    /// `count` times): a watch on a member whose host vanished ends instead of waiting forever.
    func enableKeepAlive(idleSeconds: Int32, intervalSeconds: Int32, count: Int32) {
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_KEEPALIVE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Glibc) || canImport(Musl)
        var idle = idleSeconds
        var interval = intervalSeconds
        var probes = count
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_KEEPIDLE, &idle, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_KEEPINTVL, &interval, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_KEEPCNT, &probes, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    private func connect(_ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t, deadline: ContinuousClock.Instant)
        throws(EtcdSocketFailure)
    {
        if systemConnect(descriptor, address, length) == 0 { return }
        guard errno == EINPROGRESS || errno == EINTR else { throw EtcdSocketFailure(reason: Self.connectText(errno)) }
        try wait(for: Int16(POLLOUT), until: deadline, what: "connect")
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &size)
        guard error == 0 else { throw EtcdSocketFailure(reason: Self.connectText(error)) }
    }

    /// Sends all of `bytes` before `deadline`; returns how many were sent when it failed.
    func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant) -> (sent: Int, failure: EtcdSocketFailure?) {
        var sent = 0
        while sent < bytes.count {
            if let session {
                let events: Int16
                switch bytes[sent...].withUnsafeBytes({ session.write($0) }) {
                case .done(let count):
                    sent += count
                    continue
                case .wantRead: events = Int16(POLLIN)
                case .wantWrite: events = Int16(POLLOUT)
                case .closed, .truncated: return (sent, EtcdSocketFailure(reason: "send: the server closed the connection"))
                case .failed(let reason): return (sent, EtcdSocketFailure(reason: "send: \(reason)"))
                }
                do {
                    try wait(for: events, until: deadline, what: "send")
                } catch {
                    return (sent, error)
                }
                continue
            }
            let result = bytes[sent...].withUnsafeBytes { buffer in
                #if canImport(Darwin)
                systemSend(descriptor, buffer.baseAddress, buffer.count, 0)
                #else
                systemSend(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
                #endif
            }
            if result > 0 {
                sent += result
                continue
            }
            if result < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                do {
                    try wait(for: Int16(POLLOUT), until: deadline, what: "send")
                } catch {
                    return (sent, error)
                }
                continue
            }
            return (sent, EtcdSocketFailure(reason: "send: \(Self.errorText(errno))"))
        }
        return (sent, nil)
    }

    /// Receives some bytes before `deadline` (nil deadline: waits as long as it takes); an empty
    /// result means the peer closed the connection.
    func receive(deadline: ContinuousClock.Instant?) throws(EtcdSocketFailure) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let session {
                switch buffer.withUnsafeMutableBytes({ session.read(into: $0) }) {
                case .done(let count): return Array(buffer[..<count])
                case .wantRead: try wait(for: Int16(POLLIN), until: deadline, what: "reply")
                case .wantWrite: try wait(for: Int16(POLLOUT), until: deadline, what: "reply")
                case .closed: return []
                case .truncated:
                    throw EtcdSocketFailure(
                        reason: "receive: the connection ended without TLS's close_notify: the reply may be truncated")
                case .failed(let reason): throw EtcdSocketFailure(reason: "receive: \(reason)")
                }
                continue
            }
            let result = buffer.withUnsafeMutableBytes { systemReceive(descriptor, $0.baseAddress, $0.count, 0) }
            if result >= 0 { return Array(buffer[..<result]) }
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw EtcdSocketFailure(reason: "receive: \(Self.errorText(errno))")
            }
            try wait(for: Int16(POLLIN), until: deadline, what: "reply")
        }
    }

    /// Whether an idle connection can carry a request: nothing is readable on it (an idle
    /// connection becomes readable only when the server closed it or sent something unexpected).
    var isReusable: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 0) != 0 else { return true }
        // Over TLS the server may send records that carry no data (TLS 1.3 session tickets).
        guard let session else { return false }
        var byte: [UInt8] = [0]
        if case .wantRead = byte.withUnsafeMutableBytes({ session.read(into: $0) }) { return true }
        return false
    }

    /// Wakes every blocked call on this socket (from any thread); they fail or see the end.
    func shutdown() {
        lock.withLock {
            if descriptor >= 0 { _ = systemShutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    /// Closes the descriptor (the owner, once no other call runs). Idempotent.
    func close() {
        lock.withLock {
            session = nil
            if descriptor >= 0 { _ = systemClose(descriptor) }
            descriptor = -1
        }
    }

    private func wait(for events: Int16, until deadline: ContinuousClock.Instant?, what: String) throws(EtcdSocketFailure) {
        while true {
            var timeout: Int32 = -1
            if let deadline {
                let remaining = ContinuousClock.now.duration(to: deadline)
                if remaining <= .zero { throw EtcdSocketFailure(reason: "\(what) timed out", timedOut: true) }
                timeout = Int32(
                    clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
            }
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let result = poll(&entry, 1, timeout)
            if result > 0 { return }
            if result < 0 && errno != EINTR { throw EtcdSocketFailure(reason: "\(what): poll: \(Self.errorText(errno))") }
        }
    }

    private static func connectText(_ code: Int32) -> String {
        code == ECONNREFUSED ? "connection refused" : "connect: \(errorText(code))"
    }

    static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}

// The C calls under names that the methods above (connect, send, shutdown, close) do not shadow: at
// file scope the unqualified names are the C library's.
private let systemConnect = connect
private let systemSend = send
private let systemReceive = recv
private let systemShutdown = shutdown
private let systemClose = close
