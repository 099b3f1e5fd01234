import Dispatch
import KeyValueObserving
import Observation

// MARK: Classes for the tracked-observation scenarios (issue 21)
//
// Every `x` starts at -1: the scenarios set 0, 1, 2, … and Observation does not notify an
// assignment of the value already stored.
//
// The observed properties are of types no gated scenario observes (`Int32`, `[Int]`): identical
// specialisations of the accessors would be merged with the gated ones, behind a thunk the gated
// path would pay for (see StressWide.swift).

/// The root of the 3-read expression `Int(x) + Int(b.y) + c.count`: `x` and `c` are observed
/// properties of the root, `y` one of a child reached through a constant (so the expression makes
/// exactly three observable reads, on two objects).
///
/// `@unchecked Sendable`: the hand-off scenario sets it on one thread while `values(tracking:)`
/// delivers to a consumer task (see `HandOff`); the others use it on the main thread only.
final class TrackedRoot: KeyValueObservable, @unchecked Sendable {
    @Observed var x: Int32 = -1
    let b = TrackedChild()
    @Observed var c: [Int] = [1, 2, 3]
}

/// `@unchecked Sendable`: see `TrackedRoot`.
final class TrackedChild: KeyValueObservable, @unchecked Sendable {
    @Observed var y: Int32 = 10
}

/// The same shape as `TrackedRoot`, for Observation. `@unchecked Sendable`: used on one thread at a
/// time; `withObservationTracking`'s `onChange` is `@Sendable`.
@Observable
final class ObservableTrackedRoot: @unchecked Sendable {
    var x: Int32 = -1
    let b = ObservableTrackedChild()
    var c: [Int] = [1, 2, 3]
}

/// `@unchecked Sendable`: see `ObservableTrackedRoot`.
@Observable
final class ObservableTrackedChild: @unchecked Sendable {
    var y: Int32 = 10
}

/// `ObservableTrackedRoot` with a `Double` first input, for the `Observations` hand-off.
/// `@unchecked Sendable`: the workload's thread sets `x` while the consumer task reads it, so `x` is
/// behind a lock (see `SharedObservablePlayer`); `b` and `c` are only read once the model is made.
@Observable
final class ObservableTrackedDoubleRoot: @unchecked Sendable {
    @ObservationIgnored private let storedX = Locked(-1.0)
    let b = ObservableTrackedChild()
    var c: [Int] = [1, 2, 3]

    var x: Double {
        get {
            access(keyPath: \.x)
            return storedX.current
        }
        set {
            withMutation(keyPath: \.x) { storedX.withLock { $0 = newValue } }
        }
    }
}

/// The tracked expression: three observable reads.
@Sendable func trackedSum(_ root: TrackedRoot) -> Int { Int(root.x) + Int(root.b.y) + root.c.count }

/// The same three reads on the Observation model.
func trackedSum(_ root: ObservableTrackedRoot) -> Int { Int(root.x) + Int(root.b.y) + root.c.count }

/// What `trackedSum` gives once `x` holds `value` (the other inputs never change).
func expectedTrackedSum(x value: Int) -> Int { Int(Int32(truncatingIfNeeded: value)) + 10 + 3 }

@inline(never) func setTrackedX(_ root: TrackedRoot, _ value: Int) { root.x = Int32(truncatingIfNeeded: value) }
@inline(never) func setTrackedX(_ root: ObservableTrackedRoot, _ value: Int) { root.x = Int32(truncatingIfNeeded: value) }

/// Tracks the 3-read expression once; the change handler counts and tracks again, so every set
/// fires (Observation's `onChange` comes before the store: the re-armed evaluation reads the old
/// value, which it records in `counter.last`).
func trackSum(of model: ObservableTrackedRoot, counting counter: Counter) {
    withObservationTracking {
        counter.last = Double(trackedSum(model))
    } onChange: {
        counter.count &+= 1
        trackSum(of: model, counting: counter)
    }
}

/// The one tracked observation of `trackedSum` the scenarios register, with `[.new]`, recording each
/// delivered value in `counter`.
func observeTrackedSum(_ root: TrackedRoot, _ counter: Counter) -> KeyValueObservation {
    root.observeTracking(options: [.new], trackedSum) { _, change in counter.record(change.newValue.map(Double.init)) }
}

extension Scenarios {
    /// The scenarios of tracked observation, beside Observation's forms doing the same work.
    static var trackingScenarios: [Scenario] {
        [
            Scenario(
                name: "tracked-rearmed-observation", group: .baselines,
                summary: "baseline: set one input of an @Observable 3-read expression (x + b.y + c.count); "
                    + "onChange re-arms withObservationTracking, which reads the three again"
            ) {
                let counter = Counter()
                let model = opaque(ObservableTrackedRoot())
                trackSum(of: model, counting: counter)
                return .loop(resetting: counter) { values in
                    for i in values { setTrackedX(model, i) }
                } check: { iterations, last in
                    if counter.count != iterations { return "onChange ran \(counter.count) times, expected \(iterations)" }
                    return trackedSum(model) == expectedTrackedSum(x: last)
                        ? nil : "the expression is \(trackedSum(model)), expected \(expectedTrackedSum(x: last))"
                }
            },
            Scenario(
                name: "tracked-set-3-reads", group: .setPath,
                summary: "set one input of a tracked 3-read expression (a.x + a.b.y + a.c.count), one [.new] handler "
                    + "(re-evaluation and delivery included; nothing is re-registered)",
                baseline: "observed-set-new", target: .ratioAtMost(3), comparisons: ["tracked-rearmed-observation"]
            ) {
                let counter = Counter()
                let root = opaque(TrackedRoot())
                let token = observeTrackedSum(root, counter)
                return .loop(retaining: [token, root], resetting: counter) { values in
                    for i in values { setTrackedX(root, i) }
                } check: { iterations, last in
                    if counter.count != iterations { return "handler ran \(counter.count) times, expected \(iterations)" }
                    let expected = iterations == 0 ? nil : Double(expectedTrackedSum(x: last))
                    return counter.last == expected
                        ? nil
                        : "last delivered value is \(counter.last.map { "\($0)" } ?? "nil"), expected \(expected.map { "\($0)" } ?? "nil")"
                }
            },
            Scenario(
                name: "tracked-register", group: .registration,
                summary: "observeTracking(options: [.new]) { a.x + a.b.y + a.c.count } + invalidate(), on objects with no other observer",
                baseline: "register-invalidate", target: .ratioAtMost(2)
            ) {
                let operations = Counter()
                let deliveries = Counter()
                let root = opaque(TrackedRoot())
                return Workload(retaining: [root]) { iterations in
                    operations.reset()
                    for _ in 0..<iterations {
                        let token = observeTrackedSum(root, deliveries)
                        token.invalidate()
                        operations.count &+= 1
                    }
                } check: { iterations in
                    if operations.count != iterations { return "\(operations.count) registrations, expected \(iterations)" }
                    deliveries.reset()
                    setTrackedX(root, Int(root.x) + 1)
                    root.b.y += 1
                    root.c.append(0)
                    return deliveries.count == 0 ? nil : "an invalidated handler ran \(deliveries.count) times"
                }
            },
            Scenario(
                name: "tracked-observations-async", group: .handOff,
                summary: "baseline: set one input of an @Observable 3-read expression; Swift's Observations { } delivers "
                    + "the new value to a consumer task",
                countsInstructions: false
            ) {
                let model = ObservableTrackedDoubleRoot()
                return .handOff(retaining: [model]) { handOff in
                    consume(Observations { model.x + Double(model.b.y) + Double(model.c.count) }, skippingFirst: true, into: handOff) {
                        $0
                    }
                } set: { value in
                    model.x = Double(value)
                } expected: {
                    Double($0 + 13)
                }
            },
            Scenario(
                name: "tracked-values-async", group: .handOff,
                summary: "set one input of a tracked 3-read expression; values(tracking:) delivers the new value to a "
                    + "consumer task",
                baseline: "values-handoff", comparisons: ["tracked-observations-async"], countsInstructions: false
            ) {
                let root = TrackedRoot()
                return .handOff(retaining: [root]) { handOff in
                    consume(root.values(tracking: trackedSum), skippingFirst: true, into: handOff) { Double($0) }
                } set: { value in
                    setTrackedX(root, value)
                } expected: {
                    Double(expectedTrackedSum(x: $0))
                }
            },
        ]
    }
}
