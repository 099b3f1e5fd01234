import Dispatch
import Foundation
import KeyValueObserving
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("etcd client: watch", .tags(.processes), .requiresEtcd)
struct WatchTests {
    @Test func aWatchDeliversPutsAndDeletesUnderItsPrefixInOrderWithTheirRevisions() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let start = try etcd.range(prefix: bytes("app/")).revision
        let recorder = NoticeRecorder()
        let watch = etcd.watch(prefix: bytes("app/"), startRevision: start + 1, handler: recorder.handler)
        defer { watch.cancel() }
        let first = try etcd.put(key: bytes("app/a"), value: bytes("1"))
        _ = try etcd.put(key: bytes("other/x"), value: bytes("not watched"))
        let second = try etcd.put(key: bytes("app/b"), value: bytes("2"))
        let deletion = try etcd.delete(key: bytes("app/a"))
        #expect(recorder.waitForEvents(3))
        #expect(recorder.summary == ["1", "2", "-app/a"])
        #expect(recorder.events.map(\.modRevision) == [first, second, deletion])
        #expect(recorder.events.last == .delete(key: bytes("app/a"), modRevision: deletion))
        #expect(recorder.overlaps.current == 0)
    }

    @Test func theEventsOfOneTransactionArriveInOneNotice() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        _ = try etcd.put(key: bytes("app/gone"), value: bytes("x"))
        let start = try etcd.range(prefix: bytes("app/")).revision
        let recorder = NoticeRecorder()
        let watch = etcd.watch(prefix: bytes("app/"), startRevision: start + 1, handler: recorder.handler)
        defer { watch.cancel() }
        let result = try etcd.transaction(
            compare: [],
            success: [
                .put(key: bytes("app/a"), value: bytes("1")), .put(key: bytes("app/b"), value: bytes("2")), .delete(key: bytes("app/gone")),
            ],
            failure: [])
        #expect(recorder.waitForEvents(3))
        let notices = recorder.entries.current
        #expect(notices.count == 1)
        guard case .events(let events, let revision)? = notices.first else {
            Issue.record("expected one events notice, got \(notices)")
            return
        }
        #expect(events.count == 3)
        #expect(events.allSatisfy { $0.modRevision == result.revision })
        #expect(revision == result.revision)
    }

    @Test func aStartRevisionInThePastReplaysTheChangesSinceThen() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        _ = try etcd.put(key: bytes("k/a"), value: bytes("1"))
        let second = try etcd.put(key: bytes("k/a"), value: bytes("2"))
        _ = try etcd.put(key: bytes("k/b"), value: bytes("3"))
        let recorder = NoticeRecorder()
        let watch = etcd.watch(prefix: bytes("k/"), startRevision: second, handler: recorder.handler)
        defer { watch.cancel() }
        #expect(recorder.waitForEvents(2))
        _ = try etcd.put(key: bytes("k/c"), value: bytes("4"))
        #expect(recorder.waitForEvents(3))
        #expect(recorder.summary == ["2", "3", "4"])
    }

    @Test func aWatchFromNowResumesFromTheRevisionItWasCreatedAt() throws {
        // startRevision 0: "from now". After a disconnect the watch must resume from the revision it
        // was created at + 1, not from "now" again, or the changes made meanwhile are lost.
        let server = try EtcdServer()
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        let direct = try client(server.endpoints)
        let recorder = NoticeRecorder()
        let watch = try client([proxy.endpoint]).watch(prefix: bytes("n/"), startRevision: 0, handler: recorder.handler)
        defer { watch.cancel() }
        #expect(waitUntil { watch.nextRevision > 0 })
        try proxy.set(.refuse)
        proxy.dropConnections()
        #expect(waitUntil { recorder.count(of: .disconnected(.unreachable)) == 1 })
        _ = try direct.put(key: bytes("n/a"), value: bytes("while away"))
        try proxy.set(.forward)
        #expect(recorder.waitForEvents(1))
        #expect(recorder.summary == ["while away"])
    }

    @Test func eventsWrittenWhileTheWatchIsDisconnectedAreDeliveredOnceAfterItReconnects() throws {
        let server = try EtcdServer()
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        let direct = try client(server.endpoints)
        let start = try direct.range(prefix: bytes("p/")).revision
        let recorder = NoticeRecorder()
        let watch = try client([proxy.endpoint]).watch(prefix: bytes("p/"), startRevision: start + 1, handler: recorder.handler)
        defer { watch.cancel() }
        for value in 1...3 { _ = try direct.put(key: bytes("p/k"), value: bytes("\(value)")) }
        #expect(recorder.waitForEvents(3))
        try proxy.set(.refuse)
        proxy.dropConnections()
        let attempts = watch.connectionAttempts
        #expect(waitUntil { watch.connectionAttempts >= attempts + 4 })  // several rounds failed
        for value in 4...6 { _ = try direct.put(key: bytes("p/k"), value: bytes("\(value)")) }
        try proxy.set(.forward)
        #expect(waitUntil { recorder.events.count >= 6 && recorder.count(of: .reconnected) == 1 })
        #expect(recorder.summary == ["1", "2", "3", "4", "5", "6"])
        #expect(recorder.count(of: .disconnected(.unreachable)) == 1)
        let kinds = recorder.entries.current.filter { if case .events = $0 { false } else { true } }
        #expect(kinds == [.disconnected(.unreachable), .reconnected])
    }

    @Test func aWatchResumesAfterTheServerIsKilledAndRestartedWithNoEventLostOrRepeated() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let start = try etcd.range(prefix: bytes("r/")).revision
        let recorder = NoticeRecorder()
        let watch = etcd.watch(prefix: bytes("r/"), startRevision: start + 1, handler: recorder.handler)
        defer { watch.cancel() }
        var revisions: [Int64] = []
        for value in 1...5 { revisions.append(try etcd.put(key: bytes("r/k"), value: bytes("\(value)"))) }
        #expect(recorder.waitForEvents(5))
        server.kill()
        try server.restart()
        for value in 6...10 { revisions.append(try etcd.put(key: bytes("r/k"), value: bytes("\(value)"))) }
        #expect(recorder.waitForEvents(10))
        #expect(recorder.summary == (1...10).map { "\($0)" })
        #expect(recorder.events.map(\.modRevision) == revisions)
        #expect(recorder.count(of: .disconnected(.unreachable)) == recorder.count(of: .reconnected))
    }

    @Test func aCompactedStartRevisionIsReportedOnceAndEndsTheWatch() throws {
        let server = try EtcdServer()
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        let etcd = try client(server.endpoints)
        for value in 1...5 { _ = try etcd.put(key: bytes("c/k"), value: bytes("\(value)")) }
        try etcd.compact(revision: 4)
        let recorder = NoticeRecorder()
        let watch = try client([proxy.endpoint]).watch(prefix: bytes("c/"), startRevision: 2, handler: recorder.handler)
        defer { watch.cancel() }
        #expect(waitUntil { !recorder.entries.current.isEmpty })
        // The watch ended: it closed its connection and does not reconnect.
        #expect(waitUntil { proxy.connectionCount == 0 })
        let attempts = watch.connectionAttempts
        _ = try etcd.put(key: bytes("c/k"), value: bytes("after"))
        watch.waitForDeliveries()
        #expect(recorder.entries.current == [.compacted(4)])
        #expect(watch.connectionAttempts == attempts)
    }

    @Test func noHandlerCallStartsAfterCancelReturns() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let start = try etcd.range(prefix: bytes("x/")).revision
        let calls = Counter(0)
        let release = DispatchSemaphore(value: 0)
        let watch = etcd.watch(prefix: bytes("x/"), startRevision: start + 1) { _ in
            let first = calls.withLock { count in
                count += 1
                return count == 1
            }
            if first { release.wait() }
        }
        _ = try etcd.put(key: bytes("x/k"), value: bytes("1"))
        #expect(waitUntil { calls.current == 1 })  // the first call runs and blocks the queue
        _ = try etcd.put(key: bytes("x/k"), value: bytes("2"))
        let last = try etcd.put(key: bytes("x/k"), value: bytes("3"))
        #expect(waitUntil { watch.nextRevision > last })  // both notices are queued behind it
        watch.cancel()
        release.signal()
        watch.waitForDeliveries()
        #expect(calls.current == 1)
    }
}
