import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing
import TestSupport

/// What `print(snapshot)` shows: each holding with the layer it comes from, and, where the key's
/// type is known, never a value that type's read skips as the one that answers.
@Suite("Snapshot descriptions")
struct SnapshotDescriptionTests {
    let directory = TemporaryDirectory()

    /// A unique key name: names and their types are process-wide.
    func name(_ base: String) -> String { base + String(UInt32.random(in: 0...UInt32.max), radix: 36) }

    @Test func aValueTheKeysTypeSkipsIsShownSkippedWithTheValueThatAnswers() throws {
        let port = DefaultsKey(name("port"), default: 80)
        let file = directory.file("s.json")
        try Data(#"{"\#(port.name)": 9000}"#.utf8).write(to: file)
        let flag = "--" + LayerKeyNames.kebabCase(port.name)
        let store = DefaultsStore(fileURL: file, layers: [.arguments([flag, "abc"])])
        #expect(store[port] == 9000 && store.snapshot()[port] == 9000)
        let shown = "\(port.name): 9000 from store (arguments: abc, skipped: does not decode as Int)"
        #expect(store.snapshot().description.contains(shown), "\(store.snapshot())")
        // A store-wide change's description shows the same.
        let changes = Locked<[String]>([])
        let token = store.observeChanges { _, change in changes.append(change.description) }
        store[DefaultsKey(name("other"), default: 0)] = 1
        token.invalidate()
        #expect(changes.current.first?.contains(shown) == true, "\(changes.current)")
    }

    @Test func aKeyOfUnknownTypeShowsEachHoldingWithItsLayerFirstFirst() throws {
        let keyName = name("untyped")
        let file = directory.file("s.json")
        try Data(#"{"\#(keyName)": 9000}"#.utf8).write(to: file)
        let store = DefaultsStore(
            fileURL: file, layers: [.environment(prefix: "SD", variables: [LayerKeyNames.variableName(prefix: "SD", key: keyName): "abc"])])
        // Interned (so the layers are read) without a type.
        _ = DefaultsKeyNames.offset(of: keyName)
        #expect(store.snapshot().description.contains("\(keyName): abc from environment (store: 9000, shadowed)"), "\(store.snapshot())")
    }

    @Test func aValueNoSourceAnswersWithIsShownAsTheRegisteredOrTheKeysDefault() throws {
        let count = DefaultsKey(name("count"), default: 1)
        let file = directory.file("s.json")
        try Data(#"{"\#(count.name)": "many"}"#.utf8).write(to: file)
        let store = DefaultsStore(fileURL: file)
        #expect(
            store.snapshot().description.contains("\(count.name): the key's default (store: \"many\", skipped: does not decode as Int)"))
        store.register([count.name: 5])
        #expect(
            store.snapshot().description.contains("\(count.name): 5 from registered (store: \"many\", skipped: does not decode as Int)"))
        // A plain value of the back end reads as it is.
        store[count] = 7
        #expect(store.snapshot().description.contains("\(count.name): 7"))
        #expect(!store.snapshot().description.contains("\(count.name): 7 from"))
    }

    /// A key whose type the store knows only from a registered default (no `DefaultsKey` of the
    /// name is made anywhere): the registered value's type marks what it skips.
    @Test func aKeyKnownOnlyByItsRegisteredDefaultShowsTheValueItsTypeSkips() throws {
        let keyName = name("registeredOnly")
        let file = directory.file("s.json")
        try Data(#"{"\#(keyName)": 9000}"#.utf8).write(to: file)
        let store = DefaultsStore(fileURL: file, layers: [.arguments(["--" + LayerKeyNames.kebabCase(keyName), "abc"])])
        #expect(DefaultsKeyNames.knownType(of: keyName) == nil)
        store.register([keyName: 80])
        let printed = "\(store.snapshot())"
        #expect(printed.contains("\(keyName): 9000 from store (arguments: abc, skipped: does not decode as Int)"), "\(printed)")
    }

    /// A key whose type the store knows only from a configuration type decoded through it (no
    /// `DefaultsKey` of the name is made, nor a default registered): the property's type marks
    /// what it skips. The property's name is the key, so it is used by this test only.
    @Test func aKeyKnownOnlyByADecodedConfigurationShowsTheValueItsTypeSkips() throws {
        struct DecodedOnly: Decodable, Equatable { var snapshotDecodedOnlyPort: Int }
        let keyName = "snapshotDecodedOnlyPort"
        let file = directory.file("s.json")
        try Data(#"{"\#(keyName)": 9000}"#.utf8).write(to: file)
        let store = DefaultsStore(fileURL: file, layers: [.arguments(["--snapshot-decoded-only-port", "abc"])])
        #expect(DefaultsKeyNames.knownType(of: keyName) == nil)
        #expect(try store.decode(DecodedOnly.self, strictly: false) == DecodedOnly(snapshotDecodedOnlyPort: 9000))
        let printed = "\(store.snapshot())"
        #expect(printed.contains("\(keyName): 9000 from store (arguments: abc, skipped: does not decode as Int)"), "\(printed)")
    }
}
