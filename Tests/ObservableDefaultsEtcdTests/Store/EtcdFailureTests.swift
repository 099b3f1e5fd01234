import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("DefaultsStore on etcd: failures", .tags(.processes), .requiresEtcd)
struct EtcdFailureTests {
    static let speed = DefaultsKey("speed", default: 1.0)

    @Test func aWrongPasswordIsAClearErrorAndTheRightOneWorks() throws {
        let server = try EtcdServer()
        try server.enableAuth(user: "alice", password: "right-password")
        let wrong = DefaultsStore.EtcdCredentials(user: "alice", password: "wrong-password")
        let error = try #require(throws: DefaultsError.self) { try etcdStore(server.endpoints, prefix: "app/", credentials: wrong) }
        #expect(error.kind == .authenticationFailed)
        #expect(error.description.contains("alice"))
        #expect(!error.description.contains("wrong-password") && !error.description.contains("right-password"))
        #expect(!"\(wrong)".contains("wrong-password"))

        let right = DefaultsStore.EtcdCredentials(user: "alice", password: "right-password")
        let writer = try etcdStore(server.endpoints, prefix: "app/", credentials: right)
        let reader = try etcdStore(server.endpoints, prefix: "app/", credentials: right)
        writer[Self.speed] = 2
        try writer.flush()
        #expect(waitUntil { reader[Self.speed] == 2 })
    }

    @Test func aStoppedClusterIsAClearErrorAndCachedReadsKeepWorking() throws {
        let server = try EtcdServer()
        let errors = Locked<[DefaultsError]>([])
        let store = try etcdStore(server.endpoints, prefix: "app/", timeout: .seconds(1), errors: errors)
        let (seen, token) = record(Self.speed, in: store)
        defer { withExtendedLifetime(token) {} }
        store[Self.speed] = 2
        try store.flush()
        server.stop()

        #expect(store[Self.speed] == 2)
        store[Self.speed] = 3
        #expect(store[Self.speed] == 3)
        #expect(seen.current.map(\.new) == [2, 3])
        for value in [3.0, 4, 5] {
            store[Self.speed] = value
            let error = try #require(throws: DefaultsError.self) { try store.flush() }
            #expect(error.kind == .unreachable)
            #expect(error.description.contains(server.endpoint.absoluteString))
            #expect(error.description.contains("not written (key 'speed')"))
        }
        // One outage, one report (the watch's and the sends' failures included).
        #expect(waitUntil { !errors.current.isEmpty })
        #expect(errors.current.count == 1)
        #expect(errors.current.first?.kind == .unreachable)
        // Given up, the change stays in memory until etcd's value can be read again.
        #expect(store[Self.speed] == 5)

        let opening = try #require(throws: DefaultsError.self) { try etcdStore(server.endpoints, prefix: "app/", timeout: .seconds(1)) }
        #expect(opening.kind == .unreachable)
        #expect(opening.description.contains(server.endpoint.absoluteString))
    }

    @Test func aWriteEtcdRefusesIsReportedDroppedAndTheCacheTakesEtcdsValueAgain() throws {
        let server = try EtcdServer()
        try server.enableAuth(user: "alice", password: "pw")
        try server.etcdctl(["role", "add", "reader"])
        try server.etcdctl(["role", "grant-permission", "reader", "read", "--prefix=true", "ro/"])
        try server.etcdctl(["user", "add", "bob", "--new-user-password=pw", "--interactive=false"])
        try server.etcdctl(["user", "grant-role", "bob", "reader"])
        _ = try client(server.endpoints, credentials: EtcdCredentials(user: "alice", password: "pw")).put(
            key: bytes("ro/speed"), value: bytes("1.5"))
        let errors = Locked<[DefaultsError]>([])
        let store = try etcdStore(server.endpoints, prefix: "ro/", credentials: .init(user: "bob", password: "pw"), errors: errors)
        #expect(store[Self.speed] == 1.5)
        let (seen, token) = record(Self.speed, in: store)
        defer { withExtendedLifetime(token) {} }

        store[Self.speed] = 3
        let error = try #require(throws: DefaultsError.self) { try store.flush() }
        #expect(error.kind == .permissionDenied)
        #expect(waitUntil { store[Self.speed] == 1.5 })
        // Stored first, then observed (after the lock is released): wait for the observer too.
        #expect(waitUntil { seen.current.count == 2 })
        #expect(seen.current.map(\.new) == [3, 1.5])
        #expect(seen.current.last?.origin == .anotherProcess)
        #expect(errors.current.map(\.kind) == [.permissionDenied])
        #expect(errors.current.first?.key == "speed")
    }

    @Test func aWatchThatMissedACompactedHistoryReloadsAndDeliversTheDifferencesAsOneChange() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        _ = try etcd.put(key: bytes("app/gone"), value: bytes("1"))
        _ = try etcd.put(key: bytes("app/kept"), value: bytes("1"))
        let proxy = try EtcdProxy(targetPort: server.endpoint.port!)
        let errors = Locked<[DefaultsError]>([])
        let store = try etcdStore([proxy.endpoint], prefix: "app/", errors: errors)
        let changes = Locked<[DefaultsStoreChange]>([])
        let token = store.observeChanges { _, change in changes.append(change) }
        defer { withExtendedLifetime(token) {} }
        let gone = DefaultsKey("gone", default: 0)
        let added = DefaultsKey("added", default: 0)
        let kept = DefaultsKey("kept", default: 0)
        #expect(store[gone] == 1)

        // The watch loses its connection; meanwhile the history it would resume from is compacted.
        try proxy.set(.refuse)
        proxy.dropConnections()
        #expect(waitUntil { !errors.current.isEmpty })
        _ = try etcd.put(key: bytes("app/added"), value: bytes("5"))
        _ = try etcd.put(key: bytes("app/added"), value: bytes("6"))
        _ = try etcd.delete(key: bytes("app/gone"))
        let last = try etcd.put(key: bytes("other/x"), value: bytes("1"))
        try etcd.compact(revision: last)
        try proxy.set(.forward)

        #expect(waitUntil { store[added] == 6 && !store.hasValue(for: gone) })
        #expect(store[kept] == 1)
        #expect(waitUntil { !changes.current.isEmpty })
        #expect(changes.current.count == 1)
        #expect(changes.current.first?.keys == ["added", "gone"])
        #expect(changes.current.first?.origin == .anotherProcess)
        // The watch goes on from the reload.
        _ = try etcd.put(key: bytes("app/kept"), value: bytes("2"))
        #expect(waitUntil { store[kept] == 2 })
    }
}
