import Foundation
import ObservableDefaultsEtcd

/// The etcd client's decoding of what the JSON gateway sends (`Sources/ObservableDefaultsEtcd/Wire`):
/// replies (`EtcdJSON`), the watch stream's lines (`EtcdLineSplitter`) and each line's reply
/// (`EtcdWatchReply`).
enum EtcdTargets {
    /// `etcd-replies`: a reply body decoded as the client decodes it.
    ///
    /// Input format: byte 0 says which reply (its value modulo 4): 0, a range's (`kvs` and the
    /// header's revision); 1, a put's or a delete's (the header's revision); 2, a transaction's
    /// (`succeeded`, the revision, the `response_range`s of `responses`); 3, an error reply (its
    /// message and code). The other bytes are the body. An empty input is an empty range body.
    ///
    /// Checked: no trap; a reply either decodes or is refused with an `EtcdMalformedReply` whose
    /// reason is not empty; and what decodes, encoded again as the gateway encodes it (base64 keys
    /// and values, 64-bit integers as strings), decodes to the same values.
    @Sendable static func replies(_ bytes: [UInt8]) throws(FuzzFailure) {
        let kind = (bytes.first ?? 0) % 4
        let body = Array(bytes.dropFirst())
        if kind == 3 {
            _ = EtcdJSON.serverError(body)
            return
        }
        do {
            let reply = try EtcdJSON.decode(body)
            switch kind {
            case 0:
                let keyValues = try EtcdJSON.keyValues(reply)
                let revision = try EtcdJSON.revision(reply)
                let again = try EtcdJSON.decode(EtcdJSON.encode(["header": header(revision), "kvs": keyValues.map(object)]))
                try require(try EtcdJSON.keyValues(again) == keyValues, "the key-values \(keyValues) read again differently")
                try require(try EtcdJSON.revision(again) == revision, "the revision \(revision) reads again differently")
            case 1:
                let revision = try EtcdJSON.revision(reply)
                try require(try EtcdJSON.revision(EtcdJSON.decode(EtcdJSON.encode(["header": header(revision)]))) == revision, "revision")
            default:
                let result = try EtcdJSON.transactionResult(reply)
                let responses = result.ranges.map { ["response_range": ["kvs": $0.map(object)]] }
                let encoded = EtcdJSON.encode(["header": header(result.revision), "succeeded": result.succeeded, "responses": responses])
                let again = try EtcdJSON.transactionResult(EtcdJSON.decode(encoded))
                try require(again == result, "the transaction result \(result) reads again as \(again)")
            }
        } catch let failure as FuzzFailure {
            throw failure
        } catch let malformed as EtcdMalformedReply {
            try require(!malformed.reason.isEmpty, "a malformed reply without a reason")
        } catch {
            throw FuzzFailure("an unexpected error: \(error)")
        }
    }

    /// `etcd-watch`: a watch's stream split into lines, in arbitrary splits, and each line decoded.
    ///
    /// Input format: byte 0 is the longest line accepted, 16 × (byte 0 + 1) bytes (16–4096); byte 1
    /// how the rest is split into chunks, as byte 2 of `http` (0: one chunk; otherwise the longest
    /// chunk is 2^(its low 3 bits) bytes, and the byte seeds the chunks' lengths); byte 2 the reply's
    /// HTTP status: 200 below 128, else 400. The other bytes are the stream (the body, without HTTP
    /// framing). Missing leading bytes read as 0.
    ///
    /// Checked: no trap; the lines and the refusal of a line over the cap are those of the stream
    /// read whole (split at each LF, a CR before it dropped, empty lines skipped, a line — complete
    /// or not — over the cap refused, and nothing read after it), whatever the split; each line
    /// decodes to a watch reply or is refused with a reason; and a reply of events, encoded again as
    /// the gateway encodes it, decodes to the same reply.
    @Sendable static func watch(_ bytes: [UInt8]) throws(FuzzFailure) {
        let header = bytes.prefix(3) + Array(repeating: 0, count: max(0, 3 - bytes.count))
        let cap = 16 * (Int(header[header.startIndex]) + 1)
        let splitting = header[header.startIndex + 1]
        let status = header[header.startIndex + 2] < 128 ? 200 : 400
        let stream = Array(bytes.dropFirst(3))

        var splitter = EtcdLineSplitter(maximumLineLength: cap)
        var found = EtcdLineSplitter.Split()
        var start = 0
        for length in HTTPTarget.feeds(of: stream.count, splitting: splitting) {
            let split = splitter.append(Array(stream[start..<start + length]))
            start += length
            try require(!found.exceeded || split == EtcdLineSplitter.Split(exceeded: true), "lines read after the refusal: \(split)")
            found.lines += split.lines
            found.exceeded = found.exceeded || split.exceeded
            try require(splitter.pendingCount <= cap + 1, "\(splitter.pendingCount) bytes pending, over the cap \(cap)")
        }
        let expected = lines(of: stream, cap: cap)
        try require(found == expected, "split \(splitting): \(found); read whole: \(expected)")

        for line in found.lines {
            let reply: EtcdWatchReply
            switch Result(catching: { () throws(EtcdMalformedReply) in try EtcdWatchReply.decode(line, status: status) }) {
            case .success(let decoded):
                reply = decoded
            case .failure(let error):
                try require(!error.reason.isEmpty, "a malformed watch reply without a reason")
                continue
            }
            guard case .events(let events, let revision, let created) = reply else { continue }
            let encoded = EtcdJSON.encode(["result": ["header": self.header(revision), "created": created, "events": events.map(object)]])
            let again = Result { () throws(EtcdMalformedReply) in try EtcdWatchReply.decode(encoded, status: 200) }
            try require(again == .success(reply), "the reply \(reply) reads again as \(again)")
        }
    }

    /// The stream's lines read whole, as `etcd-watch` documents.
    static func lines(of stream: [UInt8], cap: Int) -> EtcdLineSplitter.Split {
        var split = EtcdLineSplitter.Split()
        var pieces = stream.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        let unfinished = pieces.removeLast()
        for piece in pieces {
            let line = piece.last == UInt8(ascii: "\r") ? piece.dropLast() : piece
            if line.count > cap {
                split.exceeded = true
                return split
            }
            if !line.isEmpty { split.lines.append(Array(line)) }
        }
        split.exceeded = unfinished.count - (unfinished.last == UInt8(ascii: "\r") ? 1 : 0) > cap
        return split
    }

    static func header(_ revision: Int64) -> EtcdJSON.Object {
        ["revision": String(revision)]
    }

    static func object(_ keyValue: EtcdKeyValue) -> EtcdJSON.Object {
        [
            "key": EtcdJSON.base64(keyValue.key), "value": EtcdJSON.base64(keyValue.value),
            "create_revision": String(keyValue.createRevision), "mod_revision": String(keyValue.modRevision),
            "version": String(keyValue.version),
        ]
    }

    static func object(_ event: EtcdWatchEvent) -> EtcdJSON.Object {
        switch event {
        case .put(let keyValue): ["type": "PUT", "kv": object(keyValue)]
        case .delete(let key, let modRevision):
            ["type": "DELETE", "kv": ["key": EtcdJSON.base64(key), "mod_revision": String(modRevision)]]
        }
    }
}
