import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

/// A write whose reply was lost is settled before it is reported (the marker key tells whether it
/// applied), and a change reported as failed is never applied later.
@Suite("DefaultsStore on etcd: lost replies", .tags(.processes), .requiresEtcd)
struct EtcdLostReplyTests {
    static let speed = DefaultsKey("speed", default: 1.0)

    /// A server, a proxy in front of it, and a store through the proxy (its problems collected).
    func proxiedStore(timeout: Duration = .seconds(1)) throws -> (EtcdServer, EtcdProxy, DefaultsStore) {
        let server = try EtcdServer()
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        return (server, proxy, try etcdStore([proxy.endpoint], prefix: "app/", timeout: timeout, errors: Locked([])))
    }

    /// After the marker is put (the first transaction): a reply lost after the write applied; or
    /// the write swallowed twice, then sent again (within the call, or after a fence saying it did
    /// not apply).
    @Test(arguments: [[EtcdProxy.TransactionFault.forward, .loseReply], [.forward, .swallow, .swallow]])
    func aFlushWhoseWriteMetTheseFaultsSucceedsWithTheWriteAppliedOnce(faults: [EtcdProxy.TransactionFault]) throws {
        let (server, proxy, store) = try proxiedStore()
        proxy.injectTransactionFaults(faults)
        store[Self.speed] = 2
        try store.flush()
        let stored = try #require(try client(server.endpoints).range(key: bytes("app/speed")).keyValue)
        #expect(stored.value == bytes("2") && stored.version == 1)
    }

    @Test func aFlushThatGivesUpNeverAppliesTheChangeLater() throws {
        let (server, proxy, store) = try proxiedStore()
        // Every try at the write (in the background, by the flush, each resent within its call) is
        // swallowed; the fence after them answers "not applied", so it is sent once more, swallowed
        // again, and a fence answers again.
        proxy.swallowTransactions(naming: "app/speed")
        store[Self.speed] = 2
        let error = try #require(throws: DefaultsError.self) { try store.flush() }
        proxy.swallowTransactions(naming: nil)
        #expect(error.kind == .unreachable)
        #expect(error.description.contains("did not apply") && error.description.contains("not written (key 'speed')"))
        #expect(!error.description.contains("may"))
        // The proxy forwards again: a later change is sent, and the one given up is not (it would
        // have gone first). Its value comes back from etcd.
        store[DefaultsKey("other", default: 0)] = 1
        try store.flush()
        let etcd = try client(server.endpoints)
        #expect(try etcd.range(key: bytes("app/other")).keyValue?.value == bytes("1"))
        #expect(try etcd.range(key: bytes("app/speed")).keyValue == nil)
        #expect(waitUntil { !store.hasValue(for: Self.speed) })
    }

    @Test func anUpdateThatGivesUpAfterALostReplySaysWhetherItApplied() throws {
        let (server, proxy, store) = try proxiedStore()
        let hits = DefaultsKey("hits", default: 0)
        proxy.swallowTransactions(naming: "app/hits")
        let error = try #require(throws: DefaultsError.self) { try store.update(hits) { $0 += 1 } }
        proxy.swallowTransactions(naming: nil)
        #expect(error.description.contains("did not apply") && !error.description.contains("may"))
        proxy.loseTransactionReplies(1)
        try store.update(hits) { $0 += 1 }
        let stored = try #require(try client(server.endpoints).range(key: bytes("app/hits")).keyValue)
        #expect(stored.value == bytes("1") && stored.version == 1)
        #expect(store[hits] == 1)
    }

    @Test func theToolExitsZeroWhenTheWriteWhoseReplyWasLostApplied() throws {
        let server = try EtcdServer()
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        // The tool reads the prefix (a range), puts its marker, then writes: the write's reply is
        // the one lost.
        proxy.injectTransactionFaults([.forward, .loseReply])
        let result = try etcdTool("write", [proxy.endpoint], ["speed", "2"])
        #expect(result.status == 0, "\(result.error)")
        #expect(!result.error.contains("may or may not"))
        let stored = try #require(try client(server.endpoints).range(key: bytes("app/speed")).keyValue)
        #expect(stored.value == bytes("2") && stored.version == 1)
    }

    /// Two tries at the write swallowed (the call sends it again, or a fence answers "not applied"
    /// and it is sent once more), or every try at it (fences answer).
    @Test(arguments: [false, true])
    func theToolNeverAppliesAWriteItReportedAsFailed(everyTrySwallowed: Bool) throws {
        let server = try EtcdServer()
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        if everyTrySwallowed {
            proxy.swallowTransactions(naming: "app/speed")
        } else {
            proxy.injectTransactionFaults([.forward, .swallow, .swallow])
        }
        let result = try etcdTool("write", [proxy.endpoint], ["--timeout", "1", "speed", "2"])
        // The tool has exited (its exit-time flush included): what it said is what etcd holds.
        let stored = try client(server.endpoints).range(key: bytes("app/speed")).keyValue
        #expect(!result.error.contains("may or may not"))
        if everyTrySwallowed {
            #expect(result.status == 1, "\(result.error)")
            #expect(stored == nil)
            #expect(result.error.contains("did not apply") && result.error.contains("will not be sent again"), "\(result.error)")
        } else {
            #expect(result.status == 0, "\(result.error)")
            #expect(stored?.value == bytes("2") && stored?.version == 1)
        }
    }

    /// A try at the tool's first write stays on its way (a frozen member's socket buffer) while
    /// the call sends it again, which applies; the tool exits, removing its marker key; then the
    /// held try reaches etcd: it must not apply again.
    @Test func aTryAtAWriteThatArrivesAfterTheToolExitedDoesNotApply() throws {
        let server = try EtcdServer()
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        proxy.holdTransaction(naming: "app/speed")
        let result = try etcdTool("write", [proxy.endpoint], ["--timeout", "2", "speed", "2"])
        #expect(result.status == 0, "\(result.error)")
        let replies = proxy.releaseHeldTransactions()
        #expect(replies.count == 1 && replies.allSatisfy { $0.contains("\"header\"") }, "\(replies)")
        let etcd = try client(server.endpoints)
        let stored = try #require(try etcd.range(key: bytes("app/speed")).keyValue)
        #expect(stored.value == bytes("2") && stored.version == 1, "\(replies)")
        // No marker key is left behind either.
        #expect(try etcd.range(prefix: bytes("app/")).keyValues.map(\.key) == [bytes("app/speed")])
    }
}
