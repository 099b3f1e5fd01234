import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("DefaultsStore on etcd: one server", .tags(.processes), .enabled(if: EtcdTestEnvironment.testsEnabled, "KVO_SKIP_ETCD_TESTS=1"))
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
