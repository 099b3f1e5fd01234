import Foundation
import KeyValueObserving
import ObservableDefaults

/// The keys of `layers` and `secrets`.
let playbackSpeedKey = DefaultsKey("playbackSpeed", default: 1.0)
let verboseKey = DefaultsKey("verbose", default: false)
let maxConnectionsKey = DefaultsKey("maxHTTPConnections", default: 4)
let apiTokenKey = DefaultsKey("apiToken", default: "none", isSecret: true)

/// `layers FILE PREFIX DIRECTORY [ARG]...`: opens a store on FILE read through the arguments ARG,
/// the environment (prefix PREFIX; this process's: the test starts it with the variables) and the
/// directory DIRECTORY, and prints each key's value and the layer it came from
/// (`playbackSpeed=1.5 arguments`), then what the store reported (`error: DESCRIPTION`).
func printLayers(_ arguments: [String]) -> Never {
    guard arguments.count >= 4 else { fail("'layers' needs FILE PREFIX DIRECTORY") }
    let errors = Locked([String]())
    let store = DefaultsStore(
        fileURL: URL(fileURLWithPath: arguments[1]),
        layers: [
            .arguments(arguments.dropFirst(4)), .environment(prefix: arguments[2]), .directory(URL(fileURLWithPath: arguments[3])),
        ]
    ) { error in errors.withLock { $0.append(error.description) } }
    print("playbackSpeed=\(store[playbackSpeedKey]) \(store.source(of: playbackSpeedKey).answering.kind)")
    print("verbose=\(store[verboseKey]) \(store.source(of: verboseKey).answering.kind)")
    print("maxHTTPConnections=\(store[maxConnectionsKey]) \(store.source(of: maxConnectionsKey).answering.kind)")
    for error in errors.current { print("error: \(error)") }
    exit(0)
}

/// `secrets FILE DIRECTORY SECRET`: everything a program does with a secret key, printing every
/// description the library offers: sets `apiToken` to SECRET in the store, reads it, observes it
/// while the directory layer's file `apiToken` (written by this command) changes to SECRET and to a
/// value that does not decode for an `Int` key of the same name, and prints the changes, the
/// snapshot, the source, and every error the store reported. The test searches all of it for
/// SECRET.
func exerciseSecrets(_ arguments: [String]) -> Never {
    guard arguments.count == 4 else { fail("'secrets' needs FILE DIRECTORY SECRET") }
    let (file, directory, secret) = (arguments[1], arguments[2], arguments[3])
    let store = DefaultsStore(fileURL: URL(fileURLWithPath: file), layers: [.directory(URL(fileURLWithPath: directory))]) { error in
        print("error: \(error) found=\(error.found ?? "nil") reason=\(error.reason)")
        debugPrint(error)
    }
    let changes = Locked(0)
    let token = store.observe(apiTokenKey, options: [.initial, .old, .new, .prior]) { _, change in
        print("change: \(change)")
        debugPrint(change)
        changes.withLock { $0 += 1 }
    }
    let storeToken = store.observeChanges { _, change in
        print("store change: \(change)")
        debugPrint(change)
    }
    store[apiTokenKey] = secret + "-stored"
    print("read: \(store[apiTokenKey] == secret + "-stored")")
    do {
        try store.flush()
    } catch {
        print("flush: \(error)")
    }
    // The directory layer: the secret, then a value an Int key of the same name cannot decode.
    let path = directory + "/apiToken"
    _ = FileManager.default.createFile(atPath: path, contents: Data((secret + "\n").utf8))
    let deadline = Date().addingTimeInterval(10)
    while store[apiTokenKey] != secret, Date() < deadline { usleep(2_000) }
    print("directory read: \(store[apiTokenKey] == secret)")
    let asNumber = DefaultsKey("apiToken", default: 0)
    print("as number: \(store[asNumber])")
    // The file's value of the wrong type, for a typeMismatch.
    let other = DefaultsStore(fileURL: URL(fileURLWithPath: file)) { error in
        print("error: \(error) found=\(error.found ?? "nil") reason=\(error.reason)")
    }
    print("file as number: \(other[asNumber])")
    print("snapshot: \(store.snapshot())")
    debugPrint(store.snapshot())
    print("source: \(store.source(of: apiTokenKey))")
    dump(store.snapshot()[apiTokenKey] == secret)
    print("changes: \(changes.current)")
    token.invalidate()
    storeToken.invalidate()
    exit(0)
}
