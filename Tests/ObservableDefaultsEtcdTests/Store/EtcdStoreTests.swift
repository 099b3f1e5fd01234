import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("DefaultsStore on etcd: one server", .tags(.processes), .requiresEtcd)
struct EtcdStoreTests {
    static let speed = DefaultsKey("speed", default: 1.0)
    static let name = DefaultsKey("name", default: "")

    @Test func aSetReachesAnotherInstanceWithOldAndNewValuesAndEtcdsRevision() throws {
        let server = try EtcdServer()
        let writer = try etcdStore(server.endpoints, prefix: "app/")
        let reader = try etcdStore(server.endpoints, prefix: "app/")
        let (mine, myToken) = record(Self.speed, in: writer)
        let (theirs, theirToken) = record(Self.speed, in: reader)
        defer { withExtendedLifetime((myToken, theirToken)) {} }

        writer[Self.speed] = 1.5
        // Observers in the writing process are told at once, before etcd has a revision for it.
        #expect(mine.current == [SeenChange(key: "speed", old: 1.0, new: 1.5, origin: .thisProcess, revision: nil)])
        try writer.flush()
        let stored = try #require(try client(server.endpoints).range(key: bytes("app/speed")).keyValue)
        #expect(stored.value == bytes("1.5"))
        #expect(waitUntil { theirs.current.count == 1 })
        #expect(theirs.current == [SeenChange(key: "speed", old: 1.0, new: 1.5, origin: .anotherProcess, revision: stored.modRevision)])
        #expect(reader[Self.speed] == 1.5)

        // The reader's change comes back to the writer; the writer's own put, echoed by its watch
        // before it, is not delivered again.
        reader[Self.speed] = 2.5
        try reader.flush()
        #expect(waitUntil { mine.current.count == 2 })
        #expect(mine.current.last?.new == 2.5 && mine.current.last?.old == 1.5 && mine.current.last?.origin == .anotherProcess)
        #expect(mine.current.count == 2)
    }

    @Test func updatesFromThreeProcessesEndAtExactlyTheirSum() throws {
        let server = try EtcdServer()
        let store = toolStore(server.endpoints, prefix: "app/")
        let processes = try (0..<3).map { _ in try startTool(["update-many", store, "hits", "1000", "1"], executable: testToolPath) }
        for tool in processes {
            #expect(waitUntil(seconds: 240) { !tool.process.isRunning })
            tool.process.waitUntilExit()
            let error = String(decoding: (try? tool.error.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
            #expect(tool.process.terminationStatus == 0, "\(error)")
        }
        let reader = try etcdStore(server.endpoints, prefix: "app/")
        #expect(reader[DefaultsKey("hits", default: 0)] == 3000)
    }

    @Test func anUpdateIsATransactionOnTheRevisionItRead() throws {
        let server = try EtcdServer()
        let store = try etcdStore(server.endpoints, prefix: "app/")
        let other = try etcdStore(server.endpoints, prefix: "app/")
        let hits = DefaultsKey("hits", default: 0)
        let (seen, token) = record(hits, in: store)
        defer { withExtendedLifetime(token) {} }
        store[hits] = 10
        try store.flush()
        // Another writer changes the key after this store read it: the first transaction fails, and
        // the body runs again on the other writer's value.
        let runs = Counter(0)
        let result = try store.update(hits) { value in
            runs.increment()
            if runs.current == 1 {
                other[hits] = 20
                try other.flush()
            }
            value += 1
            return value
        }
        #expect(result == 21)
        #expect(runs.current == 2)
        #expect(store[hits] == 21)
        let stored = try #require(try client(server.endpoints).range(key: bytes("app/hits")).keyValue)
        #expect(stored.value == bytes("21"))
        // This process's update is reported as this process's change, with its revision.
        #expect(
            seen.current.contains(SeenChange(key: "hits", old: 20, new: 21, origin: .thisProcess, revision: stored.modRevision))
                || seen.current.contains(SeenChange(key: "hits", old: 10, new: 21, origin: .thisProcess, revision: stored.modRevision)))
    }

    @Test func aBatchIsOneTransactionThatAnotherInstanceSeesWhole() throws {
        let server = try EtcdServer()
        let writer = try etcdStore(server.endpoints, prefix: "db/")
        let reader = try etcdStore(server.endpoints, prefix: "db/")
        let host = DefaultsKey("host", default: "db1")
        let port = DefaultsKey("port", default: 5432)
        let changes = Locked<[DefaultsStoreChange]>([])
        let portsSeenWithHost = Locked<[Int]>([])
        let storeToken = reader.observeChanges { _, change in changes.append(change) }
        let hostToken = reader.observe(host) { store, _ in portsSeenWithHost.append(store[port]) }
        defer { withExtendedLifetime((storeToken, hostToken)) {} }

        writer.batch { batch in
            batch[host] = "db2"
            batch[port] = 6543
        }
        try writer.flush()
        #expect(waitUntil { !changes.current.isEmpty })
        let change = try #require(changes.current.first)
        #expect(changes.current.count == 1)
        #expect(change.keys == ["host", "port"])
        #expect(change.origin == .anotherProcess)
        #expect(change.values[host] == "db2" && change.values[port] == 6543)
        // Both keys at one revision: one transaction.
        let etcd = try client(server.endpoints)
        let hostRevision = try #require(try etcd.range(key: bytes("db/host")).keyValue?.modRevision)
        #expect(try etcd.range(key: bytes("db/port")).keyValue?.modRevision == hostRevision)
        #expect(change.revision == hostRevision)
        // The host's observer, told first, already reads the new port.
        #expect(portsSeenWithHost.current == [6543])
    }

    @Test func aWriteSentAgainAfterALostReplyAppliesOnce() throws {
        let server = try EtcdServer()
        let store = try etcdStore(server.endpoints, prefix: "app/")
        let backend = try #require(store.storage.backend as? EtcdBackend)
        let operations: [EtcdOperation] = [.put(key: bytes("app/n"), value: bytes("1"))]
        let first = try backend.queue.sync { () throws(EtcdError) -> Int64 in
            try backend.claimMarker()
            let before = backend.queueState.markerRevision
            let revision = try backend.send(operations, marker: bytes("o-test"))
            // As if the reply had been lost: the back end does not know that the write applied.
            backend.queueState.markerRevision = before
            return revision
        }
        let second = try backend.queue.sync { () throws(EtcdError) -> Int64 in try backend.send(operations, marker: bytes("o-test")) }
        #expect(second == first)
        let stored = try #require(try client(server.endpoints).range(key: bytes("app/n")).keyValue)
        #expect(stored.version == 1)
        #expect(stored.modRevision == first)
    }

    @Test func aValueThatIsNotJSONIsReportedOnceAndTheKeyKeepsItsLastGoodValue() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        _ = try etcd.put(key: bytes("app/speed"), value: bytes("1.5"))
        let errors = Locked<[DefaultsError]>([])
        let store = try etcdStore(server.endpoints, prefix: "app/", errors: errors)
        let (seen, token) = record(Self.speed, in: store)
        defer { withExtendedLifetime(token) {} }
        let broken = try etcd.put(key: bytes("app/speed"), value: bytes("fast"))
        _ = try etcd.put(key: bytes("app/name"), value: bytes("\"after\""))
        #expect(waitUntil { store[Self.name] == "after" })
        #expect(store[Self.speed] == 1.5)
        #expect(seen.current.isEmpty)
        // The report may follow the note that the key is unreadable (the value is seen first).
        #expect(waitUntil { !errors.current.isEmpty })
        let error = try #require(errors.current.first)
        #expect(errors.current.count == 1)
        #expect(error.kind == .corruptFile && error.key == "speed" && error.path == nil)
        #expect(error.description.contains("revision \(broken)"))
        _ = try etcd.put(key: bytes("app/speed"), value: bytes("2"))
        // A change from elsewhere is stored, then its observers are called (after the lock is
        // released): a reader on this thread can see the value before the observer has run.
        #expect(waitUntil { store[Self.speed] == 2.0 })
        #expect(waitUntil { seen.current.map(\.new) == [2.0] }, "\(seen.current)")
    }

    @Test func storesOnTheSameEndpointsAndPrefixShareOneCacheAndOneWatch() throws {
        let server = try EtcdServer()
        let first = try DefaultsStore(etcd: server.endpoints, prefix: "shared/")
        let second = try DefaultsStore(etcd: server.endpoints, prefix: "shared/")
        let other = try DefaultsStore(etcd: server.endpoints, prefix: "other/")
        #expect(first.storage === second.storage)
        #expect(first.storage !== other.storage)
        let (seen, token) = record(Self.speed, in: second)
        defer { withExtendedLifetime(token) {} }
        first[Self.speed] = 3
        // Synchronously, through the shared storage: as stores on one file.
        #expect(seen.current.map(\.origin) == [.thisProcess])
        #expect(first.location == .etcd(endpoints: server.endpoints, prefix: "shared/"))
        #expect(first.fileURL == nil)
    }
}

extension SeenChange {
    init(key: String, old: Value?, new: Value?, origin: DefaultsChangeOrigin, revision: Int64?) {
        self.key = key
        self.old = old
        self.new = new
        self.origin = origin
        self.revision = revision
    }
}
