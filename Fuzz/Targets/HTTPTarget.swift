import ObservableDefaultsEtcd

/// `http`: the HTTP/1.1 response parser of the etcd gateway's client, `EtcdHTTPParser`
/// (`Sources/ObservableDefaultsEtcd/Wire/EtcdHTTPParser.swift`): replies framed by
/// `Content-Length`, by `Transfer-Encoding: chunked` (with trailers) or by the connection's end,
/// fed in arbitrary splits, with a small body cap.
///
/// Input format: byte 0 is the body cap in 16-byte units (0–4080 bytes); byte 1 the head limit,
/// 1024 + 16 × byte 1 (1024–5104 bytes); byte 2 how the rest is split into feeds: 0, one feed;
/// otherwise its low 3 bits give the longest feed, 2^bits bytes (1–128), and the whole byte seeds
/// the generator of the feeds' lengths. The other bytes are what the server sent, after which the
/// connection closes (`finish()`). Missing leading bytes read as 0.
///
/// Checked: no trap; after every feed, the bytes the parser holds plus the body it delivered are at
/// most cap + head limit, and the body alone at most the cap; the events come in order (one head,
/// then body bytes, then at most one end, last), and the reply is complete exactly when the end
/// came; a complete `Content-Length` reply delivered exactly that many bytes; every error has a
/// reason; and the split changes nothing: the same bytes in one feed give the same error or, when
/// accepted, the same head, body, completion and connection reuse.
enum HTTPTarget {
    struct Outcome: Equatable {
        var head: EtcdHTTPParser.Event?
        var body: [UInt8] = []
        var ended = false
        var complete = false
        var keepsConnection = true
        var failure: EtcdHTTPFailure?
    }

    @Sendable static func run(_ bytes: [UInt8]) throws(FuzzFailure) {
        let header = bytes.prefix(3) + Array(repeating: 0, count: max(0, 3 - bytes.count))
        let cap = Int(header[header.startIndex]) * 16
        let headLimit = 1024 + Int(header[header.startIndex + 1]) * 16
        let splitting = header[header.startIndex + 2]
        let reply = Array(bytes.dropFirst(3))

        let split = try parse(reply, feeds: feeds(of: reply.count, splitting: splitting), cap: cap, headLimit: headLimit)
        let whole = try parse(reply, feeds: [reply.count], cap: cap, headLimit: headLimit)
        // A refused reply is compared by its error alone: what a failing feed completed is not
        // returned, so the events before the error depend on the split.
        if split.failure != nil || whole.failure != nil {
            try require(split.failure == whole.failure, "split \(splitting) gives \(split), one feed gives \(whole)")
        } else {
            try require(split == whole, "split \(splitting) gives \(split), one feed gives \(whole)")
        }
    }

    /// The lengths of the feeds of `count` bytes.
    static func feeds(of count: Int, splitting: UInt8) -> [Int] {
        guard splitting != 0 else { return [count] }
        let longest = 1 << Int(splitting & 7)
        var state = UInt32(splitting) &* 0x9E37_79B9 | 1
        var lengths: [Int] = []
        var remaining = count
        while remaining > 0 {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            let length = min(remaining, 1 + Int(state % UInt32(longest)))
            lengths.append(length)
            remaining -= length
        }
        return lengths
    }

    static func parse(_ reply: [UInt8], feeds: [Int], cap: Int, headLimit: Int) throws(FuzzFailure) -> Outcome {
        var parser = EtcdHTTPParser(maximumBodySize: cap, maximumHeadLength: headLimit)
        var outcome = Outcome()
        var contentLength: Int?
        var start = 0
        func take(_ events: [EtcdHTTPParser.Event]) throws(FuzzFailure) {
            for event in events {
                try require(!outcome.ended, "an event after the end: \(event)")
                switch event {
                case .head(_, let headers):
                    try require(outcome.head == nil, "a second head: \(event)")
                    outcome.head = event
                    if headers["transfer-encoding"]?.lowercased().contains("chunked") != true {
                        contentLength = headers["content-length"].flatMap { Int($0) }
                    }
                case .body(let bytes):
                    try require(outcome.head != nil, "body bytes before the head")
                    try require(!bytes.isEmpty, "an empty body event")
                    outcome.body += bytes
                case .end:
                    try require(outcome.head != nil, "the end before the head")
                    outcome.ended = true
                }
            }
        }
        do {
            for length in feeds {
                try take(try parser.feed(reply[start..<start + length]))
                start += length
                try require(
                    parser.bufferedCount + outcome.body.count <= cap + headLimit,
                    "the parser holds \(parser.bufferedCount) bytes and delivered \(outcome.body.count): over \(cap) + \(headLimit)")
                try require(outcome.body.count <= cap, "\(outcome.body.count) body bytes delivered, over the cap \(cap)")
                try require(parser.bodyCount == outcome.body.count, "bodyCount \(parser.bodyCount), delivered \(outcome.body.count)")
                try require(
                    parser.isComplete == outcome.ended, "isComplete \(parser.isComplete) after \(outcome.ended ? "the end" : "no end")")
            }
            try take(try parser.finish())
        } catch let failure as EtcdHTTPFailure {
            try require(!failure.reason.isEmpty, "an error without a reason")
            try require(parser.bufferedCount == 0, "a refused reply's bytes kept: \(parser.bufferedCount)")
            outcome.failure = failure
        } catch let failure as FuzzFailure {
            throw failure
        } catch {
            throw FuzzFailure("an unexpected error: \(error)")
        }
        outcome.complete = parser.isComplete
        outcome.keepsConnection = parser.keepsConnection
        try require(outcome.complete == outcome.ended, "isComplete \(outcome.complete) after \(outcome.ended ? "the end" : "no end")")
        if outcome.complete, let contentLength {
            try require(outcome.body.count == contentLength, "Content-Length \(contentLength), \(outcome.body.count) bytes delivered")
        }
        return outcome
    }
}
