import Dispatch
import Foundation
import KeyValueObserving
// Not `@testable`: the back end below is built on the package interface alone (`DefaultsBackend`,
// `withBackendSection`, the storage's package methods), as one in another module would be.
import ObservableDefaults
import Testing

/// What the in-memory back ends of one test share, as processes share a file: the values every one
/// wrote, each write at the next revision, and who hears of them. Everything happens on `queue`,
/// which tells the other back ends of each write in revision order (on their own queues).
final class MemoryMedium: @unchecked Sendable {
    // Invariant: `values`, `revision` and `backends` are only accessed on `queue` (serial).
    private let queue = DispatchQueue(label: "MemoryMedium")
    private var values: [String: JSONValue] = [:]
    private var revision: Int64 = 0
    private var backends: [ObjectIdentifier: MemoryBackend] = [:]

    /// What the medium holds now; `backend` hears of every later write but its own.
    func attach(_ backend: MemoryBackend) -> [String: JSONValue] {
        queue.sync {
            backends[ObjectIdentifier(backend)] = backend
            return values
        }
    }

    func detach(_ backend: MemoryBackend) {
        queue.sync { _ = backends.removeValue(forKey: ObjectIdentifier(backend)) }
    }

    /// Stores `changes` (`nil`: removed) at the next revision, which it returns.
    func write(_ changes: [(key: String, json: JSONValue?)], from writer: MemoryBackend) -> Int64 {
        queue.sync {
            for (key, json) in changes { values[key] = json }
            revision += 1
            for backend in backends.values where backend !== writer { backend.receive(changes, revision: revision) }
            return revision
        }
    }
}

/// A third back end, in memory: it writes a storage's pending changes to its `MemoryMedium` on its
/// own queue, and applies the other back ends' writes as another process's, with their revision.
/// (Unlike etcd's, it does not order one key's writes by revision: the tests write each key from
/// one store at a time.)
final class MemoryBackend: DefaultsBackend {
    private struct WeakStorage {
        weak var storage: DefaultsStorage?
    }

    let medium: MemoryMedium
    /// Where writes and other back ends' changes are applied, one at a time (tests suspend it).
    let queue = DispatchQueue(label: "MemoryBackend")
    private let storage = Locked(WeakStorage())

    init(medium: MemoryMedium) {
        self.medium = medium
    }

    /// A store on a new storage of a new back end on `medium`, holding what `medium` holds.
    static func store(on medium: MemoryMedium) -> DefaultsStore {
        let backend = MemoryBackend(medium: medium)
        let storage = DefaultsStorage(backend: backend, lock: Lock())
        backend.storage.withLock { $0.storage = storage }
        // On the queue: the writes the medium tells of meanwhile are applied after the first read.
        backend.queue.sync {
            let values = medium.attach(backend)
            storage.withBackendSection { $0.setLoadedValues(values) }
        }
        return DefaultsStore(storage: storage, problems: [], errorHandler: { Issue.record("unexpected error: \($0)") })
    }

    var location: DefaultsLocation { .etcd(endpoints: [URL(string: "memory://medium")!], prefix: "") }

    func writeSoon(_ storage: DefaultsStorage) {
        queue.async { self.write(storage) }
    }

    /// Writes what is pending to the medium, then marks it written. Runs on the queue.
    private func write(_ storage: DefaultsStorage) {
        let taken = storage.withBackendSection { $0.takePendingChanges() }
        var written: [String: JSONValue?] = [:]
        for change in taken {
            if let entry = change.entry {
                if let json = DefaultsStorage.json(of: entry) { written[change.key] = json }
            } else {
                written[change.key] = .some(nil)
            }
        }
        guard !written.isEmpty else { return }
        _ = medium.write(written.map { ($0.key, $0.value) }, from: self)
        storage.withBackendSection { section in
            for change in taken where written[change.key] != nil { section.markWritten(change, as: written[change.key]!) }
        }
    }

    func flush(_ storage: DefaultsStorage, timeout: Duration?, notice: (after: Duration, call: () -> Void)?) throws(DefaultsError) {
        queue.sync { write(storage) }
    }

    func flushAtExit(_ storage: DefaultsStorage) {
        queue.sync { write(storage) }
    }

    func update(_ storage: DefaultsStorage, key: String, _ transform: @escaping (DefaultsStorage.Entry?) -> DefaultsStorage.Entry??)
        throws(DefaultsError)
    {
        queue.sync {
            let entry = storage.withBackendSection { $0.entry(key) }
            guard case .some(let new) = storage.runUpdateBody(transform, on: entry) else { return }
            let revision = medium.write([(key, new?.json)], from: self)
            storage.withBackendSection { $0.applyUpdate(key, entry: new, revision: revision) }
        }
    }

    /// Another back end wrote `changes` at `revision`: applied on the queue, as another process's.
    func receive(_ changes: [(key: String, json: JSONValue?)], revision: Int64) {
        queue.async { [self] in
            guard let storage = storage.withLock({ $0.storage }) else { return }
            storage.withBackendSection { $0.apply(changes, origin: .anotherProcess, revision: revision) }
        }
    }

    func close() {
        medium.detach(self)
    }
}

@Suite("A third back end on the storage's back-end interface")
struct BackendInterfaceTests {
    let speed = DefaultsKey("speed", default: 0)

    func isPending(_ key: String, in store: DefaultsStore) -> Bool {
        store.storage.withBackendSection { $0.isPending(key) }
    }

    @Test func aStoreOnItReadsWhatTheMediumHoldsAndSetsThroughIt() throws {
        let medium = MemoryMedium()
        let first = MemoryBackend.store(on: medium)
        first[speed] = 4
        try first.flush()
        let second = MemoryBackend.store(on: medium)
        #expect(second[speed] == 4)
        second[speed] = 5
        #expect(second[speed] == 5)
        try second.flush()
        #expect(MemoryBackend.store(on: medium)[speed] == 5)
    }

    @Test func anotherStoresChangesReachTheObserversAsAnotherProcesssWithTheirRevision() throws {
        let medium = MemoryMedium()
        let here = MemoryBackend.store(on: medium)
        let there = MemoryBackend.store(on: medium)
        let seen = Locked<[String]>([])
        let token = here.observe(speed, options: [.old, .new]) { _, change in
            let origin = change.origin == .thisProcess ? "here" : "there"
            seen.withLock { $0.append("\(change.oldValue!)→\(change.newValue!) \(origin) \(change.revision ?? 0)") }
        }
        defer { withExtendedLifetime(token) {} }
        here[speed] = 1
        try here.flush()
        there[speed] = 2
        try there.flush()
        #expect(waitUntil { seen.current.count == 2 })
        try there.update(speed) { $0 += 1 }
        #expect(waitUntil { seen.current.count == 3 })
        #expect(seen.current == ["0→1 here 0", "1→2 there 2", "2→3 there 3"])
        #expect(here[speed] == 3)
    }

    @Test func aSetStaysPendingUntilTheBackEndMarksItWrittenAndKeepsItsValueMeanwhile() throws {
        let medium = MemoryMedium()
        let store = MemoryBackend.store(on: medium)
        let backend = try #require(store.storage.backend as? MemoryBackend)
        let seen = Locked<[Int]>([])
        let token = store.observe(speed, options: [.new]) { _, change in seen.withLock { $0.append(change.newValue!) } }
        defer { withExtendedLifetime(token) {} }
        backend.queue.suspend()
        store[speed] = 7
        #expect(isPending("speed", in: store))
        // Another process's older value of a key pending here is not applied: this process's write wins.
        store.storage.withBackendSection { $0.apply([("speed", .number("9"))], origin: .anotherProcess, revision: 1) }
        #expect(store[speed] == 7)
        backend.queue.resume()
        try store.flush()
        #expect(!isPending("speed", in: store))
        #expect(!store.storage.withBackendSection { $0.hasPendingChanges })
        #expect(MemoryBackend.store(on: medium)[speed] == 7)
        #expect(seen.current == [7])
    }

    @Test func aKeySetAgainWhileItsWriteRunsStaysPending() throws {
        let store = MemoryBackend.store(on: MemoryMedium())
        let backend = try #require(store.storage.backend as? MemoryBackend)
        // The test takes the write's place: the back end's own writes wait meanwhile.
        backend.queue.suspend()
        store[speed] = 1
        let taken = store.storage.withBackendSection { $0.takePendingChanges() }
        #expect(taken.map(\.key) == ["speed"])
        store[speed] = 2
        let marked = store.storage.withBackendSection { $0.markWritten(taken[0], as: .number("1")) }
        #expect(!marked)
        #expect(isPending("speed", in: store))
        backend.queue.resume()
        try store.flush()
        #expect(!isPending("speed", in: store))
    }
}
