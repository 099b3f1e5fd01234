import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

/// A value written into etcd without this library (not JSON) affects its key only, in the library
/// and in the tool.
@Suite(
    "DefaultsStore on etcd: values that are not JSON", .tags(.processes),
    .requiresEtcd)
struct EtcdValueTests {
    static let speed = DefaultsKey("playbackSpeed", default: 1.0)
    static let volume = DefaultsKey("volume", default: 0.0)

    @Test func aValueThatIsNotJSONAffectsItsKeyOnlyAndASetOrRemovalReplacesIt() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        _ = try etcd.put(key: bytes("app/playbackSpeed"), value: bytes("notjson"))
        _ = try etcd.put(key: bytes("app/volume"), value: bytes("0.5"))
        let errors = Locked<[DefaultsError]>([])
        let store = try etcdStore(server.endpoints, prefix: "app/", errors: errors)

        #expect(errors.current.map(\.kind) == [.corruptFile])
        #expect(errors.current.first?.key == "playbackSpeed")
        #expect(store[Self.volume] == 0.5)
        #expect(store[Self.speed] == 1.0)
        let read = try #require(throws: DefaultsError.self) { try store.jsonValue(forKey: "playbackSpeed") }
        #expect(read.kind == .corruptFile && read.key == "playbackSpeed")
        #expect(read.description.contains("playbackSpeed") && read.description.contains("not valid JSON"))
        // The other keys write and update normally; the bad one's update leaves it as it is.
        store[DefaultsKey("host", default: "")] = "x"
        try store.flush()
        try store.update(Self.volume) { $0 += 0.25 }
        #expect(try etcd.range(key: bytes("app/volume")).keyValue?.value == bytes("0.75"))
        let update = try #require(throws: DefaultsError.self) { try store.update(Self.speed) { $0 += 1 } }
        #expect(update.kind == .corruptFile && update.key == "playbackSpeed")
        #expect(try etcd.range(key: bytes("app/playbackSpeed")).keyValue?.value == bytes("notjson"))

        // A set replaces it.
        store[Self.speed] = 2
        try store.flush()
        #expect(try etcd.range(key: bytes("app/playbackSpeed")).keyValue?.value == bytes("2"))
        #expect(try store.jsonValue(forKey: "playbackSpeed") == .number("2"))

        // A bad value arriving through the watch: the key keeps its last good value, and a removal
        // replaces the bad one.
        _ = try etcd.put(key: bytes("app/volume"), value: bytes("{oops"))
        #expect(waitUntil { store.hasUnreadableValue(forKey: "volume") })
        #expect(store[Self.volume] == 0.75)
        // Reported right after it is noted unreadable, on the watch's queue.
        #expect(waitUntil { errors.current.contains { $0.key == "volume" } })
        #expect(errors.current.filter { $0.key == "volume" }.map(\.kind) == [.corruptFile])
        store.removeValue(for: Self.volume)
        try store.flush()
        #expect(try etcd.range(key: bytes("app/volume")).keyValue == nil)
        #expect(try store.jsonValue(forKey: "volume") == nil)
        #expect(errors.current.count == 2)
    }

    @Test func theToolReadsWritesAndUpdatesTheOtherKeysAndRepairsTheBadOne() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        _ = try etcd.put(key: bytes("p/playbackSpeed"), value: bytes("notjson"))
        let endpoints = server.endpoints
        func tool(_ command: String, _ arguments: [String] = []) throws -> ToolResult {
            try etcdTool(command, endpoints, prefix: "p/", arguments)
        }

        let write = try tool("write", ["host", "\"x\""])
        #expect(write.status == 0, "\(write.error)")
        let all = try tool("read")
        #expect(all.status == 0 && all.output == "{\n  \"host\": \"x\"\n}\n", "\(all.error)")
        #expect(all.error.contains("'playbackSpeed' is not valid JSON"))
        let other = try tool("read", ["host"])
        #expect(other.status == 0 && other.output == "\"x\"\n" && other.error.isEmpty, "\(other.error)")
        let missing = try tool("read", ["counter"])
        #expect(missing.status == 1 && missing.error.contains("key 'counter' not found"))
        let bad = try tool("read", ["playbackSpeed"])
        #expect(bad.status == 1 && bad.output.isEmpty)
        #expect(bad.error.contains("'playbackSpeed' is not valid JSON") && bad.error.contains("revision"))
        let counter = try tool("update", ["counter", "--add", "1"])
        #expect(counter.status == 0 && counter.output == "1\n", "\(counter.error)")
        let badUpdate = try tool("update", ["playbackSpeed", "--add", "1"])
        #expect(badUpdate.status == 1 && badUpdate.error.contains("'playbackSpeed' is not valid JSON"))
        #expect(try etcd.range(key: bytes("p/playbackSpeed")).keyValue?.value == bytes("notjson"))

        let overwrite = try tool("write", ["playbackSpeed", "1.5"])
        #expect(overwrite.status == 0, "\(overwrite.error)")
        #expect(try etcd.range(key: bytes("p/playbackSpeed")).keyValue?.value == bytes("1.5"))
        _ = try etcd.put(key: bytes("p/playbackSpeed"), value: bytes("notjson"))
        let delete = try tool("delete", ["playbackSpeed"])
        #expect(delete.status == 0, "\(delete.error)")
        #expect(try etcd.range(key: bytes("p/playbackSpeed")).keyValue == nil)
    }
}
