import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing

struct Settings: Codable, Sendable, Equatable {
    var name: String
    var volume: Double
    var tags: [String]
}

@Suite("Defaults store in one process")
struct StoreTests {
    let directory = TemporaryDirectory()

    @Test func twoStoresOnOneSuiteShareStorageAndNotifySynchronously() {
        let key = DefaultsKey("playbackSpeed", default: 0.0)
        let store = DefaultsStore(suiteName: "player", directory: directory.url)
        let seen = Locked<[Double]>([])
        let origins = Locked<[DefaultsChangeOrigin]>([])
        let token = store.observe(key, options: [.initial, .new]) { _, change in
            seen.append(change.newValue!)
            origins.append(change.origin)
        }
        store.set(1.5, for: key)
        let other = DefaultsStore(suiteName: "player", directory: directory.url)
        other.set(2.0, for: key)
        // No waiting: both deliveries happened inside `set`.
        #expect(seen.current == [0.0, 1.5, 2.0])
        #expect(origins.current == [.thisProcess, .thisProcess, .thisProcess])
        #expect(store[key] == 2.0)
        token.invalidate()
    }

    @Test func aPathSpelledDifferentlyReachesTheSameStorage() throws {
        let key = DefaultsKey("count", default: 0)
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        try FileManager.default.createSymbolicLink(atPath: directory.path + "/link", withDestinationPath: directory.path)
        let viaLink = DefaultsStore(fileURL: URL(fileURLWithPath: directory.path + "/link/./s.json"))
        viaLink[key] = 7
        #expect(store[key] == 7)
        #expect(store.fileURL == viaLink.fileURL)
    }

    @Test func oldPriorAndNewArriveInKeyValueObservingOrder() {
        let key = DefaultsKey("volume", default: 0.5)
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let seen = Locked<[DefaultsChange<Double>]>([])
        let valueDuringPrior = Locked<Double?>(nil)
        let token = store.observe(key, options: [.old, .new, .prior]) { store, change in
            if change.isPrior { valueDuringPrior.withLock { $0 = store[key] } }
            seen.append(change)
        }
        store[key] = 0.8
        #expect(
            seen.current == [
                // The prior's layer is the old value's: the key's default.
                DefaultsChange(key: "volume", newValue: nil, oldValue: 0.5, isPrior: true, origin: .thisProcess, layer: .defaultValue),
                DefaultsChange(key: "volume", newValue: 0.8, oldValue: 0.5, isPrior: false, origin: .thisProcess),
            ])
        #expect(valueDuringPrior.current == 0.5)
        #expect(seen.current[1].keyValueChange == KeyValueObservedChange(kind: .setting, newValue: 0.8, oldValue: 0.5))
        token.invalidate()
    }

    @Test func everyAssignmentNotifiesEqualValuesIncluded() {
        let key = DefaultsKey("mode", default: "a")
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let count = Locked(0)
        let token = store.observe(key) { _, change in
            #expect(change.newValue == nil)  // options [] as in KVO: no values unless asked
            count.withLock { $0 += 1 }
        }
        store[key] = "b"
        store[key] = "b"
        #expect(count.current == 2)
        token.invalidate()
    }

    @Test func removingAKeyReadsAndReportsItsDefault() {
        let key = DefaultsKey("name", default: "anonymous")
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        store[key] = "ada"
        #expect(store.hasValue(for: key))
        let seen = Locked<[String?]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in seen.append(change.newValue) }
        store.removeValue(for: key)
        #expect(!store.hasValue(for: key))
        #expect(store[key] == "anonymous")
        #expect(seen.current == ["anonymous"])
        store[key] = "grace"
        store.reset()
        #expect(store[key] == "anonymous")
        #expect(seen.current == ["anonymous", "grace", "anonymous"])
        token.invalidate()
    }

    @Test func anInvalidatedOrDroppedTokenEndsTheObservation() {
        let key = DefaultsKey("n", default: 0)
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let count = Locked(0)
        let token = store.observe(key) { _, _ in count.withLock { $0 += 1 } }
        store[key] = 1
        token.invalidate()
        token.invalidate()
        store[key] = 2
        do {
            _ = store.observe(key) { _, _ in count.withLock { $0 += 1 } }
        }
        store[key] = 3
        #expect(count.current == 1)
    }

    @Test func aHandlerMayWriteTheStoreAndObserveAgain() {
        let source = DefaultsKey("source", default: 0)
        let mirror = DefaultsKey("mirror", default: 0)
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let tokens = Locked<[KeyValueObservation]>([])
        let token = store.observe(source, options: [.new]) { store, change in
            store[mirror] = change.newValue! * 2
            tokens.append(store.observe(mirror) { _, _ in })
        }
        store[source] = 21
        #expect(store[mirror] == 42)
        #expect(tokens.current.count == 1)
        token.invalidate()
    }

    @Test func valuesSequenceYieldsTheCurrentValueThenEveryChange() async {
        let key = DefaultsKey("level", default: 1)
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let values = store.values(for: key)
        store[key] = 2
        store[key] = 3
        let received = await withDeadline {
            var received: [Int] = []
            for await value in values {
                received.append(value)
                if received.count == 3 { break }
            }
            return received
        }
        #expect(received == [1, 2, 3])
    }

    /// `changes(for:)`: each change with its old and new values and where it came from (another
    /// process's write included), and the sequence finishes when the last store goes.
    @Test func changesSequenceYieldsEachChangeWithItsOrigin() async throws {
        let key = DefaultsKey("changedLevel", default: 1)
        let url = directory.file("s.json")
        var store: DefaultsStore? = DefaultsStore(fileURL: url)
        let changes = store!.changes(for: key)
        // Registered after the sequence, so told after it: once this observer has heard of the
        // other process's change, the sequence has it too (the value alone is visible before the
        // observers are told, on the watcher's thread).
        let told = Locked<[Int]>([])
        let token = store!.observe(key, options: [.new]) { _, change in told.append(change.newValue!) }
        store![key] = 2
        try store!.flush()
        try writeAtomically(#"{"changedLevel": 3}"#, to: url.path)
        #expect(waitUntil { told.current == [2, 3] })
        token.invalidate()
        store = nil
        // The sequence finishes: the last store is gone.
        let received = await withDeadline {
            var received: [DefaultsChange<Int>] = []
            for await change in changes { received.append(change) }
            return received
        }
        #expect(received?.map(\.oldValue) == [1, 2] && received?.map(\.newValue) == [2, 3], "\(String(describing: received))")
        #expect(received?.map(\.origin) == [.thisProcess, .anotherProcess])
    }

    /// A key of an optional type reads the file's value (a cast of a missing typed value to an
    /// optional type succeeds with `nil`: it read `nil`), and its own `nil`.
    @Test func aKeyOfAnOptionalTypeReadsTheFilesValue() throws {
        let url = directory.file("s.json")
        try Data(#"{"optionalLimit": 5}"#.utf8).write(to: url)
        let store = DefaultsStore(fileURL: url)
        let key = DefaultsKey<Int?>("optionalLimit", default: nil)
        #expect(store[key] == 5)
        #expect(store.snapshot()[key] == 5)
        try store.update(key) { $0 = ($0 ?? 0) + 1 }
        #expect(store[key] == 6)
        store[key] = nil
        #expect(store[key] == nil)
        store[key] = 7
        #expect(store[key] == 7)
    }

    @Test func codableValuesAreWrittenAsPlainSortedPrettyJSON() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        store[DefaultsKey("speed", default: 0.0)] = 1.5
        store[DefaultsKey("count", default: 0)] = 3
        store[DefaultsKey("enabled", default: false)] = true
        store[DefaultsKey("title", default: "")] = "Hello \"you\""
        store[DefaultsKey("list", default: [Int]())] = [1, 2]
        store[DefaultsKey("map", default: [String: Int]())] = ["b": 2, "a": 1]
        store[DefaultsKey("settings", default: Settings(name: "", volume: 0, tags: []))] = Settings(name: "x", volume: 0.25, tags: ["t"])
        store[DefaultsKey("missing", default: Optional<String>.none)] = nil
        try store.flush()
        #expect(
            contents(of: url) == """
                {
                  "count": 3,
                  "enabled": true,
                  "list": [
                    1,
                    2
                  ],
                  "map": {
                    "a": 1,
                    "b": 2
                  },
                  "missing": null,
                  "settings": {
                    "name": "x",
                    "tags": [
                      "t"
                    ],
                    "volume": 0.25
                  },
                  "speed": 1.5,
                  "title": "Hello \\"you\\""
                }

                """)
    }

    @Test func handWrittenValuesDecodeAsTheirKeysTypes() throws {
        let url = directory.file("s.json")
        try """
        {"speed": 2, "count": 3, "enabled": false, "title": "caf\\u00e9", "list": [1, 2.5],
         "settings": {"name": "n", "volume": 1e-1, "tags": []}, "missing": null}
        """.write(to: url, atomically: false, encoding: .utf8)
        let store = DefaultsStore(fileURL: url)
        #expect(store[DefaultsKey("speed", default: 0.0)] == 2.0)
        #expect(store[DefaultsKey("count", default: 0)] == 3)
        #expect(store[DefaultsKey("enabled", default: true)] == false)
        #expect(store[DefaultsKey("title", default: "")] == "café")
        #expect(store[DefaultsKey("list", default: [Double]())] == [1, 2.5])
        #expect(
            store[DefaultsKey("settings", default: Settings(name: "", volume: 0, tags: ["d"]))]
                == Settings(name: "n", volume: 0.1, tags: []))
        #expect(store[DefaultsKey("missing", default: Optional("default"))] == nil)
        #expect(store[DefaultsKey("absent", default: 9)] == 9)
    }

    @Test func persistenceIsAutomaticWithoutFlush() {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        store[DefaultsKey("saved", default: 0)] = 42
        #expect(waitUntil { jsonObject(at: url)?["saved"] == .number("42") })
    }

    @Test func theValidatingInitializerThrowsForAnInvalidSuiteName() throws {
        for name in ["", ".", "..", "a/b", "../etc/passwd", "nul\u{0}"] {
            let error = #expect(throws: DefaultsError.self) { try DefaultsStore(validatingSuiteName: name, directory: directory.url) }
            #expect(error?.kind == .invalidSuiteName)
            #expect(error?.description.contains("is not a valid suite name") == true)
        }
        let store = try DefaultsStore(validatingSuiteName: "com.example.app", directory: directory.url)
        #expect(store.fileURL?.lastPathComponent == "com.example.app.json")
    }

    @Test func anInvalidSuiteNameTrapsInThePlainInitializer() async {
        await #expect(processExitsWith: .failure) {
            _ = DefaultsStore(suiteName: "a/b", directory: URL(fileURLWithPath: "/tmp"))
        }
    }

    @Test func aStoreNamesItsFileInTheDirectoryItWasGiven() {
        let store = DefaultsStore(suiteName: "com.example.app", directory: directory.url)
        #expect(store.fileURL?.path == directory.path + "/com.example.app.json")
        #expect(DefaultsStore.isValidSuiteName("com.example.app"))
        #expect(!DefaultsStore.isValidSuiteName("a/b"))
        #expect(!DefaultsStore.isValidSuiteName(".."))
        #expect(!DefaultsStore.isValidSuiteName(""))
    }

    /// `exit()` called on a storage's own queue (from an error handler or another process's change)
    /// still writes that storage's pending changes.
    @Test func theExitFlushIncludesTheStorageWhoseQueueExits() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        store[DefaultsKey("x", default: 0)] = 1
        let storage = store.storage
        storage.fileBackend!.queue.sync { DefaultsStorageRegistry.flushAll { $0 === storage } }
        #expect(jsonObject(at: url) == ["x": .number("1")])
    }
}

@Suite("Default location")
struct LocationTests {
    @Test func xdgConfigHomeWinsWhenAbsolute() {
        #if os(Linux)
        #expect(
            DefaultsStore.defaultDirectoryPath(environment: ["XDG_CONFIG_HOME": "/x/conf", "HOME": "/home/u"], homeDirectory: "/pw")
                == "/x/conf")
        #endif
    }

    @Test func aRelativeOrMissingXDGConfigHomeFallsBackToHomeConfig() {
        #if os(Linux)
        #expect(
            DefaultsStore.defaultDirectoryPath(environment: ["XDG_CONFIG_HOME": "conf", "HOME": "/home/u/"], homeDirectory: "/pw")
                == "/home/u/.config")
        #expect(DefaultsStore.defaultDirectoryPath(environment: ["HOME": "/home/u"], homeDirectory: "/pw") == "/home/u/.config")
        #expect(DefaultsStore.defaultDirectoryPath(environment: [:], homeDirectory: "/pw") == "/pw/.config")
        #else
        #expect(DefaultsStore.defaultDirectoryPath(environment: ["HOME": "/Users/u"], homeDirectory: nil) == "/Users/u/Library/Preferences")
        #endif
    }
}

extension DefaultsKey where Value == Double {
    static var readmeSpeed: DefaultsKey<Double> { DefaultsKey("playbackSpeed", default: 1.0) }
}

@Suite("README example")
struct ReadmeExampleTests {
    let directory = TemporaryDirectory()

    @Test func keysDeclaredAsStaticMembersReadAsImplicitMembers() throws {
        let store = DefaultsStore(suiteName: "com.example.player", directory: directory.url)
        let seen = Locked<[Double]>([])
        let token = store.observe(.readmeSpeed, options: [.initial, .old, .new]) { _, change in seen.append(change.newValue!) }
        store[.readmeSpeed] = 1.5
        try store.flush()
        #expect(seen.current == [1.0, 1.5])
        #expect(jsonObject(at: try #require(store.fileURL)) == ["playbackSpeed": .number("1.5")])
        token.invalidate()
    }
}
