/// An incremental parser of HTTP/1.1 responses: the status and headers, then the body framed by
/// `Transfer-Encoding: chunked` (trailers skipped: etcd's gateway sends one after every error
/// reply), `Content-Length`, or the end of the connection. Bytes may arrive in any split, and any
/// split gives the same events and the same error.
///
/// It holds at most `maximumHeadLength` bytes of unparsed input (or `maximumChunkLineLength`, when
/// larger) and delivers at most `maximumBodySize` body bytes: a reply whose body would exceed it is
/// refused (`EtcdHTTPFailure.Kind.tooLarge`) as soon as its length is known (a `Content-Length`, a
/// chunk's size) or, framed by the connection's end, as soon as the bytes exceed it.
package struct EtcdHTTPParser {
    package enum Event: Equatable {
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
        case failed
    }

    /// The default longest status line plus headers (with the blank line ending them), and the
    /// longest trailer line.
    package static let defaultMaximumHeadLength = 64 * 1024
    /// The longest chunk-size line (with its CRLF).
    package static let maximumChunkLineLength = 1024

    /// The longest status line plus headers accepted (with the blank line ending them), and the
    /// longest trailer line.
    package let maximumHeadLength: Int
    /// The most body bytes accepted (nil: no limit, for a stream whose lines are capped instead).
    package let maximumBodySize: Int?

    private var phase = Phase.head
    private var buffer: [UInt8] = []
    /// Where the search for the end of a head or line resumes: the bytes before it cannot start one.
    private var searchStart = 0

    /// The body bytes delivered so far.
    package private(set) var bodyCount = 0

    /// The bytes received and not parsed yet.
    package var bufferedCount: Int { buffer.count }

    /// Whether the reply is complete.
    package var isComplete: Bool { phase == .done }

    /// Whether the connection may carry another request after this reply (`Connection: close`,
    /// bodies framed by the connection's end, and bytes received after the reply say no).
    package private(set) var keepsConnection = true

    /// A parser refusing a body longer than `maximumBodySize` bytes and a head longer than
    /// `maximumHeadLength` bytes.
    package init(maximumBodySize: Int? = nil, maximumHeadLength: Int = defaultMaximumHeadLength) {
        self.maximumBodySize = maximumBodySize
        self.maximumHeadLength = maximumHeadLength
    }

    /// Parses `bytes` and returns what they completed. After an error the parser holds nothing and
    /// refuses every later call.
    package mutating func feed(_ bytes: some Collection<UInt8>) throws(EtcdHTTPFailure) -> [Event] {
        guard phase != .failed else { throw EtcdHTTPFailure(.malformed, "the reply was already refused") }
        buffer.append(contentsOf: bytes)
        var events: [Event] = []
        do {
            try parse(into: &events)
        } catch {
            phase = .failed
            buffer = []
            throw error
        }
        return events
    }

    private mutating func parse(into events: inout [Event]) throws(EtcdHTTPFailure) {
        while true {
            switch phase {
            case .head:
                guard let end = try line(ending: [13, 10, 13, 10], limit: maximumHeadLength, "HTTP header") else { return }
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                consume(end + 4)
                let (status, headers) = try Self.parseHead(head)
                if (100..<200).contains(status) { continue }  // an interim reply: the real one follows
                events.append(.head(status: status, headers: headers))
                if headers["connection"]?.lowercased().contains("close") == true { keepsConnection = false }
                if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                    phase = .chunkSize
                } else if let length = headers["content-length"] {
                    guard let count = Int(length.trimmed(" \t")), count >= 0 else {
                        throw EtcdHTTPFailure(.malformed, "invalid Content-Length (a value of \(length.utf8.count) bytes, not a count)")
                    }
                    try checkBody(adding: count, "its Content-Length is \(count)")
                    phase = .fixed(remaining: count)
                } else if status == 204 || status == 304 {
                    phase = .fixed(remaining: 0)
                } else {
                    keepsConnection = false
                    phase = .untilClose
                }
            case .fixed(let remaining):
                let count = min(remaining, buffer.count)
                deliver(count, into: &events)
                if remaining - count == 0 {
                    phase = .done
                    events.append(.end)
                    continue
                }
                phase = .fixed(remaining: remaining - count)
                return
            case .chunkSize:
                let limit = Self.maximumChunkLineLength
                guard let end = try line(ending: [13, 10], limit: limit, "HTTP chunk size line") else { return }
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                consume(end + 2)
                let digits = line.split(separator: ";", maxSplits: 1).first.map { $0.trimmed(" \t") } ?? ""
                guard let size = Int(digits, radix: 16), size >= 0 else {
                    throw EtcdHTTPFailure(.malformed, "invalid HTTP chunk size (a line of \(line.utf8.count) bytes, not hexadecimal)")
                }
                try checkBody(adding: size, "a chunk of \(size) bytes")
                phase = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let count = min(remaining, buffer.count)
                guard count > 0 else { return }
                deliver(count, into: &events)
                phase = remaining - count == 0 ? .chunkDataEnd : .chunkData(remaining: remaining - count)
            case .chunkDataEnd:
                guard buffer.count >= 2 else { return }
                guard buffer[0] == 13 && buffer[1] == 10 else { throw EtcdHTTPFailure(.malformed, "HTTP chunk not followed by CRLF") }
                consume(2)
                phase = .chunkSize
            case .trailers:
                guard let end = try line(ending: [13, 10], limit: maximumHeadLength, "HTTP trailer") else { return }
                consume(end + 2)
                if end == 0 {
                    phase = .done
                    events.append(.end)
                }
            case .untilClose:
                try checkBody(adding: buffer.count, "the bytes received")
                deliver(buffer.count, into: &events)
                return
            case .done:
                // Bytes after the reply: not part of it, and the connection cannot carry another.
                if !buffer.isEmpty {
                    keepsConnection = false
                    consume(buffer.count)
                }
                return
            case .failed:
                return
            }
        }
    }

    /// The connection ended: completes a reply framed by the connection's end; any other unfinished
    /// reply is an error.
    package mutating func finish() throws(EtcdHTTPFailure) -> [Event] {
        switch phase {
        case .untilClose:
            phase = .done
            return [.end]
        case .done:
            return []
        case .failed:
            throw EtcdHTTPFailure(.malformed, "the reply was already refused")
        default:
            phase = .failed
            buffer = []
            throw EtcdHTTPFailure(.malformed, "the connection closed in the middle of the reply")
        }
    }

    /// The offset of `terminator` in the buffer, or nil until it arrives. A line (with its
    /// terminator) longer than `limit` is refused, whether or not its end has arrived, so that every
    /// split gives the same error.
    private mutating func line(ending terminator: [UInt8], limit: Int, _ what: String) throws(EtcdHTTPFailure) -> Int? {
        let end = Self.find(terminator, in: buffer, from: searchStart)
        if let end, end + terminator.count <= limit { return end }
        if end != nil || buffer.count > limit {
            throw EtcdHTTPFailure(.malformed, "\(what) longer than \(EtcdClientOptions.describe(size: limit))")
        }
        searchStart = max(0, buffer.count - terminator.count + 1)
        return nil
    }

    /// Refuses a body that would exceed `maximumBodySize` with `count` more bytes.
    private func checkBody(adding count: Int, _ why: String) throws(EtcdHTTPFailure) {
        guard let maximumBodySize, count > maximumBodySize - bodyCount else { return }
        throw EtcdHTTPFailure(
            .tooLarge, "the reply exceeds \(EtcdClientOptions.describe(size: maximumBodySize)) (maximumReplySize): \(why)")
    }

    private mutating func deliver(_ count: Int, into events: inout [Event]) {
        guard count > 0 else { return }
        events.append(.body(Array(buffer[..<count])))
        bodyCount += count
        consume(count)
    }

    private mutating func consume(_ count: Int) {
        buffer.removeFirst(count)
        searchStart = 0
    }

    private static func parseHead(_ head: String) throws(EtcdHTTPFailure) -> (Int, [String: String]) {
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.isEmpty ? "" : String(lines.removeFirst())
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100..<600).contains(status) else {
            throw EtcdHTTPFailure(.malformed, "not an HTTP/1.x status line (a line of \(statusLine.utf8.count) bytes)")
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

    private static func find(_ pattern: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        var index = start
        while index <= bytes.count - pattern.count {
            if bytes[index] == pattern[0] && bytes[index..<index + pattern.count].elementsEqual(pattern) { return index }
            index += 1
        }
        return nil
    }
}

/// A reply the HTTP parser refused.
package struct EtcdHTTPFailure: Error, Equatable, CustomStringConvertible {
    package enum Kind: Equatable {
        /// Not an HTTP/1.x reply, or cut short.
        case malformed
        /// The body exceeds the parser's `maximumBodySize`.
        case tooLarge
    }

    package let kind: Kind
    /// What was wrong, in words.
    package let reason: String

    init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    package var description: String { reason }
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
