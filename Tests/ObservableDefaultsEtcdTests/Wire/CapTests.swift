import Foundation
import KeyValueObserving
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("etcd client: size caps", .tags(.processes), .requiresEtcd)
struct CapTests {
    @Test func aReplyLargerThanTheCapIsRefusedNamingTheCapAndNotTriedElsewhere() throws {
        let server = try EtcdServer()
        _ = try client(server.endpoints).put(key: bytes("big"), value: Array(repeating: 65, count: 4096))
        var options = testOptions
        options.maximumReplySize = 4096
        let etcd = try client(server.endpoints + server.endpoints, options: options)
        let error = try #require(throws: EtcdError.self) { try etcd.range(key: bytes("big")) }
        #expect(error.kind == .replyTooLarge)
        #expect(error.endpoints == server.endpoints)
        #expect(error.description.contains("exceeds 4 KiB (maximumReplySize)"), "\(error)")
        // Below the cap, the same client reads.
        _ = try etcd.put(key: bytes("small"), value: bytes("v"))
        #expect(try etcd.range(key: bytes("small")).keyValue?.value == bytes("v"))
    }

    @Test func aWatchLineLargerThanTheCapStopsTheWatchWithAnErrorNamingTheCap() throws {
        let server = try EtcdServer()
        var options = testOptions
        options.maximumReplySize = 4096
        let etcd = try client(server.endpoints, options: options)
        let start = try etcd.put(key: bytes("w/small"), value: bytes("1"))
        let recorder = NoticeRecorder()
        let notices = Locked<[EtcdWatchNotice]>([])
        let watch = etcd.watch(prefix: bytes("w/"), startRevision: start) { notice in
            notices.withLock { $0.append(notice) }
            recorder.record(notice)
        }
        defer { watch.cancel() }
        #expect(recorder.waitForEvents(1))
        _ = try client(server.endpoints).put(key: bytes("w/big"), value: Array(repeating: 65, count: 8192))
        #expect(waitUntil { recorder.entries.current.contains(.disconnected(.replyTooLarge)) })
        watch.waitForDeliveries()
        #expect(recorder.entries.current.last == .disconnected(.replyTooLarge))
        guard case .disconnected(let error) = notices.current.last else { return }
        #expect(error.description.contains("exceeds 4 KiB (maximumReplySize)"), "\(error)")
        // Stopped for good: it does not reconnect to meet the same line again.
        #expect(watch.connectionAttempts == 1)
    }
}
