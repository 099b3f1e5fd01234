import Testing

@testable import KeyValueObserving

/// An observable property written as the compiler writes an `@Observed` one, except that its storage
/// key path is a computed property: projecting it gives a temporary, not the property in place.
final class StoredElsewhere: KeyValueObservable, @unchecked Sendable {
    @Observed var neighbour = 7
    var box = Observed(wrappedValue: 0)
    var elsewhere: Observed<Int> {
        get { box }
        set { box = newValue }
    }
    var value: Int {
        get { Observed<Int>[_enclosingInstance: self, wrapped: \.value, storage: \.elsewhere] }
        set { Observed<Int>[_enclosingInstance: self, wrapped: \.value, storage: \.elsewhere] = newValue }
    }
    @Observed var following = 9
}

/// `@Observed` finds a property by the offset its storage key path projects to, and the set path
/// writes through that offset: checked before every write (issue #41, point 4).
@Suite("Storage offsets")
struct StorageOffsetTests {
    /// A registry knows how far its object's memory goes: past the last `@Observed` property.
    @Test func aRegistryKnowsWhereItsObjectEnds() throws {
        let object = StoredElsewhere()
        let token = object.observe(\.neighbour) { _, _ in }
        defer { token.invalidate() }
        let registry = try #require(object._existingRegistry)
        let base = UnsafeMutableRawPointer(Unmanaged.passUnretained(object).toOpaque())
        // `box` is a stored property: its key path projects it in place.
        let lastOffset = Observed<Int>._storageOffset(object, \StoredElsewhere.box)
        #expect(lastOffset > 0)
        #expect(registry.storageEnd >= lastOffset + MemoryLayout<Observed<Int>>.size)
        let header = _getUnsafePointerToStoredProperties(object) - base
        #expect(registry.holdsStorage(of: object, at: lastOffset, size: MemoryLayout<Observed<Int>>.size))
        // Not the header, not before the object, not past its end, not a value that straddles the end.
        #expect(!registry.holdsStorage(of: object, at: header - 8, size: 8))
        #expect(registry.holdsStorage(of: object, at: header, size: 8))
        #expect(!registry.holdsStorage(of: object, at: -64, size: 8))
        #expect(!registry.holdsStorage(of: object, at: registry.storageEnd, size: 8))
        #expect(!registry.holdsStorage(of: object, at: registry.storageEnd - 4, size: 8))
        #expect(registry.holdsStorage(of: object, at: registry.storageEnd - 8, size: 8))
    }

    /// An ordinary `@Observed` property passes the check, whatever its place in the object.
    @Test func everyPropertyOfAnOrdinaryObjectPassesTheCheck() {
        let counter = Counter8()
        let seen = Locked<[Int]>([])
        let tokens = Counter8.keys.map { key in counter.observe(key, options: [.new]) { _, change in seen.append(change.newValue!) } }
        for (index, key) in Counter8.keys.enumerated() { counter[keyPath: key] = index + 1 }
        tokens.forEach { $0.invalidate() }
        #expect(seen.current == Array(1...8))
    }

    /// A storage key path that does not project in place gives an offset that fails the check, in
    /// every build.
    @Test func aTemporaryIsNotTakenForTheProperty() throws {
        let object = StoredElsewhere()
        let token = object.observe(\.neighbour) { _, _ in }
        defer { token.invalidate() }
        let registry = try #require(object._existingRegistry)
        let offset = Observed<Int>._storageOffset(object, \StoredElsewhere.elsewhere)
        #expect(!registry.holdsStorage(of: object, at: offset, size: MemoryLayout<Observed<Int>>.size))
    }

    /// The set of such a property on an observed object never writes through the offset: it stops
    /// the process, naming the property.
    @Test func aSetOfAPropertyNotStoredInPlaceStopsTheProcessNamingIt() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let object = StoredElsewhere()
            let token = object.observe(\.value) { _, _ in }
            object.value = 5
            token.invalidate()
        }
        let printed = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(printed.contains("@Observed: the storage of \(_KeyNames.name(of: \StoredElsewhere.value)) on StoredElsewhere"))
    }

    /// Without observers (no registry), such a property is stored through its key path, as every
    /// `@Observed` property is.
    @Test func withoutObserversAPropertyNotStoredInPlaceIsStoredThroughItsKeyPath() {
        let object = StoredElsewhere()
        object.value = 5
        #expect(object.value == 5)
        #expect(object.box.wrappedValueForTesting == 5)
        #expect(object._existingRegistry == nil)
    }
}

extension Observed {
    /// The stored value, read without an enclosing instance.
    var wrappedValueForTesting: Value { _value }
}
