import KeyValueObserving

/// `@unchecked Sendable` in tests only: each test sets a property from one thread at a time.
final class AudioPlayer: KeyValueObservable, @unchecked Sendable {
    @Observed var volume = 0.5
    @Observed var isMuted = false
    var balance = 0.0
}

final class Person: KeyValueObservable {
    @Observed var firstName = "Ada"
    @Observed var lastName = "Lovelace"
    var fullName: String { "\(firstName) \(lastName)" }
}

class Vehicle: KeyValueObservable {
    @Observed var speed = 0
}

class Car: Vehicle {
    @Observed var gear = 1
}

final class SportsCar: Car {
    @Observed var turbo = false
    var doubledSpeed: Int { speed * 2 }
}

/// `@unchecked Sendable` in tests only: each property is set by one thread (its owner) at a time.
final class Counter8: KeyValueObservable, @unchecked Sendable {
    @Observed var k0 = 0
    @Observed var k1 = 0
    @Observed var k2 = 0
    @Observed var k3 = 0
    @Observed var k4 = 0
    @Observed var k5 = 0
    @Observed var k6 = 0
    @Observed var k7 = 0

    static var keys: [ReferenceWritableKeyPath<Counter8, Int>] { [\.k0, \.k1, \.k2, \.k3, \.k4, \.k5, \.k6, \.k7] }
}
