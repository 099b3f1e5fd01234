/// An incremental parser of HTTP/1.1 responses: the status and headers, then the body framed by
/// `Transfer-Encoding: chunked` (trailers skipped: etcd's gateway sends one after every error
/// reply), `Content-Length`, or the end of the connection. Bytes may arrive in any split.
struct EtcdHTTPParser {
    enum Event: Equatable {
        /// The status line and headers (names lowercased) were read.
        case head(status: Int, headers: [String: String])
        /// Body bytes (chunk framing removed).
        case body([UInt8])
        /// The reply is complete.
        case end
    }

    private enum Phase: Equatable {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case untilClose
        case done
    }

    /// The longest status line plus headers accepted.
    static let maximumHeadLength = 64 * 1024

    private var phase = Phase.head
    private var buffer: [UInt8] = []

    /// Whether the reply is complete.
    var isComplete: Bool { phase == .done }

    /// Whether the connection may carry another request after this reply (`Connection: close` and
    /// bodies framed by the connection's end say no).
    private(set) var keepsConnection = true

    /// Parses `bytes` and returns what they completed.
    mutating func feed(_ bytes: some Collection<UInt8>) throws(EtcdMalformedReply) -> [Event] {
        buffer.append(contentsOf: bytes)
        var events: [Event] = []
        while true {
            switch phase {
            case .head:
                guard let end = Self.find([13, 10, 13, 10], in: buffer) else {
                    if buffer.count > Self.maximumHeadLength { throw EtcdMalformedReply(reason: "HTTP header longer than 64 KiB") }
                    return events
                }
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 4)
                let (status, headers) = try Self.parseHead(head)
                if (100..<200).contains(status) { continue }  // an interim reply: the real one follows
                events.append(.head(status: status, headers: headers))
                if headers["connection"]?.lowercased().contains("close") == true { keepsConnection = false }
                if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                    phase = .chunkSize
                } else if let length = headers["content-length"] {
                    guard let count = Int(length.trimmed(" \t")), count >= 0 else {
                        throw EtcdMalformedReply(reason: "invalid Content-Length \(length)")
                    }
                    phase = .fixed(remaining: count)
                } else if status == 204 || status == 304 {
                    phase = .fixed(remaining: 0)
                } else {
                    keepsConnection = false
                    phase = .untilClose
                }
            case .fixed(let remaining):
                let count = min(remaining, buffer.count)
                if count > 0 {
                    events.append(.body(Array(buffer[..<count])))
                    buffer.removeFirst(count)
                }
                if remaining - count == 0 {
                    phase = .done
                    events.append(.end)
                    return events
                }
                phase = .fixed(remaining: remaining - count)
                return events
            case .chunkSize:
                guard let end = Self.find([13, 10], in: buffer) else {
                    if buffer.count > 1024 { throw EtcdMalformedReply(reason: "HTTP chunk size line too long") }
                    return events
                }
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 2)
                let digits = line.split(separator: ";", maxSplits: 1).first.map { $0.trimmed(" \t") } ?? ""
                guard let size = Int(digits, radix: 16), size >= 0 else {
                    throw EtcdMalformedReply(reason: "invalid HTTP chunk size \(line)")
                }
                phase = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let count = min(remaining, buffer.count)
                guard count > 0 else { return events }
                events.append(.body(Array(buffer[..<count])))
                buffer.removeFirst(count)
                phase = remaining - count == 0 ? .chunkDataEnd : .chunkData(remaining: remaining - count)
            case .chunkDataEnd:
                guard buffer.count >= 2 else { return events }
                guard buffer[0] == 13 && buffer[1] == 10 else { throw EtcdMalformedReply(reason: "HTTP chunk not followed by CRLF") }
                buffer.removeFirst(2)
                phase = .chunkSize
            case .trailers:
                guard let end = Self.find([13, 10], in: buffer) else {
                    if buffer.count > Self.maximumHeadLength { throw EtcdMalformedReply(reason: "HTTP trailer longer than 64 KiB") }
                    return events
                }
                buffer.removeFirst(end + 2)
                if end == 0 {
                    phase = .done
                    events.append(.end)
                    return events
                }
            case .untilClose:
                if !buffer.isEmpty { events.append(.body(buffer)) }
                buffer = []
                return events
            case .done:
                return events
            }
        }
    }

    /// The connection ended: completes a reply framed by the connection's end; any other unfinished
    /// reply is an error.
    mutating func finish() throws(EtcdMalformedReply) -> [Event] {
        switch phase {
        case .untilClose:
            phase = .done
            return [.end]
        case .done:
            return []
        default:
            throw EtcdMalformedReply(reason: "the connection closed in the middle of the reply")
        }
    }

    private static func parseHead(_ head: String) throws(EtcdMalformedReply) -> (Int, [String: String]) {
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.isEmpty ? "" : String(lines.removeFirst())
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100..<600).contains(status) else {
            throw EtcdMalformedReply(reason: "not an HTTP/1.x status line: \(statusLine.prefix(100))")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased().trimmed(" \t")
            let value = line[line.index(after: colon)...].trimmed(" \t")
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        return (status, headers)
    }

    private static func find(_ pattern: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        var index = 0
        while index <= bytes.count - pattern.count {
            if bytes[index] == pattern[0] && bytes[index..<index + pattern.count].elementsEqual(pattern) { return index }
            index += 1
        }
        return nil
    }
}

extension StringProtocol {
    /// The string without leading and trailing characters of `set` (a few ASCII characters).
    fileprivate func trimmed(_ set: String) -> String {
        let characters = Set(set)
        var slice = Substring(self)
        while let first = slice.first, characters.contains(first) { slice.removeFirst() }
        while let last = slice.last, characters.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
