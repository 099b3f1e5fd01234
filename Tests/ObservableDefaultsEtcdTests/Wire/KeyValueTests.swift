import Foundation
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("etcd client: key-value calls", .tags(.processes), .requiresEtcd)
struct KeyValueTests {
    @Test func aPutIsReadBackWithItsRevisions() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let first = try etcd.put(key: bytes("app/speed"), value: bytes("1.5"))
        let second = try etcd.put(key: bytes("app/speed"), value: bytes("2"))
        #expect(second == first + 1)
        let (keyValue, revision) = try etcd.range(key: bytes("app/speed"))
        #expect(
            keyValue == EtcdKeyValue(key: bytes("app/speed"), value: bytes("2"), createRevision: first, modRevision: second, version: 2))
        #expect(revision == second)
        #expect(try etcd.range(key: bytes("app/absent")).keyValue == nil)
    }

    @Test func binaryKeysAndValuesAndAnEmptyValueRoundTrip() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let key: [UInt8] = [0x00, 0xFF, 0x0A, 0x22]
        _ = try etcd.put(key: key, value: [0xFF, 0x00, 0x5C])
        #expect(try etcd.range(key: key).keyValue?.value == [0xFF, 0x00, 0x5C])
        _ = try etcd.put(key: key, value: [])
        #expect(try etcd.range(key: key).keyValue?.value == [])
    }

    @Test func aPrefixRangeReadsExactlyTheKeysUnderThePrefix() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        for key in ["app", "app/a", "app/b", "app0", "apq", "ap"] { _ = try etcd.put(key: bytes(key), value: bytes(key)) }
        let (keyValues, revision) = try etcd.range(prefix: bytes("app/"))
        #expect(keyValues.map { String(decoding: $0.key, as: UTF8.self) } == ["app/a", "app/b"])
        #expect(revision == 7)
    }

    @Test func aPrefixEndingIn0xFFReadsItsKeysAndNotTheNextPrefix() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let keys: [[UInt8]] = [[0x61, 0xFF], [0x61, 0xFF, 0x00], [0x61, 0xFF, 0xFF, 0x01], [0x62], [0x61, 0xFE, 0xFF]]
        for key in keys { _ = try etcd.put(key: key, value: [1]) }
        #expect(
            try etcd.range(prefix: [0x61, 0xFF]).keyValues.map(\.key) == [[0x61, 0xFF], [0x61, 0xFF, 0x00], [0x61, 0xFF, 0xFF, 0x01]])
        #expect(try etcd.range(prefix: [0xFF]).keyValues.isEmpty)
        #expect(try etcd.range(prefix: []).keyValues.count == keys.count)
    }

    @Test func aDeleteRemovesTheKeyAndReturnsItsRevision() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let put = try etcd.put(key: bytes("k"), value: bytes("v"))
        #expect(try etcd.delete(key: bytes("k")) == put + 1)
        #expect(try etcd.range(key: bytes("k")).keyValue == nil)
        #expect(try etcd.delete(key: bytes("k")) == put + 1)
    }

    @Test func aTransactionComparingTheModRevisionRunsSuccessWhenTheKeyIsUnchanged() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let read = try etcd.put(key: bytes("counter"), value: bytes("1"))
        let result = try etcd.transaction(
            compare: [.modRevision(key: bytes("counter"), equals: read)],
            success: [
                .put(key: bytes("counter"), value: bytes("2")), .put(key: bytes("other"), value: bytes("x")), .range(key: bytes("counter")),
            ],
            failure: [.range(key: bytes("counter"))])
        #expect(result.succeeded)
        #expect(result.revision == read + 1)
        #expect(result.ranges.map { $0.map(\.value) } == [[bytes("2")]])
        #expect(try etcd.range(key: bytes("other")).keyValue?.modRevision == read + 1)
    }

    @Test func aTransactionComparingAStaleModRevisionRunsFailureAndReadsTheCurrentValue() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let stale = try etcd.put(key: bytes("counter"), value: bytes("1"))
        let current = try etcd.put(key: bytes("counter"), value: bytes("5"))
        let result = try etcd.transaction(
            compare: [.modRevision(key: bytes("counter"), equals: stale)], success: [.put(key: bytes("counter"), value: bytes("2"))],
            failure: [.range(key: bytes("counter")), .range(key: bytes("absent"))])
        #expect(!result.succeeded)
        #expect(result.revision == current)
        #expect(result.ranges.count == 2)
        #expect(result.ranges[0].first?.value == bytes("5"))
        #expect(result.ranges[0].first?.modRevision == current)
        #expect(result.ranges[1].isEmpty)
        #expect(try etcd.range(key: bytes("counter")).keyValue?.value == bytes("5"))
    }

    @Test func comparingModRevisionZeroCreatesOnlyAnAbsentKey() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let create = { () throws(EtcdError) -> Bool in
            try etcd.transaction(
                compare: [.modRevision(key: bytes("once"), equals: 0)], success: [.put(key: bytes("once"), value: bytes("v"))], failure: []
            ).succeeded
        }
        #expect(try create())
        #expect(try !create())
    }

    @Test func aDeleteInATransactionRemovesTheKey() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let put = try etcd.put(key: bytes("gone"), value: bytes("v"))
        let result = try etcd.transaction(
            compare: [.modRevision(key: bytes("gone"), equals: put)], success: [.delete(key: bytes("gone"))], failure: [])
        #expect(result.succeeded)
        #expect(try etcd.range(key: bytes("gone")).keyValue == nil)
    }

    @Test func compactingAnAlreadyCompactedRevisionThrowsCompacted() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        for value in 1...3 { _ = try etcd.put(key: bytes("k"), value: bytes("\(value)")) }
        try etcd.compact(revision: 3)
        let error = try #require(throws: EtcdError.self) { try etcd.compact(revision: 2) }
        #expect(error.kind == .compacted)
        #expect(error.endpoints == server.endpoints)
    }
}
