#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import Foundation
import KeyValueObserving
import ObservableDefaults
import ObservableDefaultsEtcd

// The other process of the defaults tests: loads that `kvo-defaults` has no reason to offer its users.
let usage = """
    USAGE: DefaultsTestTool write-many STORE PREFIX COUNT [FLUSH-EVERY]
           DefaultsTestTool write-sequence STORE KEYS COUNT
           DefaultsTestTool update-many STORE KEY COUNT THREADS
           DefaultsTestTool resources PREFIX COUNT [polling]
           DefaultsTestTool layers FILE PREFIX DIRECTORY [ARG]...
           DefaultsTestTool secrets FILE DIRECTORY SECRET
           DefaultsTestTool declared-secrets FILE DIRECTORY TOKEN TOKEN2 PASSWORD SESSION SESSION2 BROKEN
           DefaultsTestTool config FILE DIRECTORY [ARG]...
           DefaultsTestTool errors PATH [--handler] [--flush] [--wait-for-retry] [--drop] [KEY VALUE]...

      STORE is the path of a defaults file, or an etcd store: URL[,URL…]#PREFIX
      (http://127.0.0.1:2379#app/).

      write-many      sets PREFIX-0 … PREFIX-(COUNT-1) to 0 … COUNT-1, flushing every FLUSH-EVERY
                      sets (default 1)
      write-sequence  sets k(i mod KEYS) to i for i in 1 … COUNT, one set each, then flushes
      update-many     adds 1 to KEY COUNT times in each of THREADS threads, each time with an atomic
                      update
      resources       opens COUNT stores on PREFIX-0.json …, writes each, and prints the threads and
                      descriptors the process used before, at the peak and at the end
      layers          prints three keys read through ARG, the environment (PREFIX) and DIRECTORY
                      (see Layers.swift)
      secrets         sets, reads, watches and fails to decode a secret, printing every
                      description (see Layers.swift)
      declared-secrets  the same with secrets declared only when the store is made, a broken
                      file and a change lost at exit (see DeclaredSecrets.swift)
      config          decodes a server's configuration strictly at start-up, exiting 78 on bad
                      input (see Configuration.swift)
      errors          sets the keys on the file PATH and exits without flushing, printing what the
                      store reports (see Errors.swift)
    """

func fail(_ message: String) -> Never {
    writeLineToStandardError("DefaultsTestTool: \(message)")
    exit(1)
}

func integer(_ text: String, atLeast minimum: Int) -> Int {
    guard let value = Int(text), value >= minimum else { fail("'\(text)' is not an integer of at least \(minimum)\n\(usage)") }
    return value
}

func openStore(_ location: String) -> DefaultsStore {
    guard location.hasPrefix("http://") || location.hasPrefix("https://") else {
        return DefaultsStore(fileURL: URL(fileURLWithPath: location)) { error in
            if error.kind != .duplicateKey { fail(error.description) }
        }
    }
    guard let hash = location.lastIndex(of: "#") else { fail("'\(location)' has no '#PREFIX'\n\(usage)") }
    let endpoints = location[..<hash].split(separator: ",").compactMap { URL(string: String($0)) }
    do {
        return try DefaultsStore(etcd: endpoints, prefix: String(location[location.index(after: hash)...])) { error in
            // A member lost (the tests kill one) is reported, and the store carries on.
            writeLineToStandardError("DefaultsTestTool: \(error)")
            if error.kind != .unreachable { exit(1) }
        }
    } catch {
        fail(error.description)
    }
}

/// Flushes, or fails. On etcd the flush itself tries again while writes stall (a leader being
/// replaced) for up to the store's timeout; a flush that throws has given its changes up for good.
func flushOrFail(_ store: DefaultsStore) {
    do {
        try store.flush()
    } catch {
        fail(error.description)
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch (arguments.first, arguments.count) {
case ("write-many", 4...5):
    let store = openStore(arguments[1])
    let count = integer(arguments[3], atLeast: 0)
    let flushEvery = arguments.count > 4 ? integer(arguments[4], atLeast: 1) : 1
    for index in 0..<count {
        store.setJSONValue(.number(String(index)), forKey: "\(arguments[2])-\(index)")
        if (index + 1) % flushEvery == 0 { flushOrFail(store) }
    }
    flushOrFail(store)

case ("write-sequence", 4):
    let store = openStore(arguments[1])
    let keys = integer(arguments[2], atLeast: 1)
    for index in 1...integer(arguments[3], atLeast: 1) {
        store.setJSONValue(.number(String(index)), forKey: "k\(index % keys)")
    }
    flushOrFail(store)

case ("update-many", 5):
    let store = openStore(arguments[1])
    incrementConcurrently(store, key: arguments[2], count: integer(arguments[3], atLeast: 0), threads: integer(arguments[4], atLeast: 1))

case ("resources", 3...4):
    print(
        measureResources(
            prefix: arguments[1], count: integer(arguments[2], atLeast: 0), polling: arguments.count > 3 && arguments[3] == "polling"))

case ("layers", 4...):
    printLayers(arguments)
case ("secrets", 4):
    exerciseSecrets(arguments)
case ("declared-secrets", 9):
    exerciseDeclaredSecrets(arguments)
case ("config", 3...):
    decodeConfiguration(arguments)
case ("errors", 2...):
    reportErrors(Array(arguments.dropFirst()))

default:
    fail("unexpected arguments \(arguments)\n\(usage)")
}
exit(0)

/// `threads` threads, each adding 1 to the integer `key` holds (0 if absent) `count` times with an
/// atomic update; exits with a message on the first failure.
func incrementConcurrently(_ store: DefaultsStore, key: String, count: Int, threads: Int) {
    let group = DispatchGroup()
    for _ in 0..<threads {
        group.enter()
        Thread {
            defer { group.leave() }
            for _ in 0..<count {
                do {
                    _ = try store.updateJSONValue(forKey: key) { current in
                        switch current {
                        case nil: return .number("1")
                        case .number(let text)?:
                            guard let value = Int(text) else { fail("'\(key)' holds \(text), not an integer") }
                            return .number(String(value + 1))
                        case let other?: fail("'\(key)' holds \(other.compactText), not a number")
                        }
                    }
                } catch {
                    fail("\(error)")
                }
            }
        }.start()
    }
    group.wait()
}
