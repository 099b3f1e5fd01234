import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing
import TestSupport

/// Writes `text` to the file at `path` atomically (a temporary file renamed over it).
func writeAtomically(_ text: String, to path: String) throws {
    let temporary = path + ".tmp-\(UInt32.random(in: 0...UInt32.max))"
    try Data(text.utf8).write(to: URL(fileURLWithPath: temporary))
    #expect(rename(temporary, path) == 0)
}

@Suite("Configuration layers")
struct LayerTests {
    let directory = TemporaryDirectory()

    /// A store on `s.json` in the test's directory read through `layers`, reporting to `errors`.
    func store(_ layers: [DefaultsLayer], errors: Locked<[DefaultsError]>? = nil) -> DefaultsStore {
        DefaultsStore(fileURL: directory.file("s.json"), layers: layers) { error in errors?.append(error) }
    }

    // MARK: Precedence and shadowing

    @Test func theFirstLayerHoldingAValueAnswersThenTheFileThenRegisteredThenTheDefault() throws {
        let key = DefaultsKey("precedenceSpeed", default: 1.0)
        let memory = DefaultsMemoryLayer()
        let config = directory.path + "/config"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try "5\n".write(toFile: config + "/precedence-speed", atomically: true, encoding: .utf8)
        let store = store([
            .memory(memory), .arguments(["--precedence-speed=2"]),
            .environment(prefix: "T", variables: ["T_PRECEDENCE_SPEED": "3"]), .directory(URL(fileURLWithPath: config)),
        ])
        memory[key] = 9
        store.register(["precedenceSpeed": 7.0])
        DefaultsStore(fileURL: directory.file("s.json"))[key] = 6
        #expect(store[key] == 9)
        #expect(store.source(of: key).answering.kind == .memory)
        memory.removeValue(for: key)
        #expect(store[key] == 2)
        #expect(store.source(of: key).answering.spelling == "--precedence-speed")
        let withoutArguments = DefaultsStore(
            fileURL: directory.file("s.json"),
            layers: [.environment(prefix: "T_", variables: ["T_PRECEDENCE_SPEED": "3"]), .directory(URL(fileURLWithPath: config))])
        #expect(withoutArguments[key] == 3)
        let directoryOnly = DefaultsStore(fileURL: directory.file("s.json"), layers: [.directory(URL(fileURLWithPath: config))])
        #expect(directoryOnly[key] == 5)
        #expect(directoryOnly.source(of: key).answering.spelling == config + "/precedence-speed")
        let fileOnly = DefaultsStore(fileURL: directory.file("s.json"), layers: [.memory(memory)])
        #expect(fileOnly[key] == 6)
        fileOnly.removeValue(for: key)
        #expect(fileOnly[key] == 7)
        #expect(fileOnly.source(of: key).answering.kind == .registered)
        fileOnly.unregister(["precedenceSpeed"])
        #expect(fileOnly[key] == 1)
        #expect(fileOnly.source(of: key).answering.kind == .defaultValue)
    }

    @Test func aShadowedSetIsStoredAndDoesNotNotifyAndTheSourceSaysWhy() throws {
        let key = DefaultsKey("shadowedVolume", default: 0.5)
        let memory = DefaultsMemoryLayer()
        memory[key] = 0.9
        let store = store([.memory(memory)])
        let seen = Locked<[DefaultsChange<Double>]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in seen.append(change) }
        store[key] = 0.1
        #expect(seen.current.isEmpty)
        #expect(store[key] == 0.9)
        let source = store.source(of: key)
        #expect(source.isShadowed)
        #expect(source.shadowingLayers.map(\.kind) == [.memory])
        #expect(source.layers.first { $0.kind == .store }?.value == "0.1")
        #expect(source.description.contains("→ memory"))
        // The stored value answers once the layer lets go.
        memory.removeValue(for: key)
        #expect(seen.current.map(\.newValue) == [0.1])
        #expect(seen.current.map(\.oldValue) == [0.9])
        #expect(seen.current.map(\.layer) == [.store])
        #expect(!store.source(of: key).isShadowed)
        try store.flush()
        #expect(jsonObject(at: directory.file("s.json"))?["shadowedVolume"] == .number("0.1"))
        token.invalidate()
    }

    @Test func aMemoryLayerNotifiesWithOldNewAndTheLayerOnTheSettingThread() {
        let key = DefaultsKey("memoryCount", default: 0)
        let memory = DefaultsMemoryLayer()
        let store = store([.memory(memory)])
        store[key] = 3
        let seen = Locked<[DefaultsChange<Int>]>([])
        let token = store.observe(key, options: [.initial, .old, .new, .prior]) { _, change in seen.append(change) }
        memory[key] = 4
        memory[key] = 4
        memory.removeValue(for: key)
        memory.removeValue(for: key)
        #expect(
            seen.current.map {
                "\($0.isPrior ? "prior " : "")\($0.oldValue.map(String.init) ?? "-")>\($0.newValue.map(String.init) ?? "-") \($0.layer)"
            } == [
                "->3 store",
                "prior 3>- store", "3>4 memory",
                // A set of an equal value is a change, as a store's own set is.
                "prior 4>- memory", "4>4 memory",
                "prior 4>- memory", "4>3 store",
            ])
        token.invalidate()
    }

    @Test func removingDuplicatesSkipsAnEqualEffectiveValue() {
        let key = DefaultsKey("duplicateCount", default: 0)
        let memory = DefaultsMemoryLayer()
        let store = store([.memory(memory)])
        store[key] = 5
        let seen = Locked<[Int]>([])
        let token = store.observe(key, options: [.new], removingDuplicates: true) { _, change in seen.append(change.newValue!) }
        memory[key] = 5
        memory[key] = 6
        memory[key] = 6
        memory.removeValue(for: key)
        #expect(seen.current == [6, 5])
        token.invalidate()
    }

    @Test func aLayerBelowTheAnsweringOneDoesNotNotify() {
        let key = DefaultsKey("belowCount", default: 0)
        let top = DefaultsMemoryLayer()
        let below = DefaultsMemoryLayer()
        top[key] = 1
        let store = store([.memory(top), .memory(below)])
        let seen = Locked<[Int]>([])
        let token = store.observe(key, options: [.new]) { _, change in seen.append(change.newValue!) }
        below[key] = 2
        #expect(seen.current.isEmpty)
        top.removeValue(for: key)
        #expect(seen.current == [2])
        token.invalidate()
    }

    @Test func registeredDefaultsNotifyTheObserversOfAbsentKeysOnly() {
        let absent = DefaultsKey("registeredAbsent", default: "built-in")
        let present = DefaultsKey("registeredPresent", default: "built-in")
        let store = store([])
        store[present] = "stored"
        let seen = Locked<[String]>([])
        let tokens = [
            store.observe(absent, options: [.old, .new]) { _, change in
                seen.append("\(change.key) \(change.oldValue!)>\(change.newValue!) \(change.layer)")
            },
            store.observe(present, options: [.old, .new]) { _, change in seen.append("\(change.key) \(change.newValue!)") },
        ]
        store.register(["registeredAbsent": "registered", "registeredPresent": "registered"])
        #expect(store[absent] == "registered")
        #expect(store[present] == "stored")
        store.removeValue(for: present)
        #expect(store[present] == "registered")
        #expect(seen.current == ["registeredAbsent built-in>registered registered", "registeredPresent registered"])
        store.unregister(["registeredAbsent", "registeredPresent"])
        tokens.forEach { $0.invalidate() }
    }

    // MARK: Text layers

    @Test func argumentsParseBothFormsBareFlagsAndStopAtTheDoubleDash() {
        let speed = DefaultsKey("argumentSpeed", default: 1.0)
        let verbose = DefaultsKey("argumentVerbose", default: false)
        let quiet = DefaultsKey("argumentQuiet", default: false)
        let name = DefaultsKey("argumentName", default: "")
        let hosts = DefaultsKey("argumentHosts", default: [String]())
        let after = DefaultsKey("argumentAfter", default: 0)
        let store = store([
            .arguments([
                "input.txt", "--argument-speed", "1.5", "--argument-verbose", "--argumentName=first", "--argument-name", "second",
                "--argument-quiet", "input.txt", "--argument-hosts=[\"a\",\"b\"]", "--unknown-flag", "--", "--argument-after=3",
            ])
        ])
        #expect(store[speed] == 1.5)
        #expect(store[verbose])
        #expect(store[name] == "second")
        // `--flag value` where the value is not a Bool: the flag is bare.
        #expect(store[quiet])
        #expect(store[hosts] == ["a", "b"])
        #expect(store[after] == 0)
        #expect(store.source(of: after).answering.kind == .defaultValue)
    }

    @Test func environmentNamesAreUpperSnakeCaseAfterThePrefix() {
        #expect(LayerKeyNames.variableName(prefix: "PLAYER", key: "playbackSpeed") == "PLAYER_PLAYBACK_SPEED")
        #expect(LayerKeyNames.variableName(prefix: "PLAYER_", key: "maxHTTPConnections") == "PLAYER_MAX_HTTP_CONNECTIONS")
        #expect(LayerKeyNames.variableName(prefix: "", key: "http2Enabled") == "HTTP2_ENABLED")
        #expect(LayerKeyNames.variableName(prefix: "P", key: "cache.size-limit") == "P_CACHE_SIZE_LIMIT")
        #expect(LayerKeyNames.kebabCase("maxHTTPConnections") == "max-http-connections")
    }

    /// Found by fuzzing (Fuzz/regressions/key-names): `a1b` read the variable `A1B`, whose own
    /// spelling was `A1_B`; a word starting with a combining mark joined the `-` before it.
    @Test func spellingASpelledNameAgainChangesNothing() {
        #expect(LayerKeyNames.variableName(prefix: "", key: "a1b") == "A1B")
        #expect(LayerKeyNames.variableName(prefix: "", key: "A1B") == "A1B")
        #expect(LayerKeyNames.variableName(prefix: "", key: "HTTP2Server") == "HTTP2_SERVER")
        #expect(LayerKeyNames.variableName(prefix: "", key: "\u{AA}b") == "\u{AA}B")
        #expect(LayerKeyNames.kebabCase("x\n\u{93E}") == "x")
        #expect(LayerKeyNames.variableName(prefix: "P", key: "\u{1E9E}") == LayerKeyNames.variableName(prefix: "P", key: "\u{DF}"))
    }

    @Test func twoKeysReadingOneVariableAreReportedWhenTheStoreIsMade() {
        _ = DefaultsKey("collidingName", default: 0)
        _ = DefaultsKey("colliding_name", default: 0)
        let errors = Locked<[DefaultsError]>([])
        _ = store([.environment(prefix: "COLLIDE", variables: [:])], errors: errors)
        let reports = errors.current.filter { $0.kind == .layerProblem && $0.reason.contains("COLLIDE_COLLIDING_NAME") }
        #expect(reports.count == 1)
        #expect(reports.first?.reason.contains("'collidingName' and 'colliding_name'") == true)
    }

    @Test func aValueThatDoesNotDecodeIsReportedOnceAndTheNextLayerAnswers() throws {
        let key = DefaultsKey("undecodableSpeed", default: 1.0)
        let errors = Locked<[DefaultsError]>([])
        let store = store(
            [
                .environment(prefix: "U", variables: ["U_UNDECODABLE_SPEED": "fast"]),
                .arguments(["--undecodable-speed=2.5"]),
            ], errors: errors)
        #expect(store[key] == 2.5)
        #expect(store[key] == 2.5)
        // (Other tests' keys collide in this process's environment layers: only this key's reports.)
        let reports = errors.current.filter { $0.kind == .layerProblem && $0.key == "undecodableSpeed" }
        #expect(reports.count == 1)
        let report = try #require(reports.first)
        #expect(report.key == "undecodableSpeed")
        #expect(report.found == "fast")
        #expect(report.reason.contains("environment"))
        #expect(report.reason.contains("U_UNDECODABLE_SPEED"))
        #expect(store.source(of: key).layers[0].problem != nil)
        #expect(store.source(of: key).answering.kind == .arguments)
    }

    /// A decoding error can quote a changed form or a part of the value (`7.25` and a tab is reported as
    /// "7.25 is not an Int"): a secret key's reports and source leave the reason out.
    @Test func aSecretThatDoesNotDecodeIsReportedWithoutAnyPartOfIt() {
        let key = DefaultsKey("secretPoolSize", default: 4, isSecret: true)
        let errors = Locked<[DefaultsError]>([])
        let store = store([.environment(prefix: "SEC", variables: ["SEC_SECRET_POOL_SIZE": "7.25\t"])], errors: errors)
        #expect(store[key] == 4)
        let reports = errors.current.filter { $0.key == "secretPoolSize" }
        #expect(reports.count == 1)
        for report in reports {
            #expect(report.found == "<redacted>")
            #expect(!report.reason.contains("7.25") && !report.description.contains("7.25"), "\(report)")
        }
        let source = store.source(of: key)
        #expect(source.layers[0].problem == "does not decode as Int")
        #expect(!source.description.contains("7.25"), "\(source)")
    }

    @Test func textDecodesForTheKeysType() {
        struct Size: Codable, Equatable { var width: Int }
        func decode<V: Decodable>(_ text: String?, _: V.Type) -> V? {
            try? LayerTextDecoding.decode(LayerText(text: text, spelling: "x"), as: V.self).get()
        }
        #expect(decode("42", Int.self) == 42)
        #expect(decode(" 42 ", Int.self) == 42)
        #expect(decode("4.5", Int.self) == nil)
        #expect(decode("1e3", Double.self) == 1000)
        #expect(decode("\"quoted\"", String.self) == "\"quoted\"")
        #expect(decode("42", String.self) == "42")
        #expect(decode("off", Bool.self) == false)
        #expect(decode("YES", Bool.self) == true)
        #expect(decode(nil, Bool.self) == true)
        #expect(decode(nil, Int.self) == nil)
        #expect(decode("maybe", Bool.self) == nil)
        #expect(decode("[1, 2]", [Int].self) == [1, 2])
        #expect(decode("{\"width\": 3}", Size.self) == Size(width: 3))
        #expect(decode("https://example.com/a", URL.self) == URL(string: "https://example.com/a"))
        #expect(decode("null", Int?.self) == .some(nil))
    }

    // MARK: Directory layers

    @Test func aDirectoryLayerReadsOneFilePerKeyAndNotifiesWhenOneChanges() throws {
        let key = DefaultsKey("directoryToken", default: "")
        let kebab = DefaultsKey("directoryPoolSize", default: 1)
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("first\n\n", to: config + "/directoryToken")
        try writeAtomically("8\n", to: config + "/directory-pool-size")
        let store = store([.directory(URL(fileURLWithPath: config))])
        // One trailing newline is stripped.
        #expect(store[key] == "first\n")
        #expect(store[kebab] == 8)
        let seen = Locked<[String]>([])
        let token = store.observe(key, options: [.new]) { _, change in seen.append("\(change.newValue!) \(change.layer) \(change.origin)") }
        let sizes = Locked<[Int]>([])
        let sizeToken = store.observe(kebab, options: [.new]) { _, change in sizes.append(change.newValue!) }
        try writeAtomically("second\n", to: config + "/directoryToken")
        #expect(waitUntil { seen.current.count == 1 })
        // Written in place.
        rewriteInPlace(config + "/directory-pool-size", "9")
        #expect(waitUntil { sizes.current == [9] })
        #expect(unlink(config + "/directoryToken") == 0)
        #expect(waitUntil { seen.current.count == 2 })
        #expect(seen.current == ["second directory anotherProcess", " defaultValue anotherProcess"])
        #expect(store[key] == "")
        token.invalidate()
        sizeToken.invalidate()
    }

    #if os(Linux)
    /// inotify names the entries that changed: another file's event does not read a file its
    /// writer still has open half-written.
    @Test func aFileBeingRewrittenInPlaceIsReadWhenItsWriterClosesIt() throws {
        let other = DefaultsKey("directoryOther", default: "")
        let port = DefaultsKey("directoryPort", default: 1)
        let config = directory.path + "/halfwritten"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("a", to: config + "/directoryOther")
        try writeAtomically("8080", to: config + "/directoryPort")
        let errors = Locked<[DefaultsError]>([])
        let store = store([.directory(URL(fileURLWithPath: config), isSecret: false)], errors: errors)
        let others = Locked<[String]>([])
        let otherToken = store.observe(other, options: [.new]) { _, change in others.append(change.newValue!) }
        let ports = Locked<[Int]>([])
        let portToken = store.observe(port, options: [.new]) { _, change in ports.append(change.newValue!) }
        // Watching: a change is seen (the directory was read in full once the watch was made).
        try writeAtomically("b", to: config + "/directoryOther")
        #expect(waitUntil { others.current == ["b"] })
        // The port's writer truncates it and writes half of the new value, and has not closed it
        // when the other file changes.
        let descriptor = open(config + "/directoryPort", O_WRONLY | O_TRUNC)
        #expect(descriptor >= 0)
        #expect(write(descriptor, "90", 2) == 2)
        try writeAtomically("c", to: config + "/directoryOther")
        #expect(waitUntil { others.current == ["b", "c"] })
        try writeAtomically("d", to: config + "/directoryOther")
        #expect(waitUntil { others.current == ["b", "c", "d"] })
        #expect(store[port] == 8080)
        #expect(write(descriptor, "90", 2) == 2)
        close(descriptor)
        #expect(waitUntil { ports.current == [9090] })
        #expect(store[port] == 9090)
        #expect(errors.current.isEmpty)
        otherToken.invalidate()
        portToken.invalidate()
    }
    #endif

    @Test func aKubernetesStyleDataSymlinkSwapChangesEveryKeyAtOnce() throws {
        let user = DefaultsKey("swapUser", default: "")
        let password = DefaultsKey("swapPassword", default: "")
        let mount = directory.path + "/mount"
        let fileManager = FileManager.default
        // As the kubelet lays a volume out: timestamped directories, `..data` pointing at one, and
        // each key a link through `..data`.
        try fileManager.createDirectory(atPath: mount + "/..2026_12_03_10_00_00.1", withIntermediateDirectories: true)
        try "alice".write(toFile: mount + "/..2026_12_03_10_00_00.1/swapUser", atomically: false, encoding: .utf8)
        try "one".write(toFile: mount + "/..2026_12_03_10_00_00.1/swapPassword", atomically: false, encoding: .utf8)
        try fileManager.createSymbolicLink(atPath: mount + "/..data", withDestinationPath: "..2026_12_03_10_00_00.1")
        try fileManager.createSymbolicLink(atPath: mount + "/swapUser", withDestinationPath: "..data/swapUser")
        try fileManager.createSymbolicLink(atPath: mount + "/swapPassword", withDestinationPath: "..data/swapPassword")
        let store = store([.directory(URL(fileURLWithPath: mount))])
        #expect(store[user] == "alice")
        #expect(store[password] == "one")
        let changes = Locked<[DefaultsStoreChange]>([])
        let token = store.observeChanges { _, change in changes.append(change) }
        let passwords = Locked<[String]>([])
        let passwordToken = store.observe(password, options: [.new]) { _, change in passwords.append(change.newValue!) }
        // The update: a new directory, a new link renamed over `..data`, the old directory removed.
        try fileManager.createDirectory(atPath: mount + "/..2026_12_03_10_05_00.2", withIntermediateDirectories: true)
        try "alice".write(toFile: mount + "/..2026_12_03_10_05_00.2/swapUser", atomically: false, encoding: .utf8)
        try "two".write(toFile: mount + "/..2026_12_03_10_05_00.2/swapPassword", atomically: false, encoding: .utf8)
        try fileManager.createSymbolicLink(atPath: mount + "/..data_tmp", withDestinationPath: "..2026_12_03_10_05_00.2")
        #expect(rename(mount + "/..data_tmp", mount + "/..data") == 0)
        try fileManager.removeItem(atPath: mount + "/..2026_12_03_10_00_00.1")
        #expect(waitUntil { passwords.current == ["two"] })
        #expect(store[password] == "two")
        #expect(store[user] == "alice")
        #expect(waitUntil { changes.current.contains { $0.keys.contains("swapPassword") } })
        #expect(!changes.current.contains { $0.keys.contains("swapUser") })
        #expect(changes.current.last?.values[password] == "two")
        token.invalidate()
        passwordToken.invalidate()
    }

    /// A kebab-case file name does not say how its key is written (`max-http-connections` is
    /// `maxHTTPConnections`): its change still reaches the key's observers.
    @Test func aKebabCaseFileOfAnAcronymKeyNotifiesWhenItChanges() throws {
        let key = DefaultsKey("maxHTTPPoolSize", default: 1)
        let config = directory.path + "/acronyms"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("2", to: config + "/max-http-pool-size")
        let store = store([.directory(URL(fileURLWithPath: config))])
        #expect(store[key] == 2)
        let seen = Locked<[Int]>([])
        let token = store.observe(key, options: [.new]) { _, change in seen.append(change.newValue!) }
        try writeAtomically("3", to: config + "/max-http-pool-size")
        #expect(waitUntil { seen.current == [3] })
        #expect(store[key] == 3)
        token.invalidate()
    }

    @Test func aDirectoryThatAppearsLaterIsRead() throws {
        let key = DefaultsKey("lateDirectoryValue", default: 0)
        let late = directory.path + "/late"
        let store = store([.directory(URL(fileURLWithPath: late))])
        #expect(store[key] == 0)
        let seen = Locked<[Int]>([])
        let token = store.observe(key, options: [.new]) { _, change in seen.append(change.newValue!) }
        try FileManager.default.createDirectory(atPath: late, withIntermediateDirectories: true)
        try writeAtomically("12", to: late + "/lateDirectoryValue")
        #expect(waitUntil { seen.current == [12] })
        // Watched from then on.
        try writeAtomically("13", to: late + "/lateDirectoryValue")
        #expect(waitUntil { seen.current == [12, 13] })
        token.invalidate()
    }

    @Test func aPolledDirectoryNoticesChanges() throws {
        let key = DefaultsKey("polledDirectoryValue", default: 0)
        let config = directory.path + "/polled"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        let store = store([.directory(URL(fileURLWithPath: config), watching: .polling(interval: .milliseconds(20)))])
        let seen = Locked<[Int]>([])
        let token = store.observe(key, options: [.new]) { _, change in seen.append(change.newValue!) }
        try writeAtomically("5", to: config + "/polledDirectoryValue")
        #expect(waitUntil { seen.current == [5] })
        token.invalidate()
    }

    // MARK: Snapshots, sequences, the store's own changes

    @Test func aSnapshotAndStoreWideObserversSeeTheEffectiveValues() async throws {
        let layered = DefaultsKey("snapshotLayered", default: 0)
        let plain = DefaultsKey("snapshotPlain", default: 0)
        let memory = DefaultsMemoryLayer()
        let store = store([.memory(memory)])
        store[layered] = 1
        store[plain] = 2
        memory[layered] = 10
        let snapshot = store.snapshot()
        #expect(snapshot[layered] == 10)
        #expect(snapshot[plain] == 2)
        #expect(snapshot.keys.isSuperset(of: ["snapshotLayered", "snapshotPlain"]))
        let changes = Locked<[Set<String>]>([])
        let token = store.observeChanges { _, change in changes.append(change.keys) }
        store[layered] = 3  // shadowed: not the store's change either
        store[plain] = 4
        memory[layered] = 11
        #expect(changes.current == [["snapshotPlain"], ["snapshotLayered"]])
        #expect(snapshot[layered] == 10)
        token.invalidate()
        let values = store.values(for: layered)
        var iterator = values.makeAsyncIterator()
        #expect(await iterator.next() == 11)
        memory.removeValue(for: layered)
        #expect(await iterator.next() == 3)
    }

    @Test func aTrackedExpressionOverALayeredStoreFollowsTheEffectiveValue() {
        let key = DefaultsKey("trackedLayered", default: 0)
        let memory = DefaultsMemoryLayer()
        let store = store([.memory(memory)])
        let seen = Locked<[Int]>([])
        let token = KeyValueObservation.tracking(options: [.initial, .new], removingDuplicates: true) {
            store[key] * 10
        } changeHandler: {
            change in
            seen.append(change.newValue!)
        }
        store[key] = 1
        memory[key] = 2
        store[key] = 3  // shadowed
        memory.removeValue(for: key)
        #expect(seen.current == [0, 10, 20, 30])
        token.invalidate()
    }

    @Test func settersOnManyThreadsEndWithTheEffectiveValueAnObserverSawLast() async {
        let key = DefaultsKey("threadedCount", default: 0)
        let memory = DefaultsMemoryLayer()
        let store = store([.memory(memory)])
        let last = Locked<Int?>(nil)
        let token = store.observe(key, options: [.new]) { _, change in last.withLock { $0 = change.newValue } }
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<8 {
                group.addTask {
                    for index in 0..<200 {
                        if thread % 2 == 0 { memory[key] = thread * 1000 + index } else { store[key] = thread * 1000 + index }
                    }
                    if thread % 2 == 0 { memory.removeValue(for: key) }
                }
            }
        }
        // The layer let go of the key: the store's value answers.
        #expect(memory[key] == nil)
        #expect(store.source(of: key).answering.kind == .store)
        #expect(store[key] == DefaultsStore(fileURL: directory.file("s.json"))[key])
        token.invalidate()
    }
}

@Suite("Configuration layers in other processes", .tags(.processes))
struct LayerProcessTests {
    let directory = TemporaryDirectory()

    @Test func argumentsEnvironmentAndDirectoryInAChildProcess() throws {
        let config = directory.path + "/config"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("8\n", to: config + "/max-http-connections")
        var environment = ProcessInfo.processInfo.environment
        environment["PLAYER_PLAYBACK_SPEED"] = "1.25"
        environment["PLAYER_VERBOSE"] = "not-a-bool"
        let result = try runTool(
            ["layers", directory.path + "/s.json", "PLAYER", config, "--verbose"], environment: environment, executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.contains("playbackSpeed=1.25 environment"))
        #expect(lines.contains("verbose=true arguments"))
        #expect(lines.contains("maxHTTPConnections=8 directory"))
        // The environment's Bool does not decode: reported, naming the variable, and the next
        // layer... (the arguments come first here, so it is never read).
        #expect(!lines.contains { $0.hasPrefix("error:") })
        let without = try runTool(
            ["layers", directory.path + "/s.json", "PLAYER", config], environment: environment, executable: testToolPath)
        let others = without.output.split(separator: "\n").map(String.init)
        #expect(others.contains("verbose=false defaultValue"))
        #expect(others.contains { $0.hasPrefix("error:") && $0.contains("PLAYER_VERBOSE") && $0.contains("'verbose'") })
        #expect(!without.output.contains("not-a-bool") || others.contains { $0.contains("not-a-bool") && $0.hasPrefix("error:") })
    }

    @Test func aSecretNeverAppearsInAnythingTheLibraryPrints() throws {
        let secret = "hunter2-\(UInt32.random(in: 0...UInt32.max))"
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        let result = try runTool(["secrets", directory.path + "/s.json", config, secret], executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        // The scenario ran: it read the secret back, watched it change and failed to decode it.
        #expect(result.output.contains("read: true"))
        #expect(result.output.contains("directory read: true"))
        #expect(result.output.contains("change: "))
        #expect(result.output.contains("<redacted>"))
        #expect(result.output.contains("error: "))
        #expect(!result.output.contains(secret), "\(result.output)")
        #expect(!result.error.contains(secret), "\(result.error)")
    }
}
