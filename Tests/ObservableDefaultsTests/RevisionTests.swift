import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing
import TestSupport

/// A back end that sends nothing: the tests play etcd, acknowledging the outbox's writes and
/// delivering other writers' changes at revisions they choose.
final class ScriptedBackend: DefaultsBackend {
    var location: DefaultsLocation { .etcd(endpoints: [URL(string: "http://scripted")!], prefix: "t/") }
    func writeSoon(_ storage: DefaultsStorage) {}
    func flush(_ storage: DefaultsStorage, timeout: Duration?, notice: (after: Duration, call: () -> Void)?) throws(DefaultsError) {}
    func flushAtExit(_ storage: DefaultsStorage) {}
    func update(_ storage: DefaultsStorage, key: String, _ transform: @escaping (DefaultsStorage.Entry?) -> DefaultsStorage.Entry??)
        throws(DefaultsError)
    {}
    func close() {}

    /// A store on a new storage of this back end, with revisions and an outbox as etcd's.
    static func store() -> DefaultsStore {
        let lock = Lock()
        let storage = DefaultsStorage(backend: ScriptedBackend(), lock: lock)
        storage.keepOutbox()
        return DefaultsStore(storage: storage, problems: [], errorHandler: { Issue.record("unexpected error: \($0)") })
    }
}

@Suite("Revisions of a back end with revisions (etcd's rules, without etcd)")
struct RevisionTests {
    let speed = DefaultsKey("speed", default: 0)

    /// Records `(old, new, origin, revision)` of every change of `speed`.
    func observe(_ store: DefaultsStore) -> (Locked<[String]>, KeyValueObservation) {
        let seen = Locked<[String]>([])
        let token = store.observe(speed, options: [.old, .new]) { _, change in
            seen.append(
                "\(change.oldValue!)→\(change.newValue!) \(change.origin == .thisProcess ? "here" : "there") \(change.revision ?? 0)")
        }
        return (seen, token)
    }

    @Test func theEchoOfThisProcessesWriteIsNotDeliveredAgainWhetherItComesBeforeOrAfterTheAcknowledgement() throws {
        let store = ScriptedBackend.store()
        let storage = store.storage
        let (seen, token) = observe(store)
        defer { withExtendedLifetime(token) {} }
        store[speed] = 1
        storage.finish(try #require(storage.nextWrite()), revision: 5)
        storage.applyRemote([("speed", .number("1"))], revision: 5)
        store[speed] = 2
        storage.applyRemote([("speed", .number("2"))], revision: 6)
        storage.finish(try #require(storage.nextWrite()), revision: 6)
        #expect(seen.current == ["0→1 here 0", "1→2 here 0"])
        #expect(storage.nextWrite() == nil)
    }

    @Test func aChangeOlderThanTheKnownRevisionIsNotApplied() throws {
        let store = ScriptedBackend.store()
        let (seen, token) = observe(store)
        defer { withExtendedLifetime(token) {} }
        store.storage.applyRemote([("speed", .number("7"))], revision: 10)
        store.storage.applyRemote([("speed", .number("3"))], revision: 9)
        store.storage.applyReload(["speed": (.number("3"), 9)], revision: 12)
        #expect(store[speed] == 7)
        #expect(seen.current == ["0→7 there 10"])
    }

    @Test func aChangeFromElsewhereWaitsForThisProcessesWriteInFlightAndIsAppliedOnlyIfNewer() throws {
        let store = ScriptedBackend.store()
        let storage = store.storage
        let (seen, token) = observe(store)
        defer { withExtendedLifetime(token) {} }
        // Older than this process's write (which etcd applies after it): never shown.
        store[speed] = 1
        storage.applyRemote([("speed", .number("5"))], revision: 3)
        #expect(store[speed] == 1)
        storage.finish(try #require(storage.nextWrite()), revision: 4)
        #expect(store[speed] == 1)
        // Newer than this process's write: shown once that write is acknowledged.
        store[speed] = 2
        storage.applyRemote([("speed", .number("6"))], revision: 8)
        #expect(store[speed] == 2)
        storage.finish(try #require(storage.nextWrite()), revision: 7)
        #expect(store[speed] == 6)
        #expect(seen.current == ["0→1 here 0", "1→2 here 0", "2→6 there 8"])
    }

    @Test func aReloadAppliesOnlyTheDifferencesAsOneTransaction() throws {
        let store = ScriptedBackend.store()
        let storage = store.storage
        storage.applyRemote([("a", .number("1")), ("b", .number("1")), ("c", .number("1"))], revision: 2)
        let changes = Locked<[DefaultsStoreChange]>([])
        let token = store.observeChanges { _, change in changes.append(change) }
        defer { withExtendedLifetime(token) {} }
        storage.applyReload(["a": (.number("1"), 2), "b": (.number("2"), 5), "d": (.number("4"), 6)], revision: 9)
        #expect(changes.current.count == 1)
        #expect(changes.current.first?.keys == ["b", "c", "d"])
        #expect(changes.current.first?.revision == 9)
        #expect(store.snapshot().keys == ["a", "b", "d"])
    }

    @Test func anUpdatesResultIsThisProcessesChangeWithItsRevisionAndItsEchoIsNotRepeated() throws {
        let store = ScriptedBackend.store()
        let storage = store.storage
        let (seen, token) = observe(store)
        defer { withExtendedLifetime(token) {} }
        let (entry, revision) = storage.beginUpdate("speed")
        #expect(entry == nil)
        #expect(revision == 0)
        storage.applyRemote([("speed", .number("4"))], revision: 3)
        storage.endUpdate("speed", result: (DefaultsStorage.Entry(typed: nil, json: .number("4")), 3))
        storage.applyRemote([("speed", .number("4"))], revision: 3)
        #expect(seen.current == ["0→4 here 3"])
    }
}
