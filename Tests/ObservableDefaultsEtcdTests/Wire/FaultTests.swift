import Foundation
import KeyValueObserving
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("etcd client: failures", .tags(.processes), .requiresEtcd)
struct FaultTests {
    @Test func aStoppedServerGivesUnreachableNamingEveryEndpoint() throws {
        let server = try EtcdServer()
        let other = try unusedLoopbackEndpoint()
        server.stop()
        let etcd = try client(server.endpoints + [other], options: EtcdClientOptions(attempts: 2))
        let error = try #require(throws: EtcdError.self) { try etcd.put(key: bytes("k"), value: bytes("v")) }
        #expect(error.kind == .unreachable)
        #expect(error.endpoints == server.endpoints + [other])
        #expect(error.description.contains(server.endpoint.absoluteString))
        #expect(error.description.contains("connection refused"))
        let read = try #require(throws: EtcdError.self) { try etcd.range(prefix: bytes("k")) }
        #expect(read.kind == .unreachable)
    }

    @Test func aWriteGoesToTheNextEndpointWhenTheFirstRefusesTheConnection() throws {
        let server = try EtcdServer()
        let refusing = try EtcdProxy(targetPort: server.endpoint.port!)
        try refusing.set(.refuse)
        let etcd = try client([refusing.endpoint, server.endpoint])
        let revision = try etcd.put(key: bytes("k"), value: bytes("v"))
        #expect(try etcd.range(key: bytes("k")).keyValue?.modRevision == revision)
    }

    @Test func aWriteSentAndNeverAnsweredIsReplyLostAndNotSentToAnotherMember() throws {
        let server = try EtcdServer()
        let swallowing = try EtcdProxy(targetPort: server.endpoint.port!)
        try swallowing.set(.swallow)
        let options = EtcdClientOptions(requestTimeout: .seconds(1), attempts: 2)
        let etcd = try client([swallowing.endpoint, server.endpoint], options: options)
        let error = try #require(throws: EtcdError.self) { try etcd.put(key: bytes("k"), value: bytes("v")) }
        #expect(error.kind == .replyLost)
        #expect(error.endpoints == [swallowing.endpoint])
        #expect(try client(server.endpoints).range(key: bytes("k")).keyValue == nil)
    }

    @Test func aReadSentAndNeverAnsweredIsTriedOnTheNextMember() throws {
        let server = try EtcdServer()
        _ = try client(server.endpoints).put(key: bytes("k"), value: bytes("v"))
        let swallowing = try EtcdProxy(targetPort: server.endpoint.port!)
        try swallowing.set(.swallow)
        let options = EtcdClientOptions(requestTimeout: .seconds(1), attempts: 2)
        #expect(try client([swallowing.endpoint, server.endpoint], options: options).range(key: bytes("k")).keyValue?.value == bytes("v"))
        let error = try #require(throws: EtcdError.self) { try client([swallowing.endpoint], options: options).range(key: bytes("k")) }
        #expect(error.kind == .timeout)
        #expect(error.description.contains(swallowing.endpoint.absoluteString))
    }

    @Test func aCallEndsAtItsCallTimeoutWhateverItsRoundsAndAttemptTimeoutsAllow() throws {
        let server = try EtcdServer()
        let swallowing = try EtcdProxy(targetPort: server.endpoint.port!)
        try swallowing.set(.swallow)
        let options = EtcdClientOptions(requestTimeout: .seconds(60), attempts: 6, callTimeout: .milliseconds(300))
        let error = try #require(throws: EtcdError.self) { try client([swallowing.endpoint], options: options).range(key: bytes("k")) }
        #expect(error.kind == .timeout)
        #expect(error.description.contains("within 0.3 seconds"))
    }

    @Test func aConnectionLostAfterSendingAWriteIsReplyLost() throws {
        let server = try EtcdServer()
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        try proxy.set(.swallow)
        let etcd = try client([proxy.endpoint], options: EtcdClientOptions(requestTimeout: .seconds(30)))
        let thrown = Locked<EtcdError?>(nil)
        let writer = Thread {
            do {
                _ = try etcd.put(key: bytes("k"), value: bytes("v"))
            } catch {
                thrown.withLock { $0 = error as? EtcdError }
            }
        }
        writer.start()
        #expect(waitUntil { proxy.bytesSwallowed > 0 })
        proxy.dropConnections()
        #expect(waitUntil { thrown.current != nil })
        #expect(thrown.current?.kind == .replyLost)
    }
}
