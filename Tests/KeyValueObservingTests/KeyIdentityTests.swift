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

    @Test func diagnosticsNameOnlyTheTypeWhenEqualValuesMakeThePropertyAmbiguous() {
        let twins = Twins()
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        var token: KeyValueObservation?
        KeyValueObservingDiagnostics.withHandler({ collected.append($0) }) {
            token = twins.observe(\.both) { _, _ in }
        }
        #expect(collected.current.first?.reads.count == 2)
        #expect(collected.current.first?.readNames == [
            "an @Observed property of type Observed<String>",
            "an @Observed property of type Observed<String>",
        ])
        twins.left = "l"
        collected.withLock { $0 = [] }
        KeyValueObservingDiagnostics.withHandler({ collected.append($0) }) {
            token = twins.observe(\.both) { _, _ in }
        }
        #expect(collected.current.first?.readNames == ["left", "right"])
        token?.invalidate()
    }
}
