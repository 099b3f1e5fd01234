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
}
