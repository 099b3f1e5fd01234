import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing

/// A read keeps the typed value it found (`DefaultsStorage.readCache`, a layer stack's slot): each
/// test reads a key twice, so that the second read is the cached one, then changes it.
@Suite("Cached reads")
struct ReadCacheTests {
    let directory = TemporaryDirectory()

    @Test func aCachedReadSeesEveryChangeOfItsKeyMadeHere() throws {
        let key = DefaultsKey("cachedSpeed", default: 0.5)
        let store = DefaultsStore(fileURL: directory.file("s.json"))
        store[key] = 1.5
        #expect(store[key] == 1.5)
        #expect(store[key] == 1.5)
        store[key] = 2
        #expect(store[key] == 2)
        store.removeValue(for: key)
        #expect(store[key] == 0.5)
        store.register(["cachedSpeed": 0.75])
        #expect(store[key] == 0.75)
        store.batch { $0[key] = 3 }
        #expect(store[key] == 3)
        try store.update(key) { $0 += 1 }
        #expect(store[key] == 4)
        // Another store on the file shares the storage, and its cache.
        DefaultsStore(fileURL: directory.file("s.json"))[key] = 5
        #expect(store[key] == 5)
        store.reset()
        #expect(store[key] == 0.75)
    }

    @Test func aValueLoadedFromTheFileIsCachedAndAnotherWritersChangeIsSeen() {
        let url = directory.file("loaded.json")
        #expect(FileManager.default.createFile(atPath: url.path, contents: Data(#"{ "loadedSpeed": 1.5 }"#.utf8)))
        let key = DefaultsKey("loadedSpeed", default: 0.0)
        let store = DefaultsStore(fileURL: url)
        #expect(store[key] == 1.5)
        #expect(store[key] == 1.5)
        #expect(store.storage.entry(for: key.name)?.typed as? Double == 1.5)
        rewriteInPlace(url.path, #"{ "loadedSpeed": 2.5 }"#)
        #expect(waitUntil { store[key] == 2.5 })
        #expect(store[key] == 2.5)
    }

    @Test func keysOfOneNameAndTwoTypesEachReadTheirType() {
        let count = DefaultsKey("cachedCount", default: 0)
        let asDouble = DefaultsKey("cachedCount", default: 0.0)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: directory.file("s.json"), errorHandler: { error in errors.append(error) })
        store[count] = 3
        for _ in 0..<2 {
            #expect(store[count] == 3)
            #expect(store[asDouble] == 3.0)
        }
        store[asDouble] = 4.5
        #expect(store[asDouble] == 4.5)
        #expect(store[count] == 0)  // 4.5 is not an Int: the default, reported once
        #expect(store[count] == 0)
        #expect(errors.current.map(\.kind) == [.typeMismatch])
    }

    @Test func aLayeredReadSeesTheLayersChangesAndTheStoragesChanges() {
        let key = DefaultsKey("cachedLayered", default: 0)
        let memory = DefaultsMemoryLayer()
        let store = DefaultsStore(fileURL: directory.file("s.json"), layers: [.memory(memory)])
        let plain = DefaultsStore(fileURL: directory.file("s.json"))
        store[key] = 1
        #expect(store[key] == 1)
        #expect(store[key] == 1)
        memory[key] = 5
        #expect(store[key] == 5)
        #expect(store[key] == 5)
        #expect(plain[key] == 1)  // the storage's cache is not the layer's
        store[key] = 2  // shadowed
        #expect(store[key] == 5)
        memory.removeValue(for: key)
        #expect(store[key] == 2)
        #expect(store[key] == 2)
        plain[key] = 3
        #expect(store[key] == 3)
    }
}
