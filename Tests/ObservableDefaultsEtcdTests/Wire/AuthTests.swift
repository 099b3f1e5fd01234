import Foundation
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("etcd client: authentication", .tags(.processes), .requiresEtcd)
struct AuthTests {
    @Test func aWrongPasswordIsRefusedWithAnErrorNamingTheUserAndNotThePassword() throws {
        let server = try EtcdServer()
        try server.enableAuth(user: "alice", password: "right-password")
        let etcd = try client(server.endpoints, credentials: EtcdCredentials(user: "alice", password: "wrong-password"))
        let error = try #require(throws: EtcdError.self) { try etcd.put(key: bytes("k"), value: bytes("v")) }
        #expect(error.kind == .authenticationFailed)
        #expect(error.user == "alice")
        #expect(error.description.contains("alice"))
        #expect(error.endpoints == server.endpoints)
        #expect(!error.description.contains("wrong-password"))
        #expect(!error.description.contains("right-password"))
    }

    @Test func theRightPasswordWorksForReadsWritesTransactionsAndWatches() throws {
        let server = try EtcdServer()
        try server.enableAuth(user: "alice", password: "right-password")
        let etcd = try client(server.endpoints, credentials: EtcdCredentials(user: "alice", password: "right-password"))
        let start = try etcd.range(prefix: bytes("a/")).revision
        let recorder = NoticeRecorder()
        let watch = etcd.watch(prefix: bytes("a/"), startRevision: start + 1, handler: recorder.handler)
        defer { watch.cancel() }
        let revision = try etcd.put(key: bytes("a/k"), value: bytes("1"))
        #expect(try etcd.range(key: bytes("a/k")).keyValue?.modRevision == revision)
        let result = try etcd.transaction(
            compare: [.modRevision(key: bytes("a/k"), equals: revision)], success: [.put(key: bytes("a/k"), value: bytes("2"))], failure: []
        )
        #expect(result.succeeded)
        #expect(recorder.waitForEvents(2))
        #expect(recorder.summary == ["1", "2"])
    }

    @Test func aWatchWithAWrongPasswordReportsAuthenticationFailed() throws {
        let server = try EtcdServer()
        try server.enableAuth(user: "alice", password: "right-password")
        let etcd = try client(server.endpoints, credentials: EtcdCredentials(user: "alice", password: "wrong-password"))
        let recorder = NoticeRecorder()
        let watch = etcd.watch(prefix: bytes("a/"), startRevision: 0, handler: recorder.handler)
        defer { watch.cancel() }
        #expect(waitUntil { !recorder.entries.current.isEmpty })
        #expect(recorder.entries.current.first == .disconnected(.authenticationFailed))
    }

    @Test func aClusterWithAuthenticationRefusesAClientWithoutCredentialsClearly() throws {
        let server = try EtcdServer()
        try server.enableAuth(user: "alice", password: "right-password")
        let error = try #require(throws: EtcdError.self) { try client(server.endpoints).range(key: bytes("k")) }
        #expect(error.kind == .authenticationFailed)
        #expect(error.description.contains("requires authentication"))
    }

    @Test func anExpiredTokenIsRenewedAndTheRequestRepeated() throws {
        // etcd forgets a simple token after --auth-token-ttl seconds without use.
        let server = try EtcdServer(options: EtcdCluster.Options(authTokenTTL: 1))
        try server.enableAuth(user: "alice", password: "right-password")
        let etcd = try client(server.endpoints, credentials: EtcdCredentials(user: "alice", password: "right-password"))
        _ = try etcd.put(key: bytes("k"), value: bytes("1"))
        let firstToken = try #require(etcd.state.current.token)
        // Real time must pass on the server for the token to expire (this waits for it, it does not
        // prove that something does not happen).
        usleep(2_500_000)
        _ = try etcd.put(key: bytes("k"), value: bytes("2"))
        let secondToken = try #require(etcd.state.current.token)
        #expect(secondToken != firstToken)
        #expect(try etcd.range(key: bytes("k")).keyValue?.value == bytes("2"))
    }

    @Test func credentialsForAClusterWithoutAuthenticationAreNotNeeded() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints, credentials: EtcdCredentials(user: "alice", password: "unused"))
        _ = try etcd.put(key: bytes("k"), value: bytes("v"))
        #expect(etcd.state.current.authenticationDisabled)
        #expect(etcd.state.current.token == nil)
    }
}
