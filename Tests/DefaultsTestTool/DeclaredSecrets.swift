import Foundation
import KeyValueObserving
import ObservableDefaults

/// `declared-secrets FILE DIRECTORY TOKEN TOKEN2 PASSWORD SESSION SESSION2 BROKEN`: the secure
/// pattern, secrets declared when the store is made and nowhere else. No key is declared
/// `isSecret`, and nothing typed is read before the first print. The file starts with `apiToken`
/// TOKEN and `dbPassword` PASSWORD (both declared with `secrets:`); the directory layer (secret by
/// default) with `sessionKey` SESSION, a key declared nowhere. The scenario prints a snapshot
/// first, then observes, sets (TOKEN2), reads, fails to decode (PASSWORD and SESSION as `Int`),
/// explains (`source(of:)`), changes the directory's file (SESSION2), corrupts the file (breaking it
/// right after BROKEN, which stands where a key belongs, as if its line had lost its key), leaves a
/// change pending that cannot be written, and exits: every description,
/// debug description, dump and mirror the library offers is printed on the way. The test searches
/// all of standard output and standard error for each secret and every piece of one.
func exerciseDeclaredSecrets(_ arguments: [String]) -> Never {
    guard arguments.count == 9 else { fail("'declared-secrets' needs FILE DIRECTORY and six secrets") }
    let (file, directory) = (arguments[1], arguments[2])
    let (token, token2, password, session, session2, broken) = (
        arguments[3], arguments[4], arguments[5], arguments[6], arguments[7], arguments[8]
    )
    let fileText = #"{"apiToken": "\#(token)", "dbPassword": "\#(password)", "port": 7000}"#
    guard FileManager.default.createFile(atPath: file, contents: Data(fileText.utf8)),
        FileManager.default.createFile(atPath: directory + "/sessionKey", contents: Data((session + "\n").utf8))
    else { fail("cannot write the scenario's files") }

    /// Prints `value` every way a program could.
    @Sendable func show(_ label: String, _ value: Any) {
        print("\(label): \(value)")
        print("\(label) reflecting: \(String(reflecting: value))")
        dump(value, name: label)
        for child in Mirror(reflecting: value).children { print("\(label) child \(child.label ?? "-"): \(child.value)") }
    }

    let errors = Locked([DefaultsError]())
    let store = DefaultsStore(
        fileURL: URL(fileURLWithPath: file), layers: [.directory(URL(fileURLWithPath: directory))],
        secrets: ["apiToken", "dbPassword"],
        errorHandler: { error in
            show("error", error)
            print("error found: \(error.found ?? "nil"), reason: \(error.reason)")
            errors.withLock { $0.append(error) }
        })
    // Before any typed key exists.
    show("startup snapshot", store.snapshot())
    show("store", store)

    let apiToken = DefaultsKey("apiToken", default: "")
    let sessionKey = DefaultsKey("sessionKey", default: "")
    let tokens = [
        store.observe(apiToken, options: [.initial, .old, .new, .prior]) { _, change in
            show("token change", change)
            show("token keyValueChange", change.keyValueChange)
        },
        store.observe(sessionKey, options: [.initial, .old, .new]) { _, change in
            show("session change", change)
            show("session keyValueChange", change.keyValueChange)
        },
        store.observeChanges { _, change in show("store change", change) },
    ]

    store[apiToken] = token2
    print("read: \(store[apiToken] == token2) \(store[sessionKey] == session)")
    // Values that do not decode as the type read.
    print("password as number: \(store[DefaultsKey("dbPassword", default: 0)])")
    print("session as number: \(store[DefaultsKey("sessionKey", default: 0)])")
    show("token source", store.source(of: apiToken))
    show("session source", store.source(of: sessionKey))
    show("password source", store.source(of: DefaultsKey("dbPassword", default: 0)))

    // The directory's file changes: a change of a key nobody declared secret, from a secret layer.
    guard FileManager.default.createFile(atPath: directory + "/sessionKey", contents: Data((session2 + "\n").utf8)) else {
        fail("cannot change the directory's file")
    }
    let deadline = Date().addingTimeInterval(10)
    while store[sessionKey] != session2, Date() < deadline { usleep(2_000) }
    print("directory read: \(store[sessionKey] == session2)")
    show("snapshot", store.snapshot())
    do {
        try store.flush()
    } catch {
        show("flush", error)
    }

    // A file broken by hand, holding a secret: reported, and a change made now cannot be written. It
    // breaks right after the secret, which a parser that quotes where it stopped would quote.
    let brokenText = "{\"apiToken\": \"\(broken)\",\n  \"\(broken)\"X, \"port\": "
    guard FileManager.default.createFile(atPath: file, contents: Data(brokenText.utf8)) else {
        fail("cannot break the file")
    }
    while !errors.current.contains(where: { $0.kind == .corruptFile }), Date() < deadline { usleep(2_000) }
    print("corrupt reported: \(errors.current.contains { $0.kind == .corruptFile })")
    store[apiToken] = token2 + "-pending"
    do {
        try store.flush()
    } catch {
        show("flush", error)
    }
    withExtendedLifetime(tokens) {}
    print("done")
    // The exit's flush finds the file still broken and reports the pending change lost.
    exit(0)
}
