import KeyValueObserving
import Testing

#if canImport(Glibc)
/// glibc's `malloc_usable_size`, which the Glibc module does not export (it lives in `<malloc.h>`).
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer?) -> Int
#endif

private final class TwoWords {
    var first = 0
    var second = 0
}
private final class OneWord {
    var word = 0
}

@Suite("Cost structure: memory per object, registries only where observed")
struct ScaleTests {
    #if canImport(Glibc)
    /// The allocation size of an instance, from the allocator itself: the smallest of 32 live
    /// instances. One alone may come from a free chunk a little larger than asked for (glibc does
    /// not split off a remainder too small to be a chunk), depending on what other threads freed.
    private func allocationSize(_ make: () -> AnyObject) -> Int {
        let objects = (0..<32).map { _ in make() }
        return objects.map { mallocUsableSize(Unmanaged.passUnretained($0).toOpaque()) }.min()!
    }

    @Test func anUnobservedObjectCostsOnePointerMoreThanAnEmptyObject() {
        // An empty instance is a 16-byte header; one more word is 24 bytes, a second would be 32,
        // which the allocator serves from a larger bin.
        #expect(allocationSize { KeyValueObservable() } == allocationSize { OneWord() })
        #expect(allocationSize { KeyValueObservable() } < allocationSize { TwoWords() })
    }
    #endif

    @Test func theRegistryIsCreatedOnlyOnFirstRegistrationAndOnlyForThatObject() {
        let observed = AudioPlayer()
        let other = AudioPlayer()
        observed.volume = 0.1
        #expect(!observed.hasObserverRegistry)
        let token = observed.observe(\.volume) { _, _ in }
        #expect(observed.hasObserverRegistry)
        other.volume = 0.2
        other.isMuted = true
        #expect(!other.hasObserverRegistry)
        token.invalidate()
    }

    @Test func settingUnobservedKeysOfAnObservedObjectAddsNoKeys() {
        let player = AudioPlayer()
        let token = player.observe(\.volume) { _, _ in }
        for _ in 0..<100 {
            player.isMuted.toggle()
        }
        #expect(player.observationInfo.observerCountsByKeyPath == [\AudioPlayer.volume: 1])
        token.invalidate()
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    @Test func manyObserversOnManyKeysAreCountedPerKey() {
        let counters = Counter8()
        var tokens: [KeyValueObservation] = []
        for (index, key) in Counter8.keys.enumerated() {
            for _ in 0...index {
                tokens.append(counters.observe(key) { _, _ in })
            }
        }
        let counts = counters.observationInfo.observerCountsByKeyPath
        #expect(counts.count == 8)
        for (index, key) in Counter8.keys.enumerated() {
            #expect(counts[key] == index + 1)
        }
        tokens.forEach { $0.invalidate() }
    }
}
