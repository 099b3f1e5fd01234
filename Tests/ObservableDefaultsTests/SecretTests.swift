import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Secrets declared when the store is made", .tags(.processes))
struct DeclaredSecretsProcessTests {
    let directory = TemporaryDirectory()

    /// The issue's scenario in a child process: secrets declared only by `secrets:` (and by the
    /// directory layer, secret by default), nothing typed touched before the first print; it sets,
    /// reads, fails to decode, observes, explains, corrupts the file (right after a secret, where the
    /// parse stops) and exits with a change lost. Nothing it prints, standard error included, shows a
    /// secret or an 8-character piece of one.
    @Test func noSecretOrPieceOfOneAppearsInAnythingPrinted() throws {
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        // Secrets that start with digits tempt a number decoder into quoting them.
        let secrets = [
            randomSecret(), randomSecret(), randomSecret(prefix: "12345"), randomSecret(prefix: "98765"), randomSecret(),
            randomSecret(),
        ]
        let result = try runTool(
            ["declared-secrets", directory.path + "/prefs.json", config] + secrets, executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        // The scenario ran to its end, with each step it claims.
        let output = result.output
        for step in [
            "startup snapshot: [", "token change: apiToken: <redacted> → <redacted>", "session change: sessionKey: <redacted> → <redacted>",
            "read: true true", "directory read: true", "corrupt reported: true", "token source: apiToken: <redacted> from store",
            "session source: sessionKey: <redacted> from directory", "store change: ", "done",
        ] {
            #expect(output.contains(step), "missing '\(step)' in:\n\(output)")
        }
        // The errors it met: a type mismatch (the file's password as a number), a layer's value
        // that does not decode (the session as a number), the broken file, and the loss at exit,
        // all told to the handler: nothing on standard error.
        #expect(output.contains("error: ") && output.contains("is <redacted>, which does not decode as Int"), "\(output)")
        #expect(output.contains("the directory layer's value of key 'sessionKey'"), "\(output)")
        #expect(output.contains("corrupt defaults file"), "\(output)")
        // Where the file broke, and what was expected there.
        #expect(output.contains(":2:") && output.contains("unexpected character after a key, expected ':'"), "\(output)")
        #expect(output.contains("now lost"), "\(output)")
        #expect(result.error.isEmpty, "\(result.error)")
        for secret in secrets {
            #expect(leak(of: secret, in: output) == nil, "stdout shows \(leak(of: secret, in: output) ?? "")")
            #expect(leak(of: secret, in: result.error) == nil, "stderr shows \(leak(of: secret, in: result.error) ?? "")")
        }
    }
}

@Suite("Secrets")
struct SecretTests {
    let directory = TemporaryDirectory()

    /// A unique key name: secrecy is process-wide, so each test declares its own names.
    func name(_ base: String) -> String { base + String(UInt32.random(in: 0...UInt32.max), radix: 36) }

    @Test func secretsDeclaredAtCreationAreRedactedBeforeAnyKeyIsMade() throws {
        let tokenName = name("token")
        let secret = randomSecret()
        let file = directory.file("s.json")
        try Data(#"{"\#(tokenName)": "\#(secret)", "port": 7000}"#.utf8).write(to: file)
        let store = DefaultsStore(fileURL: file, secrets: [tokenName])
        let printed = everythingPrinted(store.snapshot())
        #expect(printed.contains("\(tokenName): <redacted>"), "\(printed)")
        #expect(printed.contains("port: 7000"), "\(printed)")
        #expect(leak(of: secret, in: printed) == nil, "\(printed)")
        // Typed reads still return it.
        #expect(store[DefaultsKey(tokenName, default: "")] == secret)
        #expect(store.snapshot()[DefaultsKey(tokenName, default: "")] == secret)
        #expect(DefaultsKey(tokenName, default: "").isSecret)
        // A secret key's default is not printed either.
        let printedKey = everythingPrinted(DefaultsKey(tokenName, default: secret + "-default"))
        #expect(printedKey.contains(tokenName) && leak(of: secret, in: printedKey) == nil, "\(printedKey)")
        #expect(everythingPrinted(DefaultsKey(name("open"), default: "visible-default")).contains("visible-default"))
    }

    @Test func everyInitializerTakesSecrets() throws {
        let names = (0..<3).map { _ in name("every") }
        _ = DefaultsStore(suiteName: "s1", directory: directory.url, secrets: [names[0]])
        _ = try DefaultsStore(validatingSuiteName: "s2", directory: directory.url, layers: [], secrets: [names[1]], errorHandler: { _ in })
        _ = DefaultsStore(fileURL: directory.file("s3.json"), layers: [], secrets: [names[2]], errorHandler: { _ in })
        for name in names { #expect(DefaultsKeyNames.isSecret(name)) }
    }

    @Test func aChangeAndItsKeyValueChangeRedactBothValuesWherePrintedButNotWhereRead() throws {
        let tokenName = name("changed")
        let (old, new) = (randomSecret(), randomSecret())
        let store = DefaultsStore(fileURL: directory.file("s.json"), secrets: [tokenName])
        let key = DefaultsKey(tokenName, default: "")
        store[key] = old
        let changes = Locked<[DefaultsChange<String>]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in changes.append(change) }
        store[key] = new
        token.invalidate()
        let change = try #require(changes.current.first)
        #expect(change.newValue == new && change.oldValue == old)
        #expect(change.keyValueChange.newValue == new && change.keyValueChange.oldValue == old)
        #expect(change.isSecret)
        for printed in [everythingPrinted(change), everythingPrinted(change.keyValueChange)] {
            #expect(printed.contains("<redacted>"), "\(printed)")
            #expect(leak(of: old, in: printed) == nil && leak(of: new, in: printed) == nil, "\(printed)")
        }
    }

    @Test func aPlainChangeStillPrintsItsValues() {
        let key = DefaultsKey(name("plain"), default: "")
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let changes = Locked<[DefaultsChange<String>]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in changes.append(change) }
        store[key] = "visible-value"
        token.invalidate()
        #expect(changes.current.first?.isSecret == false)
        #expect(everythingPrinted(changes.current.first!).contains("visible-value"))
        #expect(everythingPrinted(changes.current.first!.keyValueChange).contains("visible-value"))
    }

    /// A directory layer is secret unless told otherwise: a key declared nowhere, held there, is
    /// redacted in changes (both values, when either came from it), snapshots, sources and errors.
    @Test func aDirectoryLayerIsSecretByDefault() throws {
        let keyName = name("mounted")
        let (first, second) = (randomSecret(prefix: "4242"), randomSecret())
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically(first + "\n", to: config + "/" + keyName)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: directory.file("s.json"), layers: [.directory(URL(fileURLWithPath: config))]) { error in
            errors.append(error)
        }
        let key = DefaultsKey(keyName, default: "")
        store[key] = "in-the-file"
        let changes = Locked<[DefaultsChange<String>]>([])
        let token = store.observe(key, options: [.initial, .old, .new]) { _, change in changes.append(change) }
        try writeAtomically(second + "\n", to: config + "/" + keyName)
        #expect(waitUntil { store[key] == second })
        #expect(waitUntil { changes.current.count == 2 })
        try FileManager.default.removeItem(atPath: config + "/" + keyName)
        #expect(waitUntil { changes.current.count == 3 })
        token.invalidate()
        // The last change goes from the directory's value to the file's: both redacted.
        let last = try #require(changes.current.last)
        #expect(last.newValue == "in-the-file" && last.oldValue == second && last.isSecret)
        try writeAtomically(first + "\n", to: config + "/" + keyName)
        #expect(waitUntil { store[key] == first })
        _ = store[DefaultsKey(keyName, default: 0)]
        let error = try #require(errors.current.first { $0.kind == .layerProblem && $0.key == keyName })
        #expect(error.found == "<redacted>")
        var printed = changes.current.map(everythingPrinted).joined()
        printed += everythingPrinted(store.snapshot()) + everythingPrinted(store.source(of: key)) + everythingPrinted(error)
        printed += error.reason + (error.found ?? "")
        #expect(store.source(of: key).isSecret && store.source(of: key).layers[0].isSecret)
        for secret in [first, second] { #expect(leak(of: secret, in: printed) == nil, "\(printed)") }
        #expect(!DefaultsKeyNames.isSecret(keyName))
    }

    /// A ConfigMap's directory opts out; the environment and arguments layers are not secret unless
    /// told, and then are.
    @Test func layersOptInOrOutOfSecrecy() throws {
        let keyName = name("config")
        let config = directory.path + "/configmap"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("from-the-configmap\n", to: config + "/" + keyName)
        let key = DefaultsKey(keyName, default: "")
        let plain = DefaultsStore(fileURL: directory.file("s.json"), layers: [.directory(URL(fileURLWithPath: config), isSecret: false)])
        #expect(everythingPrinted(plain.snapshot()).contains("from-the-configmap"))
        #expect(!plain.source(of: key).isSecret)
        let flag = "--" + LayerKeyNames.kebabCase(keyName) + "=from-the-arguments"
        let arguments = DefaultsStore(fileURL: directory.file("a.json"), layers: [.arguments([flag])])
        #expect(everythingPrinted(arguments.source(of: key)).contains("from-the-arguments"))
        let secretArguments = DefaultsStore(fileURL: directory.file("b.json"), layers: [.arguments([flag], isSecret: true)])
        #expect(!everythingPrinted(secretArguments.source(of: key)).contains("from-the-arguments"))
        #expect(!everythingPrinted(secretArguments.snapshot()).contains("from-the-arguments"))
        let variable = LayerKeyNames.variableName(prefix: "SECRETTEST", key: keyName)
        let environment = DefaultsStore(
            fileURL: directory.file("c.json"), layers: [.environment(prefix: "SECRETTEST", variables: [variable: "from-the-environment"])])
        #expect(everythingPrinted(environment.source(of: key)).contains("from-the-environment"))
        let secretEnvironment = DefaultsStore(
            fileURL: directory.file("d.json"),
            layers: [.environment(prefix: "SECRETTEST", variables: [variable: "from-the-environment"], isSecret: true)])
        #expect(!everythingPrinted(secretEnvironment.source(of: key)).contains("from-the-environment"))
        #expect(secretEnvironment[key] == "from-the-environment")
        #expect(DefaultsLayer.directory(URL(fileURLWithPath: config)).isSecret)
        #expect(!DefaultsLayer.environment(prefix: "X").isSecret && !DefaultsLayer.arguments([]).isSecret)
    }

    /// A decoding error about a secret's value quotes no character of it, in `found`, `reason`,
    /// its description or its mirror.
    @Test func aDecodingErrorAboutASecretQuotesNothingOfIt() throws {
        let keyName = name("pin")
        let secret = randomSecret(prefix: "31415")
        let file = directory.file("s.json")
        try Data(#"{"\#(keyName)": "\#(secret)"}"#.utf8).write(to: file)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: file, secrets: [keyName]) { error in errors.append(error) }
        #expect(store[DefaultsKey(keyName, default: 0)] == 0)
        let error = try #require(errors.current.first { $0.kind == .typeMismatch })
        #expect(error.found == "<redacted>")
        let printed = everythingPrinted(error) + error.reason
        #expect(leak(of: secret, in: printed, length: 4) == nil, "\(printed)")
    }

    /// Files that break inside or right after a secret value (a stray character after it, a value
    /// with no quotes, an invalid escape in it, a value pasted where a key belongs): the error, its
    /// description and mirror, and the store's statuses quote no character of it, not even the one
    /// where the parse stopped; they give the line and column and what was expected there.
    @Test func aCorruptFilesErrorQuotesNoCharacterOfIt() throws {
        let keyName = name("corruptToken")
        for (index, make) in Self.brokenFiles.enumerated() {
            let secret = randomSecret()
            let file = directory.file("corrupt\(index).json")
            try Data(make(keyName, secret).utf8).write(to: file)
            let errors = Locked<[DefaultsError]>([])
            let store = DefaultsStore(fileURL: file, secrets: [keyName]) { error in errors.append(error) }
            let error = try #require(errors.current.first { $0.kind == .corruptFile }, "\(make(keyName, secret))")
            #expect(error.line == 1 && error.column != nil && error.reason.contains("expected"), "\(error)")
            let printed =
                everythingPrinted(error) + error.reason + everythingPrinted(store.backendStatus) + everythingPrinted(store.layerStatuses)
            #expect(printed.contains("corrupt defaults file"), "\(printed)")
            #expect(Self.quotation(of: secret, in: printed) == nil, "\(make(keyName, secret)): \(printed)")
        }
    }

    /// The files of `aCorruptFilesErrorQuotesNoCharacterOfIt`, each from the secret key's name and
    /// its secret: the audit's reproductions.
    static let brokenFiles: [@Sendable (String, String) -> String] = [
        { #"{"\#($0)": "abc"\#($1), "port": 1}"# },
        { #"{"\#($0)": \#($1)}"# },
        { #"{"\#($0)": "pa\q\#($1)"}"# },
        { #"{"\#($0)": "x", "\#($1)"}"# },
    ]

    /// Where `text` quotes `secret`: an 8-character piece of it, one of its characters in quotes
    /// (`'S'`), or the invalid escape sequence of `brokenFiles` (`\q`); `nil` if nowhere.
    static func quotation(of secret: String, in text: String) -> String? {
        if let piece = leak(of: secret, in: text) { return piece }
        for quoted in secret.map({ "'\($0)'" }) + [#"\q"#] where text.contains(quoted) { return quoted }
        return nil
    }

    /// A value of a secret key that cannot be encoded: the encoder's error (which can quote the
    /// value) is left out of the error.
    @Test func anEncodingErrorAboutASecretQuotesNothingOfIt() throws {
        struct Unencodable: Codable, Sendable {
            let text: String
            func encode(to encoder: any Encoder) throws {
                throw EncodingError.invalidValue(text, EncodingError.Context(codingPath: [], debugDescription: "refused \(text)"))
            }
        }
        let keyName = name("unencodable")
        let secret = randomSecret()
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: directory.file("e.json"), secrets: [keyName]) { error in errors.append(error) }
        store[DefaultsKey(keyName, default: Unencodable(text: ""))] = Unencodable(text: secret)
        let error = try #require(errors.current.first { $0.kind == .encodingFailed })
        #expect(error.key == keyName)
        let thrown = try #require(throws: DefaultsError.self) { try store.flush() }
        let printed = everythingPrinted(error) + error.reason + everythingPrinted(thrown) + thrown.reason
        #expect(leak(of: secret, in: printed) == nil, "\(printed)")
        // A key that is not secret keeps the encoder's reason.
        let plainName = name("plainUnencodable")
        store[DefaultsKey(plainName, default: Unencodable(text: ""))] = Unencodable(text: "visible-text")
        #expect(errors.current.contains { $0.key == plainName && $0.reason.contains("refused visible-text") }, "\(errors.current)")
    }

    /// `dump` and `Mirror` of a store (which reach its storage's values), of its layers (a secret
    /// arguments or environment layer's text) and of a memory layer show none of their values.
    @Test func dumpsOfAStoreAndItsLayersShowNoSecret() throws {
        let keyName = name("dumped")
        let (inFile, inArguments, inEnvironment, inMemory) = (randomSecret(), randomSecret(), randomSecret(), randomSecret())
        let file = directory.file("d.json")
        try Data(#"{"\#(keyName)": "\#(inFile)", "port": 7000}"#.utf8).write(to: file)
        let memory = DefaultsMemoryLayer()
        memory[DefaultsKey(name("memoryKey"), default: "")] = inMemory
        let variable = LayerKeyNames.variableName(prefix: "DUMPTEST", key: keyName)
        let layers: [DefaultsLayer] = [
            .arguments(["--" + LayerKeyNames.kebabCase(keyName) + "=" + inArguments], isSecret: true),
            .environment(prefix: "DUMPTEST", variables: [variable: inEnvironment], isSecret: true),
            .memory(memory, isSecret: true),
        ]
        let store = DefaultsStore(fileURL: file, layers: layers, secrets: [keyName])
        #expect(store[DefaultsKey(keyName, default: "")] == inArguments)
        let printed = everythingPrinted(store) + layers.map(everythingPrinted).joined() + everythingPrinted(memory)
        for secret in [inFile, inArguments, inEnvironment, inMemory] { #expect(leak(of: secret, in: printed) == nil, "\(printed)") }
        // What they show instead: where the values are.
        #expect(printed.contains(file.path) && printed.contains("DUMPTEST") && printed.contains(variable), "\(printed)")
        var batchPrinted = ""
        store.batch { batch in
            batch[DefaultsKey(keyName, default: "")] = inFile + "-batch"
            batchPrinted = everythingPrinted(batch)
        }
        #expect(batchPrinted.contains(keyName) && leak(of: inFile, in: batchPrinted) == nil, "\(batchPrinted)")
    }

    /// An error made before its key was declared secret is redacted when printed afterwards.
    @Test func anErrorPrintedAfterItsKeyBecameSecretIsRedacted() {
        let keyName = name("later")
        let secret = randomSecret()
        let error = DefaultsError(
            .typeMismatch, location: .file(path: "/x.json"), key: keyName, found: "\"\(secret)\"", reason: "\"\(secret)\" is not a number")
        #expect(everythingPrinted(error).contains(secret))
        DefaultsKeyNames.markSecret(keyName)
        #expect(leak(of: secret, in: everythingPrinted(error)) == nil, "\(everythingPrinted(error))")
    }

    /// A store that declares secrets creates its file readable by its owner only; a file that
    /// exists keeps its mode; a store without secrets creates a file others can read.
    @Test func aFileCreatedByAStoreWithSecretsIsNotWorldReadable() throws {
        func mode(_ url: URL) -> mode_t {
            var info = stat()
            #expect(stat(url.path, &info) == 0)
            return info.st_mode & 0o777
        }
        let secretFile = directory.file("secret.json")
        let store = DefaultsStore(fileURL: secretFile, secrets: [name("modeToken")])
        store[DefaultsKey("plainKey", default: 0)] = 1
        try store.flush()
        #expect(mode(secretFile) == 0o600)
        let plainFile = directory.file("plain.json")
        let plain = DefaultsStore(fileURL: plainFile)
        plain[DefaultsKey("plainKey", default: 0)] = 1
        try plain.flush()
        #expect(mode(plainFile) & 0o044 != 0)
        // An existing file keeps its own mode.
        #expect(chmod(plainFile.path, 0o640) == 0)
        let again = DefaultsStore(fileURL: plainFile, secrets: [name("modeToken")])
        again[DefaultsKey("plainKey", default: 0)] = 2
        try again.flush()
        #expect(mode(plainFile) == 0o640)
    }
}
