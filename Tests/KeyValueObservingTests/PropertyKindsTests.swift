import KeyValueObserving
import Testing

private struct Point: Equatable, Sendable {
    var x = 0
    var y = 0
}

private enum Mode: Equatable, Sendable {
    case idle
    case running(speed: Int)
}

private final class Reference: Sendable {}

private final class Everything: KeyValueObservable {
    @Observed var int = 0
    @Observed var string = "a"
    @Observed var point = Point()
    @Observed var mode = Mode.idle
    @Observed var optional: Int? = nil
    @Observed var array: [String] = []
    @Observed var reference: Reference? = nil
}

private class GenericBox<Element>: KeyValueObservable {
    @Observed var element: Element
    init(_ element: Element) { self.element = element }
}

@MainActor
private final class MainActorModel: KeyValueObservable {
    @Observed var count = 0
}

@MainActor
private class MainActorBase: KeyValueObservable {
    @Observed var title = ""
}

@MainActor
private final class MainActorDerived: MainActorBase {
    @Observed var subtitle = ""
}

@Suite("Property types and class hierarchies")
struct PropertyKindsTests {
    private func expectOldNew<Value: Equatable & Sendable>(
        _ object: Everything,
        _ keyPath: ReferenceWritableKeyPath<Everything, Value>,
        set newValue: Value,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let old = object[keyPath: keyPath]
        let changes = Locked<[KeyValueObservedChange<Value>]>([])
        let token = object.observe(keyPath, options: [.old, .new]) { _, change in changes.append(change) }
        object[keyPath: keyPath] = newValue
        #expect(changes.current.map(\.oldValue) == [old], sourceLocation: sourceLocation)
        #expect(changes.current.map(\.newValue) == [newValue], sourceLocation: sourceLocation)
        token.invalidate()
    }

    @Test func anyValueTypeCanBeObserved() {
        let object = Everything()
        expectOldNew(object, \.int, set: 42)
        expectOldNew(object, \.string, set: "b")
        expectOldNew(object, \.point, set: Point(x: 1, y: 2))
        expectOldNew(object, \.mode, set: .running(speed: 3))
        expectOldNew(object, \.optional, set: 7)
        expectOldNew(object, \.optional, set: nil)
        expectOldNew(object, \.array, set: ["x", "y"])
    }

    @Test func classReferencesCanBeObserved() {
        let object = Everything()
        let reference = Reference()
        let changes = Locked<[ObjectIdentifier?]>([])
        let token = object.observe(\.reference, options: [.new]) { _, change in
            changes.append(change.newValue.flatMap { $0.map(ObjectIdentifier.init) })
        }
        object.reference = reference
        object.reference = nil
        #expect(changes.current == [ObjectIdentifier(reference), nil])
        token.invalidate()
    }

    @Test func inPlaceMutationOfAnArrayNotifiesOnce() {
        let object = Everything()
        let values = Locked<[[String]?]>([])
        let token = object.observe(\.array, options: [.new]) { _, change in values.append(change.newValue) }
        object.array.append("a")
        object.array.append("b")
        #expect(values.current == [["a"], ["a", "b"]])
        token.invalidate()
    }

    @Test func propertiesOfSuperclassesAndSubclassesNotifyAtEveryLevel() {
        let car = SportsCar()
        let log = Locked<[String]>([])
        let speed = car.observe(\.speed, options: [.old, .new]) { car, change in
            log.append("speed \(change.oldValue!)→\(change.newValue!) read \(car.speed)")
        }
        let gear = car.observe(\.gear, options: [.new]) { _, change in log.append("gear \(change.newValue!)") }
        let turbo = car.observe(\.turbo, options: [.prior, .new]) { _, change in
            log.append("turbo \(change.isPrior ? "prior" : "\(change.newValue!)")")
        }
        car.speed = 100
        car.gear = 3
        car.turbo = true
        #expect(log.current == ["speed 0→100 read 100", "gear 3", "turbo prior", "turbo true"])
        speed.invalidate()
        gear.invalidate()
        turbo.invalidate()
    }

    @Test func nonFinalClassesNotify() {
        let vehicle = Vehicle()
        let car = Car()
        let values = Locked<[Int?]>([])
        let t1 = vehicle.observe(\.speed, options: [.new]) { _, change in values.append(change.newValue) }
        let t2 = car.observe(\.speed, options: [.new]) { _, change in values.append(change.newValue) }
        vehicle.speed = 1
        car.speed = 2
        #expect(values.current == [1, 2])
        t1.invalidate()
        t2.invalidate()
    }

    @Test func anInheritedKeyObservedThroughTheSubclassAndTheBaseNotifiesBoth() {
        let car = SportsCar()
        let asVehicle: Vehicle = car
        let values = Locked<[String]>([])
        let viaSubclass = car.observe(\.speed, options: [.prior, .old, .new]) { _, change in
            values.append("sub \(change.isPrior) \(String(describing: change.oldValue)) \(String(describing: change.newValue))")
        }
        let viaBase = asVehicle.observe(\.speed, options: [.new]) { _, change in
            values.append("base \(change.newValue!)")
        }
        car.speed = 5
        #expect(
            values.current == [
                "sub true Optional(0) nil",
                "sub false Optional(0) Optional(5)",
                "base 5",
            ])
        #expect(car.observationInfo.observerCountsByKeyPath == [\Vehicle.speed: 2])
        viaSubclass.invalidate()
        viaBase.invalidate()
    }

    @Test func genericClassesNotify() {
        let box = GenericBox("a")
        let other = GenericBox(1)
        let values = Locked<[String?]>([])
        let token = box.observe(\.element, options: [.new]) { _, change in values.append(change.newValue) }
        let otherToken = other.observe(\.element) { _, _ in Issue.record("wrong object notified") }
        box.element = "b"
        box.element = "c"
        #expect(values.current == ["b", "c"])
        token.invalidate()
        box.element = "d"
        #expect(values.current == ["b", "c"])
        #expect(box.observationInfo.observerCountsByKeyPath.isEmpty)
        otherToken.invalidate()
    }

    @Test @MainActor func mainActorSubclassesNotify() {
        let model = MainActorModel()
        let derived = MainActorDerived()
        let values = Locked<[String]>([])
        let t1 = model.observe(\.count, options: [.new]) { _, change in values.append("count \(change.newValue!)") }
        let t2 = derived.observe(\.title, options: [.new]) { _, change in values.append("title \(change.newValue!)") }
        let t3 = derived.observe(\.subtitle, options: [.new]) { _, change in values.append("subtitle \(change.newValue!)") }
        model.count = 1
        derived.title = "a"
        derived.subtitle = "b"
        #expect(values.current == ["count 1", "title a", "subtitle b"])
        t1.invalidate()
        t2.invalidate()
        t3.invalidate()
    }
}
