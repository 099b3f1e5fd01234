import Foundation
@testable import ObservableDefaultsEtcd
import Testing

@Suite("etcd wire format (no etcd)")
struct WireFormatTests {
    // MARK: JSON

    @Test func aKeyValueDecodesBase64AndRevisionsGivenAsStringsOrNumbers() throws {
        let reply = try EtcdJSON.decode(
            Array(#"{"key":"YXBwL2E=","value":"/wA=","create_revision":"9223372036854775807","mod_revision":12,"version":"3"}"#.utf8))
        let keyValue = try EtcdJSON.keyValue(reply)
        #expect(keyValue == EtcdKeyValue(key: Array("app/a".utf8), value: [0xFF, 0x00], createRevision: .max, modRevision: 12, version: 3))
    }

    @Test func fieldsLeftOutMeanTheirDefaults() throws {
        let keyValue = try EtcdJSON.keyValue(try EtcdJSON.decode(Array(#"{"key":"aw=="}"#.utf8)))
        #expect(keyValue == EtcdKeyValue(key: Array("k".utf8), value: [], createRevision: 0, modRevision: 0, version: 0))
        let result = try EtcdJSON.transactionResult(try EtcdJSON.decode(Array(#"{"header":{"revision":"7"}}"#.utf8)))
        #expect(result == EtcdTransactionResult(succeeded: false, revision: 7, ranges: []))
    }

    @Test func malformedFieldsAreErrorsNamingTheField() throws {
        let badBase64 = try #require(throws: EtcdMalformedReply.self) {
            try EtcdJSON.keyValue(try EtcdJSON.decode(Array(#"{"key":"not base64!"}"#.utf8)))
        }
        #expect(badBase64.reason.contains("key"))
        let badRevision = try #require(throws: EtcdMalformedReply.self) {
            try EtcdJSON.keyValue(try EtcdJSON.decode(Array(#"{"key":"aw==","mod_revision":"12x"}"#.utf8)))
        }
        #expect(badRevision.reason.contains("mod_revision"))
        let fraction = try #require(throws: EtcdMalformedReply.self) {
            try EtcdJSON.keyValue(try EtcdJSON.decode(Array(#"{"key":"aw==","version":1.5}"#.utf8)))
        }
        #expect(fraction.reason.contains("version"))
        #expect(throws: EtcdMalformedReply.self) { try EtcdJSON.decode(Array("[1]".utf8)) }
    }

    /// A reply that is not a JSON object, or a field that is not base64, is described without a
    /// byte of it: a reply carries values (a secret's, in base64).
    @Test func aMalformedReplyIsDescribedWithoutQuotingIt() throws {
        let value = EtcdJSON.base64(Array(#""a-secret-value-of-thirty-bytes""#.utf8))
        let body = #"{"kvs":[{"key":"YQ==","value":"\#(value)"}]"# + "\n}x"
        let notJSON = try #require(throws: EtcdMalformedReply.self) { try EtcdJSON.decode(Array(body.utf8)) }
        #expect(
            notJSON.reason
                == "not a JSON object: \(body.utf8.count) bytes that stop parsing at line 2, column 2 (byte \(body.utf8.count - 1)): "
                + "unexpected character after the end of the JSON value, expected only white space", "\(notJSON.reason)")
        let array = try #require(throws: EtcdMalformedReply.self) { try EtcdJSON.decode(Array(#"["\#(value)"]"#.utf8)) }
        #expect(array.reason.contains("whose top-level value is not an object"), "\(array.reason)")
        let notBase64 = try #require(throws: EtcdMalformedReply.self) {
            try EtcdJSON.keyValue(try EtcdJSON.decode(Array(#"{"key":"aw==","value":"\#(value)!"}"#.utf8)))
        }
        #expect(notBase64.reason.hasPrefix("value is not base64"), "\(notBase64.reason)")
        // A refused watch without a message names the reply's fields, not their values.
        let refused = try EtcdWatchReply.decode(Array(#"{"result":{"events":[{"kv":{"value":"\#(value)"}}]}}"#.utf8), status: 500)
        #expect(refused == .refused("watch refused (HTTP 500): no message (a reply with the fields result)"), "\(refused)")
        for reason in [notJSON.reason, array.reason, notBase64.reason, "\(refused)"] {
            #expect(!reason.contains(value.prefix(8)) && !reason.contains("a-secret"), "\(reason)")
        }
    }

    /// Credentials print their user only: in `description`, `String(reflecting:)`, `dump` and a
    /// `Mirror`.
    @Test func credentialsShowTheUserAndNeverThePassword() {
        let credentials = EtcdCredentials(user: "alice", password: "the-password-itself")
        var printed = "\(credentials)\n\(String(reflecting: credentials))\n"
        dump(credentials, to: &printed)
        for child in Mirror(reflecting: credentials).children { printed += "\(child.label ?? "-"): \(child.value)\n" }
        #expect(printed.contains("alice") && printed.contains("<redacted>"), "\(printed)")
        #expect(!printed.contains("the-password"), "\(printed)")
    }

    @Test func aDeleteEventCarriesTheKeyAndTheDeletionsRevision() throws {
        let event = try EtcdJSON.event(try EtcdJSON.decode(Array(#"{"type":"DELETE","kv":{"key":"aw==","mod_revision":"6"}}"#.utf8)))
        #expect(event == .delete(key: Array("k".utf8), modRevision: 6))
        let put = try EtcdJSON.event(try EtcdJSON.decode(Array(#"{"kv":{"key":"aw==","value":"dg==","mod_revision":"5"}}"#.utf8)))
        #expect(put.modRevision == 5)
        #expect(throws: EtcdMalformedReply.self) { try EtcdJSON.event(try EtcdJSON.decode(Array(#"{"type":"MOVE","kv":{}}"#.utf8))) }
    }

    @Test func aTransactionResultListsOnlyTheRangesInOrder() throws {
        let reply = try EtcdJSON.decode(
            Array(
                #"{"header":{"revision":"6"},"succeeded":true,"responses":[{"response_put":{}},{"response_range":{"kvs":[{"key":"YQ==","mod_revision":"6"}]}},{"response_range":{}}]}"#
                    .utf8))
        let result = try EtcdJSON.transactionResult(reply)
        #expect(result.succeeded)
        #expect(result.ranges.map { $0.map(\.key) } == [[Array("a".utf8)], []])
    }

    @Test func requestsEncodeKeysAsBase64AndRevisionsAsStrings() throws {
        let request = EtcdJSON.transactionRequest(
            compare: [.modRevision(key: [0xFF], equals: 42)], success: [.put(key: [1], value: [])],
            failure: [.range(key: [2]), .delete(key: [3])])
        let text = String(decoding: EtcdJSON.encode(request), as: UTF8.self)
        let decoded = try EtcdJSON.decode(Array(text.utf8))
        let compare = try #require((decoded["compare"] as? [[String: Any]])?.first)
        #expect(compare["key"] as? String == "/w==")
        #expect(compare["mod_revision"] as? String == "42")
        #expect(compare["target"] as? String == "MOD")
        let watch = EtcdJSON.watchRequest(key: [0x61], rangeEnd: [0x62], startRevision: 9)
        #expect((watch["create_request"] as? [String: Any])?["start_revision"] as? String == "9")
    }

    @Test func anErrorReplyGivesItsMessageAndCode() {
        let (message, code) = EtcdJSON.serverError(Array(#"{"error":"etcdserver: x","message":"etcdserver: x","code":16}"#.utf8))
        #expect(message == "etcdserver: x")
        #expect(code == 16)
        // A reply that is not etcd's error is described, never quoted (it could echo a value).
        #expect(EtcdJSON.serverError(Array("plain text".utf8)).message == "a reply of 10 bytes that is not etcd's JSON")
        let echoed = EtcdJSON.serverError(Array(#"{"key":"c2VjcmV0","value":"c2VjcmV0LXZhbHVl"}"#.utf8)).message
        #expect(echoed == "no message (a reply of 45 bytes with the fields key, value)", "\(echoed)")
    }

    // MARK: Lines

    @Test func aChunkWithSeveralLinesGivesEachLine() {
        var splitter = EtcdLineSplitter(maximumLineLength: 1024)
        #expect(splitter.append(Array("{\"a\":1}\n{\"b\":2}\n".utf8)).lines == [Array("{\"a\":1}".utf8), Array("{\"b\":2}".utf8)])
        #expect(splitter.pendingCount == 0)
    }

    @Test func aLineSplitAcrossChunksComesOutWhole() {
        var splitter = EtcdLineSplitter(maximumLineLength: 1024)
        let text = Array("{\"result\":{\"events\":[1,2,3]}}\r\n{\"next\":true}\n".utf8)
        var lines: [[UInt8]] = []
        for byte in text { lines += splitter.append([byte]).lines }
        #expect(lines == [Array("{\"result\":{\"events\":[1,2,3]}}".utf8), Array("{\"next\":true}".utf8)])
        #expect(splitter.append(Array("{\"par".utf8)) == EtcdLineSplitter.Split())
        #expect(splitter.pendingCount == 5)
        #expect(splitter.append(Array("t\":1}\n\n".utf8)).lines == [Array("{\"part\":1}".utf8)])
    }

    @Test func aLineLongerThanTheCapIsRefusedWhetherItEndedOrNot() {
        var whole = EtcdLineSplitter(maximumLineLength: 8)
        #expect(whole.append(Array("12345678\n".utf8)).lines == [Array("12345678".utf8)])
        #expect(whole.append(Array("123456789\nshort\n".utf8)) == EtcdLineSplitter.Split(lines: [], exceeded: true))
        #expect(whole.append(Array("short\n".utf8)).exceeded)
        var growing = EtcdLineSplitter(maximumLineLength: 8)
        #expect(growing.append(Array("12345".utf8)) == EtcdLineSplitter.Split())
        #expect(growing.append(Array("6789".utf8)).exceeded)
    }

    /// Found writing the etcd-watch fuzz target's split check: a line of exactly the cap split between its CR and its
    /// LF was refused, and the lines before a refused one in the same chunk were lost.
    @Test func theSplitChangesNeitherTheLinesNorTheRefusal() {
        var split = EtcdLineSplitter(maximumLineLength: 8)
        #expect(split.append(Array("12345678\r".utf8)) == EtcdLineSplitter.Split())
        #expect(split.append(Array("\n".utf8)).lines == [Array("12345678".utf8)])
        var oneChunk = EtcdLineSplitter(maximumLineLength: 8)
        #expect(oneChunk.append(Array("a\nb\n123456789\nc\n".utf8)) == EtcdLineSplitter.Split(lines: [[97], [98]], exceeded: true))
    }

    // MARK: HTTP

    /// etcd's gateway's error reply: chunked, with a trailer after the body (what FoundationNetworking
    /// cannot parse).
    static let errorReply = Array(
        ("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nTrailer: Grpc-Trailer-Content-Type\r\n"
            + "Transfer-Encoding: chunked\r\n\r\n1a\r\n{\"error\":\"x\",\"code\":11}   \r\n0\r\n"
            + "Grpc-Trailer-Content-Type: application/grpc\r\n\r\n").utf8)

    @Test func aChunkedReplyWithATrailerParsesInAnySplit() throws {
        for split in 0...Self.errorReply.count {
            var parser = EtcdHTTPParser()
            var events = try parser.feed(Self.errorReply[..<split])
            events += try parser.feed(Self.errorReply[split...])
            let body = events.flatMap { event -> [UInt8] in if case .body(let bytes) = event { bytes } else { [] } }
            #expect(
                events.first
                    == .head(
                        status: 400,
                        headers: [
                            "content-type": "application/json", "trailer": "Grpc-Trailer-Content-Type", "transfer-encoding": "chunked",
                        ]))
            #expect(String(decoding: body, as: UTF8.self) == "{\"error\":\"x\",\"code\":11}   ")
            #expect(events.last == .end)
            #expect(parser.isComplete && parser.keepsConnection)
        }
    }

    @Test func aContentLengthReplyEndsAfterItsLengthAndAnInterimReplyIsSkipped() throws {
        var parser = EtcdHTTPParser()
        let events = try parser.feed(
            Array("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".utf8))
        #expect(events == [.head(status: 200, headers: ["content-length": "2", "connection": "close"]), .body(Array("{}".utf8)), .end])
        #expect(!parser.keepsConnection)
    }

    @Test func aReplyWithoutLengthEndsWithTheConnection() throws {
        var parser = EtcdHTTPParser()
        _ = try parser.feed(Array("HTTP/1.0 200 OK\r\n\r\nabc".utf8))
        #expect(!parser.isComplete)
        #expect(try parser.finish() == [.end])
    }

    @Test func aConnectionClosedMidReplyOrABadStatusLineIsAnError() throws {
        var parser = EtcdHTTPParser()
        _ = try parser.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8))
        #expect(throws: EtcdHTTPFailure.self) { try parser.finish() }
        var other = EtcdHTTPParser()
        #expect(throws: EtcdHTTPFailure.self) { try other.feed(Array("SSH-2.0-OpenSSH\r\n\r\n".utf8)) }
    }

    /// The parser itself refuses a body over its cap: before the body arrives when its length is
    /// known (a Content-Length, a chunk's size), as soon as the bytes exceed it when the
    /// connection's end frames it.
    @Test func aReplyOverTheCapIsRefusedByTheParserAsSoonAsItsLengthIsKnown() throws {
        let heads = [
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\n",
            "HTTP/1.1 200 OK\r\n\r\nabcde",
        ]
        for head in heads {
            var parser = EtcdHTTPParser(maximumBodySize: 4)
            let error = try #require(throws: EtcdHTTPFailure.self) { try parser.feed(Array(head.utf8)) }
            #expect(error.kind == .tooLarge, "\(head.debugDescription): \(error)")
            #expect(error.reason.hasPrefix("the reply exceeds 4 bytes (maximumReplySize)"), "\(error)")
            #expect(parser.bufferedCount == 0)
        }
        // At the cap, each framing reads.
        for reply in [
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n",
        ] {
            var parser = EtcdHTTPParser(maximumBodySize: 4)
            #expect(try parser.feed(Array(reply.utf8)).last == .end)
            #expect(parser.bodyCount == 4)
        }
        var untilClose = EtcdHTTPParser(maximumBodySize: 4)
        _ = try untilClose.feed(Array("HTTP/1.1 200 OK\r\n\r\nabcd".utf8))
        #expect(try untilClose.finish() == [.end])
    }

    /// A reply out of step with its framing (whose "head" or "chunk size" is then body, values in
    /// base64) is described by the size of what did not parse, never quoted.
    @Test func aMalformedHeadOrChunkLineIsNotQuoted() {
        let value = "c2VjcmV0LXZhbHVlLW9mLWEta2V5"
        let replies = [
            "\(value) 200 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: \(value)\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\(value)\r\n",
        ]
        for reply in replies {
            var parser = EtcdHTTPParser()
            do {
                _ = try parser.feed(Array(reply.utf8))
                Issue.record("accepted: \(reply)")
            } catch {
                #expect(!"\(error)".contains(value.prefix(8)), "\(error)")
                #expect("\(error)".contains("bytes"), "\(error)")
            }
        }
    }

    /// A head (or a line) over the limit is refused whether its end arrived or not, so that every
    /// split gives the same error, and the parser never holds more than the limit.
    @Test func aHeadLongerThanTheLimitIsRefusedInAnySplit() throws {
        let reply = Array("HTTP/1.1 200 OK\r\nX-Long: \(String(repeating: "x", count: 1100))\r\nContent-Length: 0\r\n\r\n".utf8)
        for split in [1, 7, 1024, reply.count] {
            var parser = EtcdHTTPParser(maximumHeadLength: 1024)
            var failure: EtcdHTTPFailure?
            for start in stride(from: 0, to: reply.count, by: split) {
                do {
                    _ = try parser.feed(reply[start..<min(start + split, reply.count)])
                    #expect(parser.bufferedCount <= 1024)
                } catch {
                    failure = error
                    break
                }
            }
            #expect(failure == EtcdHTTPFailure(.malformed, "HTTP header longer than 1 KiB"), "split \(split)")
        }
        // A head of exactly the limit (its blank line included) reads.
        let exact = "HTTP/1.1 204 No Content\r\nX: \r\n\r\n"
        var parser = EtcdHTTPParser(maximumHeadLength: exact.utf8.count)
        for byte in exact.utf8 { _ = try parser.feed([byte]) }
        #expect(parser.isComplete)
    }

    @Test func bytesAfterACompleteReplyAreDroppedAndTheConnectionIsNotReused() throws {
        var parser = EtcdHTTPParser()
        #expect(try parser.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1".utf8)).last == .end)
        #expect(parser.isComplete && !parser.keepsConnection)
        #expect(parser.bufferedCount == 0)
    }

    // MARK: Errors and options

    /// Messages etcd 3.4 sends (`etcdserver/api/v3rpc/rpctypes/error.go`, and gRPC's), and what
    /// each means for a retry: one test case per phrase of `EtcdServerFailure.phrases`.
    static let etcdMessages: [(message: String, failure: EtcdServerFailure)] = [
        ("etcdserver: invalid auth token", .tokenInvalid),
        ("etcdserver: revision of auth store is old", .tokenInvalid),
        ("etcdserver: user name is empty", .authenticationRequired),
        ("etcdserver: authentication failed, invalid user ID or password", .authenticationFailed),
        ("etcdserver: user name not found", .authenticationFailed),
        ("etcdserver: authentication is not enabled", .authenticationNotEnabled),
        ("etcdserver: permission denied", .permissionDenied),
        ("etcdserver: mvcc: required revision has been compacted", .compacted),
        ("etcdserver: no leader", .notApplied),
        ("etcdserver: too many requests", .notApplied),
        ("etcdserver: proposal dropped", .notApplied),
        ("etcdserver: not capable", .notApplied),
        ("etcdserver: unhealthy cluster", .notApplied),
        ("etcdserver: rpc not supported for learner", .notApplied),
        ("etcdserver: request timed out, possibly due to previous leader failure", .maybeApplied),
        ("etcdserver: leader changed", .maybeApplied),
        ("etcdserver: server stopped", .maybeApplied),
        ("etcdserver: request cancelled", .maybeApplied),
        ("context canceled", .maybeApplied),
        ("rpc error: code = DeadlineExceeded desc = context deadline exceeded", .maybeApplied),
    ]

    @Test(arguments: etcdMessages.indices)
    func eachOfEtcdsMessagesIsClassifiedByItsPhrase(index: Int) {
        let (message, failure) = Self.etcdMessages[index]
        #expect(EtcdServerFailure.classify(message: message, code: nil) == failure, "\(message)")
        #expect(EtcdServerFailure.classify(message: message.uppercased(), code: 2) == failure, "\(message)")
        // The table's own entry, in the same place: every phrase has its case here.
        let entry = EtcdServerFailure.phrases[index]
        #expect(message.lowercased().contains(entry.phrase.lowercased()) && entry.failure == failure)
    }

    @Test func theTableAndTheTestsListTheSamePhrases() {
        #expect(EtcdServerFailure.phrases.count == Self.etcdMessages.count)
    }

    @Test func anUnknownMessageIsClassifiedByItsCode() {
        #expect(EtcdServerFailure.classify(message: "something new", code: 7) == .permissionDenied)
        #expect(EtcdServerFailure.classify(message: "something new", code: 14) == .maybeApplied)
        #expect(EtcdServerFailure.classify(message: "etcdserver: key is not provided", code: 3) == .other)
    }

    @Test func credentialsAndErrorsNeverShowThePassword() {
        let credentials = EtcdCredentials(user: "alice", password: "s3cret")
        #expect(!"\(credentials)".contains("s3cret"))
        #expect(!String(reflecting: credentials).contains("s3cret"))
        #expect("\(credentials)".contains("alice"))
    }

    @Test func endpointsMustBeHTTPOrHTTPSURLsWithAHostAndNoPassword() throws {
        let ftp = try #require(throws: EtcdError.self) { try EtcdClient(endpoints: [URL(string: "ftp://h:1")!], credentials: nil) }
        #expect(ftp.kind == .invalidEndpoint)
        #expect(ftp.description.contains("ftp://h:1"))
        #if canImport(Darwin)
        // No OpenSSL may be loaded on Darwin: https is refused when the client is made, naming it.
        let endpoint = try #require(URL(string: "https://etcd:2379"))
        let https = try #require(throws: EtcdError.self) { try EtcdClient(endpoints: [endpoint], credentials: nil) }
        #expect(https.kind == .invalidEndpoint && https.endpoints == [endpoint])
        #expect(https.description.contains("not supported on this platform"), "\(https)")
        #else
        #expect(throws: Never.self) { try EtcdClient(endpoints: [URL(string: "https://etcd:2379")!], credentials: nil) }
        #endif
        #expect(throws: EtcdError.self) { try EtcdClient(endpoints: [], credentials: nil) }
        #expect(throws: EtcdError.self) { try EtcdClient(endpoints: [URL(string: "http://u:p@h:1")!], credentials: nil) }
    }

    @Test(arguments: [
        "http://127.0.0.1:99999", "http://127.0.0.1:0", "http://127.0.0.1:65536", "https://[::1]:70000", "http://127.0.0.1:",
        "http://127.0.0.1:99999999999999999999", "http://etcd:00000",
    ])
    func aPortOutsideOneTo65535IsAnInvalidEndpointNamingIt(text: String) throws {
        let endpoint = try #require(URL(string: text))
        let error = try #require(throws: EtcdError.self) { try EtcdClient(endpoints: [endpoint], credentials: nil) }
        #expect(error.kind == .invalidEndpoint)
        #expect(error.endpoints == [endpoint])
        #expect(error.description.contains(text) && error.description.contains("1 to 65535"))
    }

    @Test func portsFromOneTo65535AndNoPortAreValid() throws {
        for text in ["http://127.0.0.1:1", "http://127.0.0.1:65535", "http://etcd", "https://[::1]:2379", "http://etcd:02379/"] {
            #expect(EtcdClient.problem(with: try #require(URL(string: text))) == nil, "\(text)")
        }
    }

    // MARK: TLS (no server)

    @Test func anEndOfFileWithoutCloseNotifyIsATruncationNotAnEnd() {
        // OpenSSL 1.1 reports a TCP end without close_notify as SSL_ERROR_SYSCALL (5) returning 0.
        #expect(EtcdTLSSession.outcome(count: 0, error: 5) { "" } == .truncated)
        #expect(EtcdTLSSession.outcome(count: 0, error: 6) { "" } == .closed)
        #expect(EtcdTLSSession.outcome(count: -1, error: 5) { "reset" } == .failed("TLS: reset"))
        #expect(EtcdTLSSession.outcome(count: 7, error: 0) { "" } == .done(7))
    }

    @Test func onlyVersionedOpenSSLLibrariesAreLoaded() {
        // An unversioned name such as libssl.dylib (Apple's stub aborts the process) is never tried.
        #expect(EtcdTLS.libraryNames == ["libssl.so.3", "libssl.so.1.1"])
    }

    @Test func addressesAreToldFromNames() {
        #expect(EtcdTLS.isAddress("127.0.0.1") && EtcdTLS.isAddress("::1") && EtcdTLS.isAddress("fe80::1"))
        #expect(!EtcdTLS.isAddress("localhost") && !EtcdTLS.isAddress("1.2.3.4.example") && !EtcdTLS.isAddress("1.2.3"))
    }

    @Test func capsAreDescribedInTheirUnit() {
        #expect(EtcdClientOptions().maximumReplySize == 64 * 1024 * 1024)
        #expect(EtcdClientOptions.describe(size: 64 * 1024 * 1024) == "64 MiB")
        #expect(EtcdClientOptions.describe(size: 2048) == "2 KiB")
        #expect(EtcdClientOptions.describe(size: 1000) == "1000 bytes")
    }

    @Test func theBackOffDoublesFromItsStartUpToItsMaximum() throws {
        let etcd = try EtcdClient(
            endpoints: [URL(string: "http://127.0.0.1:1")!], credentials: nil,
            options: EtcdClientOptions(initialBackoff: .milliseconds(50), maximumBackoff: .milliseconds(300)))
        #expect(
            (1...5).map { etcd.backoff(afterRound: $0) } == [
                .milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(300), .milliseconds(300),
            ])
    }

    @Test func theDefaultsAreTheDocumentedOnes() throws {
        let options = EtcdClientOptions()
        #expect(options.requestTimeout == .seconds(5) && options.connectTimeout == .seconds(2) && options.attempts == 6)
        let etcd = try EtcdClient(endpoints: [URL(string: "http://127.0.0.1:1")!], credentials: nil)
        // Between the 6 rounds: 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s.
        #expect((1..<6).map { etcd.backoff(afterRound: $0) } == [0.1, 0.2, 0.4, 0.8, 1.6].map { .milliseconds(Int($0 * 1000)) })
        #expect(options.callTimeout == nil && options.watchLivenessInterval == .seconds(1))
    }

    @Test func aStoreGivesEachAttemptAndEachWatchProbeAQuarterOfItsTimeoutAndEachCallAllOfIt() {
        let options = EtcdBackend.clientOptions(timeout: .seconds(5))
        #expect(options.requestTimeout == .milliseconds(1250) && options.connectTimeout == .milliseconds(1250))
        #expect(options.callTimeout == .seconds(5) && options.watchLivenessInterval == .milliseconds(1250))
        #expect(EtcdBackend.clientOptions(timeout: .seconds(60)).connectTimeout == .seconds(2))
    }

    @Test func onlyATransactionThatComparesAndPutsTheSameKeyCountsAsApplyingAtMostOnce() {
        let (key, other) = (bytes("k"), bytes("m"))
        let compare = [EtcdCompare.modRevision(key: key, equals: 7)]
        #expect(EtcdClient.appliesAtMostOnce(compare: compare, success: [.put(key: other, value: []), .put(key: key, value: [])]))
        #expect(EtcdClient.appliesAtMostOnce(compare: [.modRevision(key: key, equals: 0)], success: [.put(key: key, value: [])]))
        #expect(!EtcdClient.appliesAtMostOnce(compare: compare, success: [.put(key: other, value: [])]))
        #expect(!EtcdClient.appliesAtMostOnce(compare: compare, success: [.delete(key: key)]))
        #expect(!EtcdClient.appliesAtMostOnce(compare: [], success: [.put(key: key, value: [])]))
    }
}
