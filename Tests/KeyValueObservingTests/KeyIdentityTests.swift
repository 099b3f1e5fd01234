import KeyValueObserving
import Testing

private final class Twins: KeyValueObservable {
    @Observed var left = "same"
    @Observed var right = "same"
    var both: String { left + right }
}

/// The registry names a property by its key path at registration and by its storage offset on a
/// set, and learns which is which; these tests pin the orders in which that can happen.
@Suite("Matching registrations to the properties being set")
struct KeyIdentityTests {
    @Test func aPropertySetBeforeItsFirstObserverRegistersIsStillMatched() {
        let player = AudioPlayer()
        let volume = player.observe(\.volume) { _, _ in }
        // The object has a registry now: this set teaches it where `isMuted` is stored, with no
        // observer to notify yet.
        player.isMuted = true
        let values = Locked<[Bool?]>([])
        let muted = player.observe(\.isMuted, options: [.new]) { _, change in values.append(change.newValue) }
        player.isMuted = false
        #expect(values.current == [false])
        volume.invalidate()
        muted.invalidate()
    }

    @Test func aPropertyFirstSetAfterItsObserverRegistersIsMatched() {
        let player = AudioPlayer()
        let values = Locked<[Bool?]>([])
        let muted = player.observe(\.isMuted, options: [.new]) { _, change in values.append(change.newValue) }
        player.volume = 0.1
        player.isMuted = true
        player.volume = 0.2
        player.isMuted = false
        #expect(values.current == [true, false])
        muted.invalidate()
    }

    @Test func propertiesOfTheSameTypeAreToldApart() {
        let twins = Twins()
        let log = Locked<[String]>([])
        let left = twins.observe(\.left, options: [.new]) { _, change in log.append("left \(change.newValue!)") }
        let right = twins.observe(\.right, options: [.new]) { _, change in log.append("right \(change.newValue!)") }
        twins.right = "r"
        twins.left = "l"
        twins.right = "r2"
        #expect(log.current == ["right r", "left l", "right r2"])
        left.invalidate()
        right.invalidate()
    }

    @Test func aRegistrationAfterAllObserversLeftFindsThePropertyAgain() {
        let player = AudioPlayer()
        let first = player.observe(\.volume) { _, _ in }
        player.volume = 0.1
        first.invalidate()
        player.volume = 0.2
        let values = Locked<[Double?]>([])
        let second = player.observe(\.volume, options: [.new]) { _, change in values.append(change.newValue) }
        player.volume = 0.3
        #expect(values.current == [0.3])
        second.invalidate()
    }

    @Test func diagnosticsNameEachPropertyEvenWhenTheyHoldEqualValues() {
        let twins = Twins()
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        var token: KeyValueObservation?
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }) {
            token = twins.observe(\.both) { _, _ in }
        }
        #expect(collected.current.first?.reads.count == 2)
        #expect(collected.current.first?.readNames == ["left", "right"])
        twins.left = "l"
        collected.withLock { $0 = [] }
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }) {
            token = twins.observe(\.both) { _, _ in }
        }
        #expect(collected.current.first?.readNames == ["left", "right"])
        token?.invalidate()
    }
}

private struct Marker: Equatable, Sendable {}

private enum Phase: Equatable, Sendable {
    case only
}

private final class ZeroSized: KeyValueObservable {
    @Observed var a = Marker()
    @Observed var b = Marker()
    @Observed var phase = Phase.only
    @Observed var count = 0
}

class Node: KeyValueObservable {
    @Observed var label = 0
    @Observed fileprivate(set) var revision = 0

    func bump() {
        revision += 1
    }
}

final class SubNode: Node {}

/// `\T.count`, made at run time for `T`.
private func countKeyPath<T: ZeroSized>(of _: T.Type) -> KeyPath<T, Int> { \T.count }

@Suite("Zero-sized and inherited properties")
struct SpecialPropertiesTests {
    @Test func zeroSizedPropertiesAreToldApartThoughTheyShareAnOffset() {
        let object = ZeroSized()
        let log = Locked<[String]>([])
        let a = object.observe(\.a) { _, _ in log.append("a") }
        let b = object.observe(\.b) { _, _ in log.append("b") }
        let phase = object.observe(\.phase, options: [.old, .new]) { _, change in
            log.append("phase \(change.oldValue!)→\(change.newValue!)")
        }
        let count = object.observe(\.count, options: [.new]) { _, change in log.append("count \(change.newValue!)") }
        object.b = Marker()
        object.a = Marker()
        object.count = 1
        object.phase = .only
        object.b = Marker()
        #expect(log.current == ["b", "a", "count 1", "phase only→only", "b"])
        [a, b, phase, count].forEach { $0.invalidate() }
    }

    /// A key-path literal of an `@Observed` property is probed once per class, then found in the
    /// process-wide key cache, zero-sized or not (a zero-sized one was stored where no look-up found
    /// it: probed again and stored again at every registration).
    @Test func aZeroSizedKeyIsProbedOnceThenFoundInTheKeyCache() {
        let object = ZeroSized()
        let phase = object.observe(\.phase) { _, _ in }
        let count = object.observe(\.count) { _, _ in }
        #expect(object.cachedObservedKeyIsZeroSized(\ZeroSized.phase) == true)
        #expect(object.cachedObservedKeyIsZeroSized(\ZeroSized.count) == false)
        #expect(ZeroSized().cachedObservedKeyIsZeroSized(\ZeroSized.phase) == true, "the cache is per class")
        withExtendedLifetime((phase, count)) {}
    }

    /// A key path equal to an `@Observed` property's but another object (a literal at another site, one
    /// built at run time) is remembered too, with the accessor's own object: the next registration
    /// through it skips the probe and still hears the setter.
    @Test func anEqualButNotIdenticalKeyPathIsCachedWithTheAccessorsKey() throws {
        // A key path a generic function makes is a new object at each call.
        let built = countKeyPath(of: ZeroSized.self)
        #expect(built == \ZeroSized.count)
        try #require(built !== (\ZeroSized.count as AnyKeyPath), "the generic function made a new object")
        let object = ZeroSized()
        #expect(object.cachedObservedKeyIsZeroSized(built) == nil)
        let values = Locked<[Int]>([])
        let first = object.observe(built, options: [.new]) { _, change in values.append(change.newValue!) }
        #expect(object.cachedObservedKeyIsZeroSized(built) == false)
        // Through the cache now: the slot must be the one the setter notifies.
        let second = object.observe(built, options: [.new]) { _, change in values.append(-change.newValue!) }
        object.count = 5
        #expect(values.current == [5, -5])
        #expect(object.observationInfo.observerCountsByKeyPath == [\ZeroSized.count: 2])
        [first, second].forEach { $0.invalidate() }
    }

    @Test func anInheritedWritablePropertyObservedThroughTheSubclassTakesTheDirectRoute() {
        let node = SubNode()
        let values = Locked<[Int?]>([])
        let token = node.observe(\.label, options: [.new]) { _, change in values.append(change.newValue) }
        node.label = 3
        #expect(values.current == [3])
        #expect(node.observationInfo.observerCountsByKeyPath == [\Node.label: 1])
        token.invalidate()
    }

    @Test func anInheritedPropertyReadOnlyFromOutsideIsObservedThroughItsKeyPath() {
        // `revision` is `fileprivate(set)`: from here `\SubNode.revision` is writable, so use a
        // read-only key path to it, as code outside the file would get.
        let node = SubNode()
        let readOnly: KeyPath<SubNode, Int> = \SubNode.revision
        let values = Locked<[Int?]>([])
        let token = node.observe(readOnly, options: [.prior, .old, .new]) { _, change in
            values.append(change.isPrior ? -(change.oldValue ?? 0) - 100 : change.newValue)
        }
        node.bump()
        node.bump()
        #expect(values.current == [-100, 1, -101, 2])
        token.invalidate()
    }

    @Test func theSameUnobservableKeyPathBuiltTwiceSharesOneKey() {
        let player = AudioPlayer()
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        var tokens: [KeyValueObservation] = []
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }) {
            let root: KeyPath<AudioPlayer, AudioPlayer> = \AudioPlayer.self
            for _ in 0..<2 {
                // Built at run time: equal, but distinct objects.
                let key = root.appending(path: \AudioPlayer.balance)
                tokens.append(player.observe(key) { _, _ in })
            }
        }
        #expect(collected.current.count == 2)
        #expect(player.observationInfo.observerCountsByKeyPath.count == 1)
        #expect(player.observationInfo.observerCountsByKeyPath.values.first == 2)
        tokens.forEach { $0.invalidate() }
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }
}
