import KeyValueObserving
import TestSupport
import Testing

/// A stored property that is also a dependent key: notified for its own sets and its input's.
final class Mirrored: KeyValueObservable, @unchecked Sendable {
    @Observed var a = 0
    @Observed var b = 0

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Mirrored.a: [\Mirrored.b]]
    }
}

/// Two stored properties that depend on each other: a cycle.
final class CycleTwins: KeyValueObservable, @unchecked Sendable {
    @Observed var a = 0
    @Observed var b = 0

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\CycleTwins.a: [\CycleTwins.b], \CycleTwins.b: [\CycleTwins.a]]
    }
}

final class Motor: KeyValueObservable, @unchecked Sendable {
    @Observed var rpm = 0
    @Observed var sensor: PathSensor? = nil
}

final class PathSensor: KeyValueObservable, @unchecked Sendable {
    @Observed var reading = 0.0
    @Observed var probe = PathProbe()
}

final class PathProbe: KeyValueObservable, @unchecked Sendable {
    @Observed var depth = 0
}

final class Roadster: KeyValueObservable, @unchecked Sendable {
    @Observed var engine = Motor()
    @Observed var spare: Motor? = nil
    let fixedEngine = Motor()
}

@Suite("KVO fidelity")
struct FidelityTests {
    private func diagnostics(_ body: () -> Void) -> [KeyValueObservingDiagnostic] {
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }, operation: body)
        return collected.current
    }

    // MARK: A stored property that is a dependent key

    @Test func aStoredDependentKeyIsNotifiedForItsOwnSetsAndItsInputs() {
        let object = Mirrored()
        let values = Locked<[Int?]>([])
        let token = object.observe(\.a, options: [.new]) { _, change in values.append(change.newValue) }
        object.b = 1
        object.b = 2
        object.a = 3
        object.a = 4
        object.b = 5
        #expect(values.current == [0, 0, 3, 4, 4])
        token.invalidate()
    }

    @Test func aStoredDependentKeyCarriesItsOwnOldValue() {
        let object = Mirrored()
        let changes = Locked<[String]>([])
        let token = object.observe(\.a, options: [.old, .new, .prior]) { _, change in
            changes.append(
                "\(change.isPrior ? "prior " : "")\(change.oldValue.map(String.init) ?? "-")→\(change.newValue.map(String.init) ?? "-")")
        }
        object.a = 7
        #expect(changes.current == ["prior 0→-", "0→7"])
        token.invalidate()
    }

    @Test func everyAssignmentInACycleReachesTheObserversOfBothKeysOnce() {
        let object = CycleTwins()
        let ofA = Locked<[Int?]>([])
        let ofB = Locked<[Int?]>([])
        var tokens: [KeyValueObservation] = []
        let reported = diagnostics {
            tokens.append(object.observe(\.a, options: [.new]) { object, _ in ofA.append(object.a) })
            tokens.append(object.observe(\.b, options: [.new]) { object, _ in ofB.append(object.b) })
        }
        object.a = 1
        object.b = 2
        object.a = 3
        #expect(ofA.current == [1, 1, 3])
        #expect(ofB.current == [0, 2, 2])
        #expect(reported.contains { $0.kind == .dependencyCycle })
        let message = reported.first { $0.kind == .dependencyCycle }?.message ?? ""
        #expect(message.contains("exactly once"))
        tokens.forEach { $0.invalidate() }
    }

    // MARK: Key paths of any depth

    @Test func aTwoLevelPathNotifiesForEitherSegmentWithOldAndNewValues() {
        let car = Roadster()
        let changes = Locked<[String]>([])
        var token: KeyValueObservation?
        let reported = diagnostics {
            token = car.observe(\.engine.rpm, options: [.old, .new, .prior]) { _, change in
                changes.append(
                    "\(change.isPrior ? "prior " : "")\(change.oldValue.map(String.init) ?? "-")→\(change.newValue.map(String.init) ?? "-")"
                )
            }
        }
        #expect(reported.isEmpty)
        car.engine.rpm = 1000
        let replacement = Motor()
        replacement.rpm = 3000
        let old = car.engine
        car.engine = replacement
        old.rpm = 9999  // forgotten
        replacement.rpm = 3500
        #expect(changes.current == ["prior 0→-", "0→1000", "prior 1000→-", "1000→3000", "prior 3000→-", "3000→3500"])
        token?.invalidate()
    }

    @Test func aReplacedIntermediateIsNotRetained() {
        let car = Roadster()
        weak var old: Motor?
        let token: KeyValueObservation
        do {
            let engine = Motor()
            old = engine
            car.engine = engine
            token = car.observe(\.engine.rpm, options: [.new]) { _, _ in }
            car.engine = Motor()
        }
        #expect(old == nil)
        token.invalidate()
    }

    @Test func aNilIntermediateGivesNilAndIsPickedUpWhenSet() {
        let car = Roadster()
        let values = Locked<[Int??]>([])
        let token = car.observe(\.spare?.rpm, options: [.initial, .new]) { _, change in values.append(change.newValue) }
        let spare = Motor()
        car.spare = spare
        spare.rpm = 42
        car.spare = nil
        spare.rpm = 43  // no longer reached
        #expect(values.current == [.some(nil), .some(0), .some(42), .some(nil)])
        token.invalidate()
    }

    @Test func aFourLevelPathNotifiesForEverySegment() {
        let car = Roadster()
        let values = Locked<[Int?]>([])
        let token = car.observe(\.engine.sensor?.probe.depth, options: [.new]) { _, change in values.append(change.newValue ?? nil) }
        let sensor = PathSensor()
        car.engine.sensor = sensor
        sensor.probe.depth = 2
        let probe = PathProbe()
        probe.depth = 7
        sensor.probe = probe
        probe.depth = 8
        car.engine = Motor()
        #expect(values.current == [0, 2, 7, 8, nil])
        token.invalidate()
    }

    @Test func aPathThroughAConstantChildNotifies() {
        let car = Roadster()
        let values = Locked<[Int?]>([])
        let token = car.observe(\.fixedEngine.rpm, options: [.new]) { _, change in values.append(change.newValue) }
        car.fixedEngine.rpm = 5
        #expect(values.current == [5])
        token.invalidate()
    }

    @Test func valuesForAPathDeliverTheWholePathsValue() async {
        let car = Roadster()
        let stream = car.values(for: \.engine.rpm)
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == 0)
        car.engine.rpm = 10
        #expect(await iterator.next() == 10)
        car.engine = Motor()
        #expect(await iterator.next() == 0)
    }

    @Test func thePathsRootIsHeldWeakly() {
        weak var gone: Roadster?
        let values = Locked<[Int?]>([])
        var token: KeyValueObservation?
        let engine: Motor
        do {
            let car = Roadster()
            gone = car
            engine = car.engine
            token = car.observe(\.engine.rpm, options: [.new]) { _, change in values.append(change.newValue) }
        }
        #expect(gone == nil)
        engine.rpm = 1
        #expect(values.current.isEmpty)
        token?.invalidate()
    }
}

class Gauge: KeyValueObservable, @unchecked Sendable {
    @Observed var speed = 0
    @Observed var limit = 0  // equal values: names must not be guessed from values
    @Observed var engine = Motor()
    var summary: String { "\(speed)/\(limit)" }
    var unnamed: Int { speed + limit }

    override class var keyPathNames: [AnyKeyPath: String] {
        [\Gauge.summary: "summary"]
    }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Gauge.summary: [\Gauge.speed, \Gauge.limit], \Gauge.unnamed: [\Gauge.speed, \Gauge.limit]]
    }
}

final class SubGauge: Gauge, @unchecked Sendable {
    @Observed var needle = 0
}

@Suite("Key names")
struct KeyNameTests {
    @Test func anyKeyChangesNameTheStoredPropertyEvenWhenValuesAreEqual() {
        let gauge = Gauge()
        let names = Locked<[String]>([])
        let token = gauge.observeAnyKey { _, change in names.append(change.keyName) }
        gauge.limit = 0
        gauge.speed = 0
        #expect(names.current == ["limit", "speed"])
        token.invalidate()
    }

    @Test func inheritedAndSubclassPropertiesAreNamed() {
        let gauge = SubGauge()
        let names = Locked<[String]>([])
        let token = gauge.observeAnyKey { _, change in names.append(change.keyName) }
        gauge.needle = 1
        gauge.speed = 1
        #expect(names.current == ["needle", "speed"])
        token.invalidate()
    }

    @Test func aBatchNamesEveryKeyItChanged() {
        let gauge = Gauge()
        let names = Locked<[[String]]>([])
        let descriptions = Locked<[String]>([])
        let token = gauge.observeAnyKey { _, change in
            names.append(change.keyNames)
            descriptions.append(change.description)
        }
        gauge.coalescingChanges {
            gauge.speed = 3
            gauge.limit = 4
            gauge.speed = 5
        }
        #expect(names.current == [["speed", "limit"]])
        #expect(descriptions.current == ["did change speed, limit"])
        token.invalidate()
    }

    @Test func observationInfoListsKeysByNameAndCountsAnyKeyObservers() {
        let gauge = Gauge()
        #expect(gauge.observationInfo.isEmpty)
        let tokens = [
            gauge.observe(\.speed) { _, _ in },
            gauge.observe(\.speed) { _, _ in },
            gauge.observe(\.engine.rpm) { _, _ in },
            gauge.observe(\.summary) { _, _ in },
            gauge.observe(\.unnamed) { _, _ in },
            gauge.observeAnyKey { _, _ in },
        ]
        let info = gauge.observationInfo
        #expect(info.keys.map(\.name) == ["computed Int property of Gauge", "engine.rpm", "speed", "summary"])
        #expect(info.observerCount(for: \Gauge.speed) == 2)
        #expect(info.anyKeyObserverCount == 1)
        #expect(info.description == "computed Int property of Gauge: 1, engine.rpm: 1, speed: 2, summary: 1; any key: 1; path followers: 1")
        tokens.forEach { $0.invalidate() }
        #expect(gauge.observationInfo.isEmpty)
    }
}

final class Dashboard: KeyValueObservable, @unchecked Sendable {
    @Observed var gear = 1
    @Observed var speed = 0
    @Observed var odometer = 0
    var summary: String { "gear \(gear) at \(speed)" }
    var withOdometer: String { "\(speed) (\(odometer))" }
    var foreign: Int { gear }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [
            \Dashboard.summary: [\Dashboard.gear],
            \Dashboard.withOdometer: [\Dashboard.speed],
            \Dashboard.foreign: [\Dashboard.gear, \Motor.rpm],
        ]
    }

    override class var keyPathsNotAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Dashboard.withOdometer: [\Dashboard.odometer]]
    }

    override class var keyPathNames: [AnyKeyPath: String] {
        [\Dashboard.summary: "summary"]
    }
}

final class PathDashboard: KeyValueObservable, @unchecked Sendable {
    @Observed var engine: Motor? = Motor()
    var rpmText: String { "\(engine?.rpm ?? 0)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\PathDashboard.rpmText: [\PathDashboard.engine?.rpm]]
    }
}

@Suite("Checked dependency tables")
struct DependencyCheckTests {
    private func diagnostics(_ body: () -> Void) -> [KeyValueObservingDiagnostic] {
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }, operation: body)
        return collected.current
    }

    @Test func aReadTheDeclaredInputsDoNotCoverIsReportedWithTheLineToWrite() {
        let dashboard = Dashboard()
        var token: KeyValueObservation?
        let line: UInt = #line + 1
        let reported = diagnostics { token = dashboard.observe(\.summary) { _, _ in } }
        let incomplete = reported.filter { $0.kind == .incompleteDependencies }
        #expect(incomplete.count == 1)
        #expect(incomplete.first?.readNames == ["speed"])
        #expect(incomplete.first?.line == line)
        #expect(
            incomplete.first?.message.contains("[\\Dashboard.summary: [\\Dashboard.gear, \\Dashboard.speed]]") == true,
            "\(incomplete.first?.message ?? "")"
        )
        token?.invalidate()
    }

    @Test func aDeliberateOmissionIsNotReported() {
        let dashboard = Dashboard()
        var token: KeyValueObservation?
        let reported = diagnostics { token = dashboard.observe(\.withOdometer) { _, _ in } }
        #expect(reported.isEmpty)
        token?.invalidate()
    }

    @Test func anInputOfAnUnrelatedTypeIsReported() {
        let dashboard = Dashboard()
        var token: KeyValueObservation?
        let reported = diagnostics { token = dashboard.observe(\.foreign) { _, _ in } }
        #expect(reported.map(\.kind) == [.invalidDependency])
        #expect(reported.first?.message.contains("`computed Int property of Dashboard` on Dashboard") == true)
        #expect(reported.first?.message.contains("Motor") == true)
        token?.invalidate()
    }

    @Test func aPathInputCoversItsFirstStepAndObservingAnOptionalPathIsNotReported() {
        let dashboard = PathDashboard()
        var tokens: [KeyValueObservation] = []
        let reported = diagnostics {
            tokens.append(dashboard.observe(\.rpmText) { _, _ in })
            tokens.append(dashboard.observe(\.engine?.rpm) { _, _ in })
        }
        #expect(reported.isEmpty)
        tokens.forEach { $0.invalidate() }
    }
}

final class PlainEnd: KeyValueObservable, @unchecked Sendable {
    var plain = 0
}

final class PlainEndHolder: KeyValueObservable, @unchecked Sendable {
    @Observed var end = PlainEnd()
}

@Suite("Paths that end on a key that cannot notify")
struct UnobservablePathEndTests {
    @Test func aPathEndingOnAPlainPropertyIsReportedAndStillFollowsItsObservedSteps() {
        let holder = PlainEndHolder()
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        let values = Locked<[Int?]>([])
        var token: KeyValueObservation?
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }) {
            token = holder.observe(\.end.plain, options: [.new]) { _, change in values.append(change.newValue) }
        }
        #expect(collected.current.map(\.kind) == [.unobservableKey])
        #expect(collected.current.first?.message.contains("PlainEnd") == true)
        let replacement = PlainEnd()
        replacement.plain = 7
        holder.end = replacement
        #expect(values.current == [7])
        token?.invalidate()
    }
}
