import Foundation
import KeyValueObserving
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("etcd client: failover in a cluster", .tags(.processes), .requiresEtcd)
struct FailoverTests {
    @Test func whenTheLeaderIsKilledTheWatchKeepsGoingAndWritesGoToAnotherMember() throws {
        let cluster = try EtcdCluster(members: 3)
        let leader = try cluster.leaderIndex()
        // The leader first, so that both the writes and the watch start on it and must fail over.
        let endpoints = (0..<3).map { cluster.endpoints[(leader + $0) % 3] }
        let options = EtcdClientOptions(
            requestTimeout: .seconds(3), attempts: 8, initialBackoff: .milliseconds(50), maximumBackoff: .seconds(1))
        let writer = try client(endpoints, options: options)
        let start = try writer.range(prefix: bytes("f/")).revision
        let recorder = NoticeRecorder()
        let watch = try client(endpoints, options: options).watch(prefix: bytes("f/"), startRevision: start + 1, handler: recorder.handler)
        defer { watch.cancel() }

        var applied: [Int64: String] = [:]  // revision → value, for the writes known to have applied
        var uncertain: Set<String> = []  // values whose reply was lost
        for value in 1...10 { applied[try writer.put(key: bytes("f/k"), value: bytes("\(value)"))] = "\(value)" }
        #expect(recorder.waitForEvents(10))
        cluster.kill(member: leader)
        for value in 11...30 {
            do {
                applied[try writer.put(key: bytes("f/k"), value: bytes("\(value)"))] = "\(value)"
            } catch {
                // A write whose reply was lost may or may not have applied; anything else fails the test.
                guard error.kind == .replyLost else { throw error }
                uncertain.insert("\(value)")
            }
        }
        #expect(writer.state.current.preferred != 0)  // the writes went to another member
        let final = try #require(try writer.range(key: bytes("f/k")).keyValue)
        #expect(waitUntil { recorder.events.last?.modRevision == final.modRevision })
        let events = recorder.events
        // Every change exactly once, in order: revisions strictly increasing, each known write seen
        // at its revision, nothing else but writes whose reply was lost.
        #expect(zip(events, events.dropFirst()).allSatisfy { $0.modRevision < $1.modRevision })
        for (revision, value) in applied {
            #expect(events.contains { $0.modRevision == revision && recorder.summary[events.firstIndex(of: $0)!] == value })
        }
        #expect(Set(recorder.summary).subtracting(applied.values).isSubset(of: uncertain))
        #expect(recorder.overlaps.current == 0)
    }

    /// A frozen member (SIGSTOP: its sockets accept, nothing answers) listed first: a read and a
    /// transaction that cannot apply twice go to the next member after one attempt's timeout, and
    /// the watch streaming from it notices through its liveness probe and resumes on another member,
    /// every value once and in order.
    @Test func aMemberThatStopsAnsweringIsLeftByCallsAndByTheWatch() throws {
        let cluster = try EtcdCluster(members: 3)
        // The default liveness interval (1 s); a short attempt timeout, a generous number of rounds.
        let options = EtcdClientOptions(
            requestTimeout: .seconds(1), connectTimeout: .seconds(1), attempts: 10, initialBackoff: .milliseconds(50),
            maximumBackoff: .milliseconds(500))
        let etcd = try client(cluster.endpoints, options: options)
        let key = bytes("z/k")
        let first = try etcd.put(key: key, value: bytes("1"))
        let recorder = NoticeRecorder()
        // From the put's revision: the watch starts on member 0 (the one that answered last).
        let watch = etcd.watch(prefix: bytes("z/"), startRevision: first, handler: recorder.handler)
        defer { watch.cancel() }
        #expect(recorder.waitForEvents(1))

        cluster.freeze(member: 0)
        // Compare-and-swap on the key's revision: safe to send again, so a lost reply goes elsewhere.
        let swapped = try etcd.transaction(
            compare: [.modRevision(key: key, equals: first)], success: [.put(key: key, value: bytes("2"))], failure: [.range(key: key)])
        // Sent again after an attempt timed out, a transaction that did apply finds its own write: on
        // a loaded machine the member that took it can answer after the 1 s timeout. Either way the
        // swap applied exactly once, at the next revision.
        if !swapped.succeeded {
            let current = try #require(swapped.ranges.first?.first)
            #expect(current.value == bytes("2") && current.modRevision == first + 1, "\(swapped)")
        }
        #expect(etcd.state.current.preferred != 0)
        #expect(try etcd.range(key: key).keyValue?.value == bytes("2"))
        _ = try etcd.put(key: key, value: bytes("3"))
        // A generous wait: the probe notices within about 2 s, the test fails only after 60 s.
        #expect(recorder.waitForEvents(3, seconds: 60))
        #expect(recorder.summary == ["1", "2", "3"])
        #expect(recorder.overlaps.current == 0)
    }
}
