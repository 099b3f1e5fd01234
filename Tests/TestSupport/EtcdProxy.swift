import Foundation
import KeyValueObserving

#if canImport(Glibc)
import Glibc

/// A TCP forwarder between a client and one etcd member, on a free loopback port, that a test can
/// break on purpose: refuse connections (as a stopped member does), swallow requests (accepted and
/// never answered: a member that hangs after receiving a request), or reset the connections it
/// carries (a member that dies mid-stream). Threads pump the bytes; `stop()` (and deinit) ends them.
package final class EtcdProxy: @unchecked Sendable {
    // Invariant: `mode`, `listener`, `connections` and the faults are accessed only with `lock` held; the pump
    // threads own their descriptors' reads and writes.
    /// What the proxy does with connections.
    package enum Mode: Sendable {
        /// Forwards both ways.
        case forward
        /// Not listening: connecting is refused.
        case refuse
        /// Accepts and reads, never forwards or answers.
        case swallow
    }

    private let targetPort: Int
    private let port: Int
    private let lock = Lock()
    private var mode: Mode = .refuse
    private var listener: Int32 = -1
    private var connections: Set<Int32> = []
    private var swallowed = 0
    /// What to do with the next transaction requests, in order.
    private var transactionFaults: [TransactionFault] = []
    /// The base64 of the key whose transactions are all swallowed, if any.
    private var swallowedKey: Data?
    /// The transaction requests held (`TransactionFault.hold`), in order.
    private var held: [Data] = []
    /// The base64 of the key whose next transaction is held, if any.
    private var heldKey: Data?

    /// The proxy's URL, to give a client instead of the member's.
    package var endpoint: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Starts forwarding to 127.0.0.1:`targetPort`.
    package init(targetPort: Int) throws {
        self.targetPort = targetPort
        port = try freeLoopbackPorts(1)[0]
        try set(.forward)
    }

    deinit {
        stop()
    }

    /// Switches to `mode`. Connections already carried keep being carried (see `resetConnections()`).
    package func set(_ mode: Mode) throws {
        let (old, new) = try lock.withLock { () throws -> (Int32, Int32) in
            self.mode = mode
            let old = listener
            if mode == .refuse {
                listener = -1
                return (old, -1)
            }
            guard listener < 0 else { return (-1, -1) }
            listener = try listen(on: port)
            return (-1, listener)
        }
        if old >= 0 {
            shutdown(old, Int32(SHUT_RDWR))
            close(old)
        }
        if new >= 0 {
            Thread { self.acceptLoop(new) }.start()
        }
    }

    /// How many descriptors of carried connections are open (two per forwarded connection).
    package var connectionCount: Int {
        lock.withLock { connections.count }
    }

    /// How many bytes the proxy swallowed (in `.swallow` mode).
    package var bytesSwallowed: Int {
        lock.withLock { swallowed }
    }

    /// What the proxy does with one transaction request (`POST /v3/kv/txn`) while forwarding.
    package enum TransactionFault: Sendable {
        /// Forwards it (and its reply).
        case forward
        /// Reads it and never forwards or answers it; its connection then stays silent (a member
        /// that hangs after receiving a request).
        case swallow
        /// Forwards it, drops its reply and closes its connection (a member that applied a request
        /// and died before answering).
        case loseReply
        /// Reads it and keeps it unanswered (its connection then stays silent) until
        /// `releaseHeldTransactions()` sends it on (a request in the socket buffer of a frozen
        /// member, which is continued later).
        case hold
    }

    /// Treats the next transaction requests as `faults` says, one each, in order; other requests,
    /// and transactions after those, are forwarded.
    package func injectTransactionFaults(_ faults: [TransactionFault]) {
        lock.withLock { transactionFaults = faults }
    }

    /// Swallows the next `count` transaction requests (see `TransactionFault.swallow`).
    package func swallowTransactions(_ count: Int) {
        injectTransactionFaults(Array(repeating: .swallow, count: count))
    }

    /// Swallows every transaction request that names the etcd key `key` (each try at a write of it,
    /// however often it is sent again) until this is called again with `nil`; transactions that do
    /// not name it (a marker's fence) are treated as before.
    package func swallowTransactions(naming key: String?) {
        lock.withLock { swallowedKey = key.map { Data(Data($0.utf8).base64EncodedString().utf8) } }
    }

    /// Loses the replies of the next `count` transactions (see `TransactionFault.loseReply`).
    package func loseTransactionReplies(_ count: Int) {
        injectTransactionFaults(Array(repeating: .loseReply, count: count))
    }

    /// Holds the next transaction request that names the etcd key `key` (see `TransactionFault.hold`).
    package func holdTransaction(naming key: String) {
        lock.withLock { heldKey = Data(Data(key.utf8).base64EncodedString().utf8) }
    }

    /// Sends each held transaction request to the member on a connection of its own, and returns
    /// the replies' bodies (empty if the member did not answer one), in order.
    package func releaseHeldTransactions() -> [String] {
        let requests = lock.withLock {
            defer { held = [] }
            return held
        }
        return requests.map { request in
            guard let server = connectToTarget() else { return "" }
            defer { close(server) }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let sent = request.withUnsafeBytes { send(server, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent == request.count else { return "" }
            // The reply: its head, then as many bytes as its Content-Length says.
            var reply = Data()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                if let end = reply.range(of: Data("\r\n\r\n".utf8)) {
                    let head = String(decoding: reply[..<end.lowerBound], as: UTF8.self).lowercased()
                    let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                    if let length, reply.count - end.upperBound >= length {
                        return String(decoding: reply[end.upperBound...], as: UTF8.self)
                    }
                }
                let count = recv(server, &buffer, buffer.count, 0)
                if count <= 0 { return String(decoding: reply, as: UTF8.self) }
                reply.append(contentsOf: buffer[..<count])
            }
        }
    }

    /// Ends every connection the proxy carries (both sides see the connection close).
    package func dropConnections() {
        lock.withLock {
            for descriptor in connections { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    /// Stops listening and ends every connection.
    package func stop() {
        try? set(.refuse)
        dropConnections()
    }

    private func listen(on port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw EtcdHarnessError("socket failed: errno \(errno)") }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = loopbackAddress(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw EtcdHarnessError("the proxy cannot listen on port \(port): errno \(errno)")
        }
        return descriptor
    }

    private func acceptLoop(_ listener: Int32) {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return  // the listener was closed
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let mode = lock.withLock {
                connections.insert(client)
                return self.mode
            }
            if mode == .swallow {
                let pair = Pair(client, nil)
                Thread { self.pump(pair, from: client, to: nil) }.start()
                continue
            }
            guard let server = connectToTarget() else {
                finish(Pair(client, nil))
                continue
            }
            lock.withLock { _ = connections.insert(server) }
            let pair = Pair(client, server)
            Thread { self.pump(pair, from: client, to: server) }.start()
            Thread { self.pump(pair, from: server, to: client) }.start()
        }
    }

    /// The two descriptors of one carried connection, closed when both pumps (or the one) finished.
    private final class Pair: @unchecked Sendable {
        // Invariant: `running`, `isSilenced`, `losesReply` and `holds` are only accessed with the proxy's lock held.
        let client: Int32
        let server: Int32?
        var running: Int
        /// Whether the client's bytes are swallowed from now on (`swallowTransactions`).
        var isSilenced = false
        /// Whether the server's next reply is dropped and the connection closed (`loseTransactionReplies`).
        var losesReply = false
        /// Whether the client's bytes are held (`TransactionFault.hold`).
        var holds = false

        init(_ client: Int32, _ server: Int32?) {
            self.client = client
            self.server = server
            running = server == nil ? 1 : 2
        }
    }

    private func connectToTarget() -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = loopbackAddress(port: targetPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    /// Copies bytes from `source` to `destination` (or discards them) until either side closes, then
    /// ends both directions.
    private func pump(_ pair: Pair, from source: Int32, to destination: Int32?) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(source, &buffer, buffer.count, 0)
            if count <= 0 { break }
            guard let destination, !injectsFault(pair, from: source, buffer[..<count]) else {
                lock.withLock { swallowed += count }
                continue
            }
            if source != pair.client, lock.withLock({ pair.losesReply }) { break }
            var sent = 0
            while sent < count {
                let result = buffer[sent..<count].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if result <= 0 { break }
                sent += result
            }
            if sent < count { break }
        }
        shutdown(source, Int32(SHUT_RDWR))
        if let destination { shutdown(destination, Int32(SHUT_RDWR)) }
        finish(pair)
    }

    /// Whether the client's `bytes` are to be swallowed; arms a lost reply. A request is taken to
    /// start a received chunk (a client writes each one at once).
    private func injectsFault(_ pair: Pair, from source: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        guard source == pair.client else { return false }
        return lock.withLock {
            if pair.isSilenced {
                // A held request's body, if it came after its head.
                if pair.holds, !held.isEmpty { held[held.count - 1].append(contentsOf: bytes) }
                return true
            }
            guard bytes.starts(with: "POST /v3/kv/txn ".utf8) else { return false }
            if let swallowedKey, Data(bytes).range(of: swallowedKey) != nil {
                pair.isSilenced = true
                return true
            }
            if let heldKey, Data(bytes).range(of: heldKey) != nil {
                (pair.isSilenced, pair.holds, self.heldKey) = (true, true, nil)
                held.append(Data(bytes))
                return true
            }
            guard !transactionFaults.isEmpty else { return false }
            switch transactionFaults.removeFirst() {
            case .forward: return false
            case .swallow:
                pair.isSilenced = true
                return true
            case .loseReply:
                pair.losesReply = true
                return false
            case .hold:
                (pair.isSilenced, pair.holds) = (true, true)
                held.append(Data(bytes))
                return true
            }
        }
    }

    /// One pump of `pair` finished; the last one closes the descriptors (no thread uses them then).
    private func finish(_ pair: Pair) {
        let last = lock.withLock { () -> Bool in
            pair.running -= 1
            guard pair.running <= 0 else { return false }
            connections.remove(pair.client)
            if let server = pair.server { connections.remove(server) }
            return true
        }
        guard last else { return }
        close(pair.client)
        if let server = pair.server { close(server) }
    }
}
#endif
