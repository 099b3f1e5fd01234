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

private struct Refusal: Error, Equatable {}

@Suite("Reloads and batches as transactions")
struct TransactionTests {
    let directory = TemporaryDirectory()

    /// Another program replaces the file with three keys changed: every key is applied before the
    /// first handler runs, each key is then reported with its old and new value, and the store-wide
    /// observer hears of the reload once.
    @Test func aReloadAppliesEveryKeyBeforeTheFirstHandlerRuns() throws {
        let url = directory.file("s.json")
        let host = DefaultsKey("host", default: "")
        let port = DefaultsKey("port", default: 0)
        let store = DefaultsStore(fileURL: url)
        store.batch { batch in
            batch[host] = "db1"
            batch[port] = 5432
        }
        try store.flush()
        let seenFromHost = Locked<[String]>([])
        let seenFromPort = Locked<[String]>([])
        let hostToken = store.observe(host, options: [.old, .new]) { store, change in
            seenFromHost.append("\(change.oldValue!)->\(change.newValue!) with port \(store[port])")
        }
        let portToken = store.observe(port, options: [.old, .new]) { store, change in
            seenFromPort.append("\(change.oldValue!)->\(change.newValue!) with host \(store[host])")
        }
        let changes = Locked<[DefaultsStoreChange]>([])
        let storeToken = store.observeChanges { _, change in changes.append(change) }
        let temporary = directory.path + "/.s.json.swp"
        try runShell(
            "printf '{\"host\": \"db2\", \"port\": 6543, \"user\": \"ada\"}\\n' > \(shellQuoted(temporary)) && mv \(shellQuoted(temporary)) \(shellQuoted(url.path))"
        )
        #expect(waitUntil { !changes.current.isEmpty })
        #expect(seenFromHost.current == ["db1->db2 with port 6543"])
        #expect(seenFromPort.current == ["5432->6543 with host db2"])
        let change = try #require(changes.current.first)
        #expect(changes.current.count == 1)
        #expect(change.keys == ["host", "port", "user"])
        #expect(change.origin == .anotherProcess)
        #expect(change.values[host] == "db2" && change.values[port] == 6543)
        hostToken.invalidate()
        portToken.invalidate()
        storeToken.invalidate()
    }

    /// `kvo-defaults write` with several pairs is a batch: the observing process gets one
    /// store-wide notification naming every key, never a part of them.
    @Test(.tags(.processes)) func aBatchInAnotherProcessArrivesAsOneChange() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        store[DefaultsKey("a", default: 0)] = 0
        try store.flush()
        let changes = Locked<[DefaultsStoreChange]>([])
        let token = store.observeChanges { _, change in changes.append(change) }
        let result = try runTool(["write", "--file", url.path, "a", "1", "b", "2", "c", "3"])
        #expect(result.status == 0, "\(result.error)")
        #expect(waitUntil { !changes.current.isEmpty })
        #expect(changes.current.map(\.keys) == [["a", "b", "c"]])
        #expect(changes.current.first?.isFromAnotherProcess == true)
        token.invalidate()
    }

    @Test func aBatchIsAppliedAtOnceNotifiedOnceAndWrittenOnce() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        let host = DefaultsKey("host", default: "")
        let port = DefaultsKey("port", default: 0)
        let retired = DefaultsKey("retired", default: false)
        store[retired] = true
        try store.flush()
        let writes = store.fileWriteCount
        let seen = Locked<[String]>([])
        let hostToken = store.observe(host, options: [.old, .new]) { store, change in
            seen.append("\(change.oldValue!)->\(change.newValue!) with port \(store[port])")
        }
        let changes = Locked<[DefaultsStoreChange]>([])
        let storeToken = store.observeChanges { _, change in changes.append(change) }
        let result = store.batch { batch -> Int in
            batch[host] = "db1"
            batch[host] = "db2"
            batch[port] = 5432
            batch[port] += 1
            batch.removeValue(for: retired)
            #expect(store[host] == "")  // nothing is applied before the body returns
            return batch[port]
        }
        #expect(result == 5433)
        #expect(seen.current == ["->db2 with port 5433"])
        #expect(changes.current.map(\.keys) == [["host", "port", "retired"]])
        #expect(changes.current.first?.origin == .thisProcess)
        try store.flush()
        #expect(store.fileWriteCount == writes + 1)
        #expect(jsonObject(at: url) == ["host": .string("db2"), "port": .number("5433")])
        hostToken.invalidate()
        storeToken.invalidate()
    }

    /// A batch whose write fails stays pending as a whole, and the retry writes it in one piece.
    @Test func aBatchThatCannotBeWrittenYetIsWrittenWhole() throws {
        let blocker = directory.file("not-a-directory")
        try "x".write(to: blocker, atomically: false, encoding: .utf8)
        let url = blocker.appendingPathComponent("s.json")
        let store = DefaultsStore(fileURL: url) { _ in }
        store.batch { batch in
            batch[DefaultsKey("a", default: 0)] = 1
            batch[DefaultsKey("b", default: 0)] = 2
        }
        #expect(throws: DefaultsError.self) { try store.flush() }
        try FileManager.default.removeItem(at: blocker)
        try store.flush()
        #expect(jsonObject(at: url) == ["a": .number("1"), "b": .number("2")])
    }

    @Test func aBatchWhoseBodyThrowsAppliesNothing() throws {
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let key = DefaultsKey("a", default: 0)
        let changes = Locked<Int>(0)
        let token = store.observeChanges { _, _ in changes.withLock { $0 += 1 } }
        #expect(throws: Refusal()) {
            try store.batch { batch in
                batch[key] = 1
                throw Refusal()
            }
        }
        #expect(store[key] == 0)
        #expect(changes.current == 0)
        token.invalidate()
    }

    /// No isolation: a set from another thread while a batch's body runs is a change of its own.
    @Test func aSetFromAnotherThreadDuringABatchIsNotPartOfIt() throws {
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let changes = Locked<[Set<String>]>([])
        let token = store.observeChanges { _, change in changes.append(change.keys) }
        store.batch { batch in
            batch[DefaultsKey("a", default: 0)] = 1
            let thread = Thread { store[DefaultsKey("other", default: 0)] = 1 }
            thread.start()
            #expect(waitUntil { changes.current == [["other"]] })
            batch[DefaultsKey("b", default: 0)] = 1
        }
        #expect(changes.current == [["other"], ["a", "b"]])
        token.invalidate()
    }

    @Test func resetIsOneChange() throws {
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        store[DefaultsKey("a", default: 0)] = 1
        store[DefaultsKey("b", default: 0)] = 2
        let changes = Locked<[Set<String>]>([])
        let token = store.observeChanges { _, change in changes.append(change.keys) }
        store.reset()
        #expect(changes.current == [["a", "b"]])
        token.invalidate()
    }

    @Test func aSnapshotKeepsTheValuesOfItsInstant() throws {
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let host = DefaultsKey("host", default: "none")
        let port = DefaultsKey("port", default: 0)
        store[host] = "db1"
        let snapshot = store.snapshot()
        store[host] = "db2"
        store[port] = 1
        #expect(snapshot[host] == "db1")
        #expect(snapshot[port] == 0)
        #expect(snapshot.hasValue(for: host) && !snapshot.hasValue(for: port))
        #expect(snapshot.keys == ["host"])
        #expect(store.snapshot()[port] == 1)
    }

    @Test func aStoreWideObserverEndsWithItsToken() throws {
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        let count = Locked(0)
        let token = store.observeChanges { _, _ in count.withLock { $0 += 1 } }
        store[DefaultsKey("a", default: 0)] = 1
        token.invalidate()
        store[DefaultsKey("a", default: 0)] = 2
        #expect(count.current == 1)
    }
}
