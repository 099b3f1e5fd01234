import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing
import TestSupport

/// A configuration of the standard property types.
private struct StandardSettings: Decodable, Equatable, Sendable {
    enum Mode: String, Decodable, CaseIterable { case fast, safe }
    struct Database: Decodable, Equatable { var host: String; var port: Int }
    var port: Int
    var ratio: Double
    var verbose: Bool
    var name: String
    var hosts: [String]
    var limits: [String: Int]
    var endpoint: URL
    var timeout: Duration
    var mode: Mode
    var database: Database
    var comment: String?
}

/// A configuration whose keys are unique to a test (the process interns key names; the layers
/// spell them from the names).
private struct Pair: Decodable, Equatable, Sendable {
    var alpha: Int
    var beta: Int
}

@Suite("Typed configuration")
struct ConfigurationTests {
    let directory = TemporaryDirectory()

    @Test func aTypeDecodesThroughEveryLayerFirstFirst() throws {
        let config = directory.path + "/config"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("safe\n", to: config + "/mode")
        let file = directory.file("s.json")
        try Data(#"{"port": 9000, "ratio": 0.5, "name": "file", "hosts": ["a", "b"], "database": {"host": "db", "port": 5432}}"#.utf8)
            .write(to: file)
        let store = DefaultsStore(
            fileURL: file,
            layers: [
                .arguments(["--port=7000", "--verbose"]), .environment(prefix: "CT", variables: ["CT_LIMITS": #"{"rps": 10}"#]),
                .directory(URL(fileURLWithPath: config), isSecret: false),
            ])
        store.register(["endpoint": URL(string: "https://example.com/api")!, "timeout": Duration.seconds(5), "name": "registered"])
        let settings = try store.decode(StandardSettings.self)
        #expect(
            settings
                == StandardSettings(
                    port: 7000, ratio: 0.5, verbose: true, name: "file", hosts: ["a", "b"], limits: ["rps": 10],
                    endpoint: URL(string: "https://example.com/api")!, timeout: .seconds(5), mode: .safe,
                    database: StandardSettings.Database(host: "db", port: 5432), comment: nil))
        // A snapshot decodes the same, at its instant.
        #expect(try store.snapshot().decode(StandardSettings.self) == settings)
    }

    /// Strictly, every failing property is listed: values that do not decode in any layer (even
    /// where another answers), and missing non-optionals; each names the key, the layer and where.
    @Test func strictlyEveryFailingPropertyIsListedWithItsLayerAndKey() throws {
        let file = directory.file("s.json")
        try Data(#"{"port": 9000, "ratio": "half", "name": "n", "mode": "slow", "endpoint": "https://x.example"}"#.utf8).write(to: file)
        let store = DefaultsStore(
            fileURL: file,
            layers: [
                .arguments(["--port", "abc"]), .environment(prefix: "CT", variables: ["CT_HOSTS": "not-a-list", "CT_VERBOSE": "maybe"]),
            ])
        do {
            _ = try store.decode(StandardSettings.self)
            Issue.record("decoded")
        } catch {
            #expect(error.kind == .invalidConfiguration)
            let problems = error.configurationProblems
            let byKey = Dictionary(grouping: problems, by: \.key)
            #expect(byKey["port"]?.first?.layer == .arguments && byKey["port"]?.first?.spelling == "--port", "\(problems)")
            #expect(byKey["ratio"]?.first?.layer == .store, "\(problems)")
            #expect(byKey["verbose"]?.first?.layer == .environment && byKey["verbose"]?.first?.spelling == "CT_VERBOSE")
            #expect(byKey["hosts"]?.first?.layer == .environment)
            #expect(byKey["mode"]?.first?.layer == .store)
            for missing in ["limits", "timeout", "database"] {
                #expect(byKey[missing]?.first?.layer == nil && byKey[missing]?.first?.problem.hasPrefix("missing") == true, "\(missing)")
            }
            #expect(byKey["comment"] == nil && byKey["name"] == nil && byKey["endpoint"] == nil)
            #expect(problems.count == 8, "\(problems)")
            let text = error.description
            #expect(text.contains("StandardSettings does not decode, 8 problems"), "\(text)")
            #expect(
                text.contains(
                    "port: the arguments layer's value (--port) does not decode as Int: it is not JSON (line 1, column 1: "
                        + "unexpected character, expected a value (a string is written in double quotes)), and Int values are read as JSON"),
                "\(text)")
        }
        // Not strictly, the file's port answers where the arguments' does not decode.
        let lenient = DefaultsStore(fileURL: directory.file("t.json"), layers: [.arguments(["--alpha", "x", "--beta=2"])])
        lenient.register(["alpha": 1])
        #expect(throws: DefaultsError.self) { try lenient.decode(Pair.self) }
        #expect(try lenient.decode(Pair.self, strictly: false) == Pair(alpha: 1, beta: 2))
        // Not strictly, an optional whose only value does not decode is absent; a non-optional
        // whose only value does not decode fails, naming that value.
        struct Optionals: Decodable { var gamma: Int?; var delta: Int }
        let optionals = DefaultsStore(fileURL: directory.file("u.json"), layers: [.arguments(["--gamma=x", "--delta=y"])])
        do {
            _ = try optionals.decode(Optionals.self, strictly: false)
            Issue.record("decoded")
        } catch {
            #expect(
                error.configurationProblems.map(\.key) == ["delta"] && error.configurationProblems.first?.layer == .arguments, "\(error)")
        }
    }

    /// A secret's problem quotes nothing of its value: not a declared secret's, not a secret
    /// layer's.
    @Test func aSecretsProblemQuotesNothingOfIt() throws {
        struct Secrets: Decodable { var pinCode: Int; var sessionLimit: Int }
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        let (pin, limit) = (randomSecret(prefix: "12"), randomSecret(prefix: "34"))
        try writeAtomically(limit + "\n", to: config + "/sessionLimit")
        let file = directory.file("s.json")
        try Data(#"{"pinCode": "\#(pin)"}"#.utf8).write(to: file)
        let store = DefaultsStore(fileURL: file, layers: [.directory(URL(fileURLWithPath: config))], secrets: ["pinCode"])
        do {
            _ = try store.decode(Secrets.self)
            Issue.record("decoded")
        } catch {
            #expect(error.configurationProblems.map(\.key) == ["pinCode", "sessionLimit"])
            let printed = everythingPrinted(error)
            for secret in [pin, limit] { #expect(leak(of: secret, in: printed, length: 4) == nil, "\(printed)") }
        }
    }

    /// Past a raw-value enum that fails (bad in every layer, or missing), `CaseIterable` or not and
    /// whatever its raw values, every later failing property is listed too, each with its layer
    /// and key, a secret's value never quoted.
    @Test func everyFailingPropertyPastARawValueEnumIsListed() throws {
        enum Level: String, Decodable { case low, high }
        enum Status: Int, Decodable { case ok = 200, gone = 410 }
        struct Enums: Decodable {
            var level: Level
            var status: Status
            var count: Int
            var pinCode: Int
            var backupLevel: Level?
            var name: String
        }
        let pin = randomSecret(prefix: "56")
        let file = directory.file("s.json")
        try Data(#"{"level": "loud", "pinCode": "\#(pin)"}"#.utf8).write(to: file)
        let store = DefaultsStore(
            fileURL: file,
            layers: [
                .arguments(["--status=201", "--count=many", "--backup-level=none"]),
                .environment(prefix: "CE", variables: ["CE_LEVEL": "medium"]),
            ],
            secrets: ["pinCode"])
        do {
            _ = try store.decode(Enums.self)
            Issue.record("decoded")
        } catch {
            let problems = error.configurationProblems
            #expect(problems.map(\.key) == ["level", "level", "status", "count", "pinCode", "backupLevel", "name"], "\(problems)")
            #expect(problems.map(\.layer) == [.environment, .store, .arguments, .arguments, .store, .arguments, nil], "\(problems)")
            #expect(
                problems.map(\.spelling) == ["CE_LEVEL", nil, "--status", "--count", nil, "--backup-level", nil], "\(problems)")
            try #require(problems.count == 7)
            #expect(problems[0].problem.hasPrefix("does not decode as Level: "), "\(problems[0])")
            #expect(problems[4].problem == "does not decode as Int", "\(problems[4])")
            #expect(problems[6].problem.hasPrefix("missing"), "\(problems[6])")
            #expect(error.description.contains("Enums does not decode, 7 problems"), "\(error)")
            #expect(!error.description.contains("not checked"), "\(error)")
            #expect(leak(of: pin, in: everythingPrinted(error), length: 4) == nil, "\(error)")
        }
        // Missing in every source, as the first properties: the rest is checked all the same.
        struct Missing: Decodable { var level: Level; var status: Status; var count: Int }
        do {
            _ = try DefaultsStore(fileURL: directory.file("t.json")).decode(Missing.self)
            Issue.record("decoded")
        } catch {
            #expect(error.configurationProblems.map(\.key) == ["level", "status", "count"], "\(error)")
            #expect(error.configurationProblems.allSatisfy { $0.layer == nil && $0.problem.hasPrefix("missing") }, "\(error)")
            #expect(!error.description.contains("not checked"), "\(error)")
        }
    }

    /// The value decoding goes on with past a raw-value enum is its first declared case, made by
    /// its `init(rawValue:)`, whatever its raw values (not 0 nor "", not sorted), in a struct too;
    /// an enum of one case has none (it takes no bytes: see `ConfigurationPlaceholder`).
    @Test func aRawValueEnumsPlaceholderIsItsFirstCase() {
        enum Named: String, Decodable { case zulu, alpha, mike }
        enum Numbered: Int, Decodable { case high = 9, low = -1 }
        struct Nested: Decodable { var named: Named }
        enum Single: String, Decodable { case only }
        #expect(ConfigurationPlaceholder.make(Named.self) == .zulu)
        #expect(ConfigurationPlaceholder.make(Numbered.self) == .high)
        #expect(ConfigurationPlaceholder.make(Nested.self)?.named == .zulu)
        #expect(ConfigurationPlaceholder.make(Single.self) == nil)
        // A struct of one byte is never read from a 0 byte: its computed rawValue would run on a
        // value its initialiser never made (here it would stop the test).
        struct Checked: RawRepresentable, Decodable, Equatable {
            let stored: UInt8
            var rawValue: UInt8 {
                precondition(stored != 0, "read from a value init(rawValue:) never made")
                return stored
            }
            init?(rawValue: UInt8) {
                guard rawValue != 0 else { return nil }
                stored = rawValue
            }
        }
        #expect(ConfigurationPlaceholder.make(Checked.self) == nil)
    }

    /// Past a failing property of a type that gives no value to go on with (not an enum: a struct
    /// whose `init(rawValue:)` refuses 0), the rest is not checked, and the error says so.
    @Test func decodingStopsPastATypeThatGivesNoValueToGoOnWith() throws {
        struct PortNumber: RawRepresentable, Decodable {
            let rawValue: Int
            init?(rawValue: Int) {
                guard (1...65_535).contains(rawValue) else { return nil }
                self.rawValue = rawValue
            }
        }
        struct Stopping: Decodable { var port: PortNumber; var count: Int }
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        do {
            _ = try store.decode(Stopping.self)
            Issue.record("decoded")
        } catch {
            #expect(error.configurationProblems.map(\.key) == ["port"])
            #expect(error.description.contains("the properties after 'port' were not checked"), "\(error)")
        }
    }

    /// An observer gets the new and old values once per transaction: a batch of two keys is one
    /// change, another process's write (a replaced file) is one change.
    @Test func anObserverGetsOneChangePerTransaction() throws {
        let file = directory.file("s.json")
        try Data(#"{"alpha": 1, "beta": 2}"#.utf8).write(to: file)
        let store = DefaultsStore(fileURL: file)
        let changes = Locked<[KeyValueObservedChange<Pair>]>([])
        let token = try store.observe(Pair.self, options: [.initial, .old, .new]) { _, change in changes.append(change) }
        #expect(changes.current.count == 1 && changes.current[0].newValue == Pair(alpha: 1, beta: 2))
        store.batch { batch in
            batch[DefaultsKey("alpha", default: 0)] = 10
            batch[DefaultsKey("beta", default: 0)] = 20
        }
        #expect(changes.current.count == 2)
        #expect(changes.current.last?.oldValue == Pair(alpha: 1, beta: 2) && changes.current.last?.newValue == Pair(alpha: 10, beta: 20))
        // A key the type does not read changes nothing.
        store[DefaultsKey("gamma", default: 0)] = 1
        #expect(changes.current.count == 2)
        try store.flush()
        try writeAtomically(#"{"alpha": 100, "beta": 200, "gamma": 1}"#, to: file.path)
        #expect(waitUntil { changes.current.count == 3 })
        #expect(
            changes.current.last?.oldValue == Pair(alpha: 10, beta: 20) && changes.current.last?.newValue == Pair(alpha: 100, beta: 200))
        token.invalidate()
    }

    /// A change that makes the type fail is not delivered: the last good value stays, the error
    /// handler is told once, and the next good change has the last good value as its old one.
    @Test func aBadChangeKeepsTheLastGoodValueAndTellsTheErrorHandlerOnce() throws {
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: directory.file("s.json")) { error in errors.append(error) }
        store.register(["alpha": 1, "beta": 2])
        let changes = Locked<[KeyValueObservedChange<Pair>]>([])
        let token = try store.observe(Pair.self, options: [.old, .new]) { _, change in changes.append(change) }
        let untyped = DefaultsKey<String>("alpha", default: "")
        store[untyped] = "one"
        store[untyped] = "uno"
        #expect(changes.current.isEmpty)
        let told = errors.current.filter { $0.kind == .invalidConfiguration }
        #expect(told.count == 1 && told.first?.configurationProblems.first?.key == "alpha", "\(errors.current)")
        store[DefaultsKey("alpha", default: 0)] = 5
        #expect(changes.current.count == 1)
        #expect(changes.current.first?.oldValue == Pair(alpha: 1, beta: 2) && changes.current.first?.newValue == Pair(alpha: 5, beta: 2))
        token.invalidate()
        // Registering an observer of a configuration that does not decode now throws.
        store[untyped] = "bad"
        #expect(throws: DefaultsError.self) { _ = try store.observe(Pair.self) { _, _ in } }
    }

    /// With layers: a layer's change is one change, and the keys the type reads are read through
    /// the layers even when no key of them was made before.
    @Test func aLayeredStoreDecodesKeysNeverMadeAndObservesTheirLayers() throws {
        struct Fresh: Decodable, Equatable, Sendable { var freshAlpha: Int; var freshBeta: Int }
        let memory = DefaultsMemoryLayer()
        let store = DefaultsStore(
            fileURL: directory.file("s.json"), layers: [.memory(memory), .arguments(["--fresh-alpha=3", "--fresh-beta=4"])])
        #expect(try store.decode(Fresh.self) == Fresh(freshAlpha: 3, freshBeta: 4))
        let changes = Locked<[KeyValueObservedChange<Fresh>]>([])
        let token = try store.observe(Fresh.self, options: [.old, .new]) { _, change in changes.append(change) }
        memory[DefaultsKey("freshBeta", default: 0)] = 40
        #expect(changes.current.count == 1 && changes.current.first?.newValue == Fresh(freshAlpha: 3, freshBeta: 40))
        token.invalidate()
    }

    /// A configuration holding a secret prints `<redacted>` in its change.
    @Test func aChangeOfAConfigurationHoldingASecretIsRedactedWherePrinted() throws {
        struct Credentials: Decodable, Sendable { var user: String; var password: String }
        let password = randomSecret()
        let store = DefaultsStore(fileURL: directory.file("s.json"), secrets: ["password"])
        store.register(["user": "admin", "password": "initial"])
        let changes = Locked<[KeyValueObservedChange<Credentials>]>([])
        let token = try store.observe(Credentials.self, options: [.new]) { _, change in changes.append(change) }
        store[DefaultsKey("password", default: "")] = password
        token.invalidate()
        let change = try #require(changes.current.first)
        #expect(change.newValue?.password == password)
        #expect(leak(of: password, in: everythingPrinted(change)) == nil)
    }
}

@Suite("Typed configuration: secrets and threads")
struct ConfigurationSecretAndThreadTests {
    let directory = TemporaryDirectory()

    /// A change whose old value came from a secret layer is redacted too, though its new value is
    /// not secret.
    @Test func aChangeFromASecretLayersValueIsRedactedWherePrinted() throws {
        struct Session: Decodable, Sendable { var sessionSecret: String }
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        let secret = randomSecret()
        try writeAtomically(secret + "\n", to: config + "/sessionSecret")
        let store = DefaultsStore(fileURL: directory.file("s.json"), layers: [.directory(URL(fileURLWithPath: config))])
        store.register(["sessionSecret": "public-default"])
        let changes = Locked<[KeyValueObservedChange<Session>]>([])
        let token = try store.observe(Session.self, options: [.old, .new]) { _, change in changes.append(change) }
        try FileManager.default.removeItem(atPath: config + "/sessionSecret")
        #expect(waitUntil { changes.current.count == 1 })
        token.invalidate()
        let change = try #require(changes.current.first)
        #expect(change.oldValue?.sessionSecret == secret && change.newValue?.sessionSecret == "public-default")
        #expect(leak(of: secret, in: everythingPrinted(change)) == nil, "\(everythingPrinted(change))")
    }

    /// A type's own check that throws, quoting a value from a secret layer, is not quoted.
    @Test func aTypesOwnErrorAboutASecretLayersValueIsNotQuoted() throws {
        struct Checked: Decodable {
            var checkedToken: String
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                checkedToken = try container.decode(String.self, forKey: .checkedToken)
                guard checkedToken.count > 64 else {
                    throw DecodingError.dataCorruptedError(
                        forKey: .checkedToken, in: container, debugDescription: "\(checkedToken) is too short")
                }
            }
            enum CodingKeys: String, CodingKey { case checkedToken }
        }
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        let secret = randomSecret()
        try writeAtomically(secret + "\n", to: config + "/checkedToken")
        let store = DefaultsStore(fileURL: directory.file("s.json"), layers: [.directory(URL(fileURLWithPath: config))])
        do {
            _ = try store.decode(Checked.self)
            Issue.record("decoded")
        } catch {
            #expect(error.configurationProblems.map(\.key) == ["checkedToken"])
            #expect(leak(of: secret, in: everythingPrinted(error)) == nil, "\(error)")
        }
    }

    /// The guard behind it, made to happen: a store-wide change delivered after a newer one (two
    /// threads' handlers finishing in the other order) is not delivered, and the observer keeps
    /// the newer value.
    @Test func aChangeDeliveredAfterANewerOneIsNotDelivered() throws {
        struct Counters: Decodable, Equatable, Sendable { var left: Int; var right: Int }
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        store.register(["left": 0, "right": 0])
        let seen = Locked<[KeyValueObservedChange<Counters>]>([])
        let token = try store.observe(Counters.self, options: [.old, .new]) { _, change in seen.append(change) }
        let storage = store.storage
        let base = storage.lock.withLock { storage.state.storeChanges }
        func record(left: Int, sequence: UInt64) -> DefaultsStorage.ChangeRecord {
            DefaultsStorage.ChangeRecord(
                keys: ["left"], origin: .thisProcess, revision: nil, values: ["left": DefaultsStorage.Entry(typed: left, json: nil)],
                sequence: sequence)
        }
        storage.notifyStore(record(left: 2, sequence: base + 2))
        storage.notifyStore(record(left: 1, sequence: base + 1))
        #expect(seen.current.map(\.newValue) == [Counters(left: 2, right: 0)])
        // The storage's count of changes catches up with the two made up here.
        storage.lock.withLock { storage.state.storeChanges = base + 2 }
        store[DefaultsKey("right", default: 0)] = 5
        #expect(seen.current.last?.oldValue == Counters(left: 2, right: 0), "\(seen.current)")
        token.invalidate()
    }

    /// Two threads change two keys of one configuration at once, and their changes reach the
    /// observer in either order (handlers run on the changing threads): the value the observer
    /// keeps never goes back to an older one, so the next change has the newest as its old value.
    @Test func concurrentChangesNeverLeaveTheObserverWithAnOlderConfiguration() async throws {
        struct Counters: Decodable, Equatable, Sendable { var left: Int; var right: Int }
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        store.register(["left": 0, "right": 0])
        let seen = Locked<[KeyValueObservedChange<Counters>]>([])
        let token = try store.observe(Counters.self, options: [.old, .new]) { _, change in seen.append(change) }
        let count = 2_000
        let threads = ["left", "right"].map { name in
            TestThread {
                let key = DefaultsKey(name, default: 0)
                for value in 1...count { store[key] = value }
            }
        }
        for thread in threads { thread.join() }
        store[DefaultsKey("left", default: 0)] = count + 1
        token.invalidate()
        let last = try #require(seen.current.last)
        #expect(last.oldValue == Counters(left: count, right: count), "\(last)")
        #expect(last.newValue == Counters(left: count + 1, right: count))
    }
}

@Suite("Typed configuration at start-up", .tags(.processes))
struct ConfigurationProcessTests {
    let directory = TemporaryDirectory()

    /// A server started with a bad argument and a bad environment variable refuses to start:
    /// non-zero exit, every bad key named, the secret never printed.
    @Test func aServerRefusesToStartNamingEveryBadKey() throws {
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        let token = randomSecret()
        try writeAtomically(token + "\n", to: config + "/apiToken")
        let file = directory.path + "/server.json"
        try Data(#"{"port": 9000, "maxConnections": 100, "logLevel": "info"}"#.utf8).write(to: URL(fileURLWithPath: file))
        var environment = ProcessInfo.processInfo.environment
        environment["CFGTEST_MAX_CONNECTIONS"] = "lots"
        let bad = try runTool(
            ["config", file, config, "--port", "abc", "--log-level=loud"], environment: environment, executable: testToolPath)
        #expect(bad.status == 78, "\(bad.output)\(bad.error)")
        #expect(bad.error.contains("refusing to start"), "\(bad.error)")
        for named in [
            "port: the arguments layer's value (--port)", "maxConnections: the environment layer's value (CFGTEST_MAX_CONNECTIONS)",
            "logLevel: the arguments layer's value (--log-level)",
        ] {
            #expect(bad.error.contains(named), "\(bad.error)")
        }
        #expect(leak(of: token, in: bad.output + bad.error) == nil)
        // The same server with good input starts, and reads its secret from the directory.
        environment["CFGTEST_MAX_CONNECTIONS"] = "50"
        let good = try runTool(["config", file, config, "--port", "8080"], environment: environment, executable: testToolPath)
        #expect(good.status == 0, "\(good.error)")
        #expect(good.output == "port=8080 maxConnections=50 logLevel=info upstream=-\n")
        #expect(leak(of: token, in: good.output + good.error) == nil)
    }
}
