import KeyValueObserving
import Testing

/// A computed end whose getter reads `level` only while `isOn`.
final class Dial: KeyValueObservable, @unchecked Sendable {
    @Observed var isOn = false
    @Observed var level = 0
    var display: String { isOn ? "\(level)" : "off" }
}

final class Panel: KeyValueObservable, @unchecked Sendable {
    @Observed var dial = Dial()
}

protocol Gauged: AnyObject {
    var level: Int { get }
}

final class Tank: KeyValueObservable, Gauged, @unchecked Sendable {
    @Observed var level = 0
}

/// A dependent key whose input reaches through an intermediate held as an existential, which no
/// type check says is observable.
final class Console: KeyValueObservable, @unchecked Sendable {
    @Observed var gauge: (any Gauged)? = nil
    var reading: Int { gauge?.level ?? -1 }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Console.reading: [\Console.gauge?.level]]
    }
}

/// A path is re-targeted from the step that changed on: the followers before it, and all of them
/// when the object a step holds stays the same, are kept (a follower registered again gets a new
/// id, so equal ids prove that nothing was registered again).
@Suite("Re-targeting a path only where it changed")
struct PathRetargetingTests {
    /// The ids of the path followers on each of `objects`.
    private func followerIDs(_ objects: KeyValueObservable...) -> [Set<UInt64>] {
        objects.map(\.pathFollowerIDs)
    }

    @Test func settingTheEndOfAPathRegistersNothingAgain() {
        let car = Roadster()
        let values = Locked<[Int?]>([])
        let token = car.observe(\.engine.rpm, options: [.new]) { _, change in values.append(change.newValue) }
        let engine = car.engine
        let before = followerIDs(car, engine)
        for rpm in 1...3 { engine.rpm = rpm }
        #expect(values.current == [1, 2, 3])
        #expect(before.map(\.count) == [1, 1])
        #expect(followerIDs(car, engine) == before)
        token.invalidate()
    }

    @Test func assigningTheSameIntermediateAgainNotifiesAndRegistersNothingAgain() {
        let car = Roadster()
        let values = Locked<[Int?]>([])
        let token = car.observe(\.engine.rpm, options: [.new]) { _, change in values.append(change.newValue) }
        let engine = car.engine
        let before = followerIDs(car, engine)
        car.engine = engine
        #expect(values.current == [0])
        #expect(followerIDs(car, engine) == before)
        token.invalidate()
    }

    @Test func aReplacedIntermediateMovesOnlyTheFollowersAfterIt() {
        let car = Roadster()
        let sensor = PathSensor()
        car.engine.sensor = sensor
        let values = Locked<[Int?]>([])
        let token = car.observe(\.engine.sensor?.probe.depth, options: [.new]) { _, change in values.append(change.newValue ?? nil) }
        let engine = car.engine
        let oldProbe = sensor.probe
        let kept = followerIDs(car, engine, sensor)
        #expect(oldProbe.pathFollowerIDs.count == 1)

        let probe = PathProbe()
        probe.depth = 7
        sensor.probe = probe
        #expect(followerIDs(car, engine, sensor) == kept)
        #expect(oldProbe.observationInfo.isEmpty)
        #expect(probe.pathFollowerIDs.count == 1)

        let replacement = PathSensor()
        engine.sensor = replacement
        #expect(followerIDs(car, engine) == Array(kept.prefix(2)))
        #expect(sensor.observationInfo.isEmpty && probe.observationInfo.isEmpty)
        #expect(replacement.pathFollowerIDs.count == 1 && replacement.probe.pathFollowerIDs.count == 1)
        replacement.probe.depth = 9
        #expect(values.current == [7, 0, 9])
        token.invalidate()
    }

    @Test func aDependentKeysPathInputRegistersNothingAgainWhenItsEndChanges() {
        let state = AppState()
        let greetings = Locked<[String?]>([])
        let token = state.observe(\.greeting, options: [.new]) { _, change in greetings.append(change.newValue) }
        let settings = state.settings
        let before = followerIDs(state, settings)
        settings.username = "grace"
        settings.username = "linus"
        #expect(greetings.current == ["Hello, grace!", "Hello, linus!"])
        #expect(followerIDs(state, settings) == before)
        token.invalidate()
    }

    @Test func anInputThroughAnIntermediateHeldAsAnExistentialIsFollowed() {
        let console = Console()
        let first = Tank()
        console.gauge = first
        let values = Locked<[Int?]>([])
        let token = console.observe(\.reading, options: [.new]) { _, change in values.append(change.newValue) }
        first.level = 1
        let second = Tank()
        second.level = 2
        console.gauge = second
        first.level = 10  // no longer reached
        second.level = 3
        #expect(values.current == [1, 2, 3])
        #expect(first.observationInfo.isEmpty)
        token.invalidate()
    }

    @Test func aComputedEndFollowsWhatItsGetterReadsAfterAChange() {
        let panel = Panel()
        let values = Locked<[String?]>([])
        let token = panel.observe(\.dial.display, options: [.new]) { _, change in values.append(change.newValue) }
        panel.dial.isOn = true  // now the getter reads `level` too
        panel.dial.level = 5
        #expect(values.current == ["0", "5"])
        token.invalidate()
        #expect(panel.dial.observationInfo.isEmpty)
    }
}

final class Badge: KeyValueObservable, @unchecked Sendable {
    @Observed var name = "Ada"
    var upper: String { name.uppercased() }
    var lower: String { name.lowercased() }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Badge.upper: [\Badge.name], \Badge.lower: [\Badge.name]]
    }
}

/// `observe` takes its key path as an autoclosure, so that a literal is read through direct getter
/// calls; an argument held in a variable is evaluated once.
@Suite("The key path a reading observer reads")
struct ReaderKeyPathTests {
    @Test func aKeyPathHeldInAVariableIsEvaluatedOnceAtRegistration() {
        let badge = Badge()
        let values = Locked<[String?]>([])
        var keyPath: KeyPath<Badge, String> = \.upper
        let token = badge.observe(keyPath, options: [.new]) { _, change in values.append(change.newValue) }
        keyPath = \.lower
        badge.name = "Grace"
        #expect(values.current == ["GRACE"])
        #expect(keyPath == \Badge.lower)
        token.invalidate()
    }

    @Test func aKeyPathBuiltAtEachEvaluationReadsTheOneRegistered() {
        let car = Roadster()
        let values = Locked<[Int?]>([])
        let token = car.observe((\Roadster.engine).appending(path: \Motor.rpm), options: [.new]) { _, change in
            values.append(change.newValue)
        }
        car.engine.rpm = 7
        #expect(values.current == [7])
        token.invalidate()
    }
}
