import Dispatch
import Foundation
import KeyValueObserving
import Observation

// MARK: Classes for the sequence, batch and any-key scenarios

/// Ten observable properties, for the any-key and batch scenarios.
final class Form: KeyValueObservable {
    @Observed var f0 = 0
    @Observed var f1 = 0
    @Observed var f2 = 0
    @Observed var f3 = 0
    @Observed var f4 = 0
    @Observed var f5 = 0
    @Observed var f6 = 0
    @Observed var f7 = 0
    @Observed var f8 = 0
    @Observed var f9 = 0
}

@inline(never) func setAllFields(_ form: Form, _ value: Int) {
    form.f0 = value
    form.f1 = value
    form.f2 = value
    form.f3 = value
    form.f4 = value
    form.f5 = value
    form.f6 = value
    form.f7 = value
    form.f8 = value
    form.f9 = value
}

@inline(never) func setF0(_ form: Form, _ value: Int) { form.f0 = value }

/// What the hand-off scenarios found over some rounds. A round sets one fresh value and looks at
/// the first value the consumer task gets after it: the value just set (a fresh delivery, whose
/// latency counts), an earlier one (a stale first delivery: the sequence read the source before
/// the store, or coalesced), or none in `HandOff.timeoutNanoseconds` (a timeout). Neither of the
/// last two is a latency.
struct DeliveryTally {
    /// Set → the consumer task has the value just set, of each round whose first delivery it was
    /// (one clock, `CLOCK_MONOTONIC`, in one process).
    var freshNanoseconds: [Double] = []
    var staleFirst = 0
    var timeouts = 0

    var rounds: Int { freshNanoseconds.count + staleFirst + timeouts }

    mutating func add(_ other: DeliveryTally) {
        freshNanoseconds += other.freshNanoseconds
        staleFirst += other.staleFirst
        timeouts += other.timeouts
    }
}

/// Values handed from the setting thread to a consumer task, one at a time, each delivery
/// recorded: the consumer calls `deliver` with each value it gets; `handOff` sets values and
/// waits for them (see `DeliveryTally`). Every round starts with the consumer waiting: after a
/// stale first delivery, the value just set is given `graceNanoseconds` to follow (a sequence that
/// coalesces never sends it) so that it cannot pass for the next round's; after a timeout, further
/// values are set, untimed, until one arrives as itself.
///
/// `@unchecked Sendable`: `arrivals` is only accessed under its lock; `tally` and `lastFresh` only
/// by the thread that runs the workload.
final class HandOff: @unchecked Sendable {
    /// How long a round waits for its first delivery before counting a timeout.
    static let timeoutNanoseconds = 100_000_000
    /// How long the value just set may take to follow a stale first delivery.
    static let graceNanoseconds: UInt64 = 200_000
    /// How long resynchronising may take before the workload's check fails.
    static let giveUpNanoseconds: UInt64 = 10_000_000_000

    private let arrivals = Locked<[(value: Double, at: UInt64)]>([])
    private let arrived = DispatchSemaphore(value: 0)
    private var tally = DeliveryTally()
    /// The last value delivered fresh, and what went wrong, if anything, for the check.
    private(set) var lastFresh: Double = .nan
    private(set) var problem: String?

    /// Called by the consumer task with each value it gets.
    func deliver(_ value: Double) {
        let now = monotonicNanoseconds()
        arrivals.withLock { $0.append((value, now)) }
        arrived.signal()
    }

    /// The tally since the last call (the harness takes one per round).
    func takeTally() -> DeliveryTally {
        defer { tally = DeliveryTally() }
        return tally
    }

    private func nextArrival(waitingNanoseconds: Int) -> (value: Double, at: UInt64)? {
        guard arrived.wait(timeout: .now() + .nanoseconds(waitingNanoseconds)) == .success else { return nil }
        return arrivals.withLock { $0.removeFirst() }
    }

    /// Runs rounds until `count` of them had a fresh first delivery: `set(v)` sets fresh value `v`
    /// (from `values`), after which the consumer should get `expected(v)`.
    func handOff(_ count: Int, values: Values, set: (Int) -> Void, expected: (Int) -> Double) {
        var fresh = 0
        while fresh < count {
            // Nothing left over from the last round may pass for this one's delivery.
            while nextArrival(waitingNanoseconds: 0) != nil {}
            let value = values.next(1).lowerBound
            let start = monotonicNanoseconds()
            set(value)
            if let first = nextArrival(waitingNanoseconds: Self.timeoutNanoseconds) {
                if first.value == expected(value) {
                    tally.freshNanoseconds.append(Double(first.at - start))
                    lastFresh = first.value
                    fresh += 1
                    continue
                }
                tally.staleFirst += 1
                if let follower = awaitArrival(of: expected(value), forNanoseconds: Self.graceNanoseconds) { lastFresh = follower }
                continue
            }
            tally.timeouts += 1
            guard resynchronise(values: values, set: set, expected: expected) else { return }
        }
    }

    /// Takes arrivals for up to `nanoseconds` until `expected` arrives: it, or `nil`.
    private func awaitArrival(of expected: Double, forNanoseconds nanoseconds: UInt64) -> Double? {
        let deadline = monotonicNanoseconds() + nanoseconds
        while case let now = monotonicNanoseconds(), now < deadline,
            let arrival = nextArrival(waitingNanoseconds: Int(deadline - now))
        {
            if arrival.value == expected { return arrival.value }
        }
        return nil
    }

    /// Sets fresh values, untimed, until one arrives as itself (a sequence that coalesces delivers
    /// only after a further change); `false`, with `problem` set, if none does in
    /// `giveUpNanoseconds`.
    private func resynchronise(values: Values, set: (Int) -> Void, expected: (Int) -> Double) -> Bool {
        let start = monotonicNanoseconds()
        while monotonicNanoseconds() - start < Self.giveUpNanoseconds {
            let value = values.next(1).lowerBound
            set(value)
            // Earlier values may arrive first: wait up to 20 ms for this one.
            if let arrival = awaitArrival(of: expected(value), forNanoseconds: 20_000_000) {
                lastFresh = arrival
                return true
            }
        }
        problem = "no value arrived as set for \(Self.giveUpNanoseconds / 1_000_000_000) s"
        return false
    }

    /// The check of a workload that ran `handOff`: `nil` when it did not give up and the last value
    /// delivered as itself was the last value set.
    func check(expectedLast: Double) -> String? {
        if let problem { return problem }
        return lastFresh == expectedLast ? nil : "the last fresh delivery was \(lastFresh), expected \(expectedLast)"
    }
}

extension Workload {
    /// A hand-off scenario's workload: `start(handOff)` starts the consumer task, which calls
    /// `handOff.deliver` with each value it gets after the current one, and returns once it is
    /// waiting for the next; then each run hands off values set by `set` until `iterations`
    /// rounds had a fresh delivery of `expected(value)`.
    static func handOff(
        retaining retained: [AnyObject],
        start: (HandOff) -> Void,
        set: @escaping (Int) -> Void,
        expected: @escaping (Int) -> Double
    ) -> Workload {
        let handOff = HandOff()
        start(handOff)
        let values = Values()
        return Workload(retaining: retained + [handOff], handOff: handOff) { iterations in
            handOff.handOff(iterations, values: values, set: set, expected: expected)
        } check: { _ in
            handOff.check(expectedLast: expected(values.last))
        }
    }
}

/// Consumes `sequence` on a detached task: skips its first value (the current one) when
/// `skippingFirst`, signals that it is consuming, then hands every value to `handOff`.
func consume<S: AsyncSequence & Sendable>(
    _ sequence: S, skippingFirst: Bool, into handOff: HandOff, as value: @escaping @Sendable (S.Element) -> Double
) where S.Element: Sendable {
    let started = DispatchSemaphore(value: 0)
    Task.detached {
        var skipping = skippingFirst
        if !skipping { started.signal() }
        do {
            for try await element in sequence {
                if skipping {
                    skipping = false
                    started.signal()
                    continue
                }
                handOff.deliver(value(element))
            }
        } catch {
            fatalError("kvo-bench: a hand-off sequence failed: \(error)")
        }
    }
    started.wait()
}

/// The model of the `Observations` hand-off. The thread that runs the workload sets `volume` while
/// the consumer task's `Observations` reads it: the value is behind a lock, as a model shared with a
/// task must be (a read that comes before the store is what makes a stale delivery).
@Observable
final class SharedObservablePlayer: Sendable {
    @ObservationIgnored private let stored = Locked(0.5)

    var volume: Double {
        get {
            access(keyPath: \.volume)
            return stored.current
        }
        set {
            withMutation(keyPath: \.volume) { stored.withLock { $0 = newValue } }
        }
    }
}

/// `@unchecked Sendable`: set by the thread that runs the workload; `values(for:)` delivers copies
/// of the values, taken by the setting thread.
final class SharedPlayer: KeyValueObservable, @unchecked Sendable {
    @Observed var volume = 0.5
}

extension Scenarios {
    /// The scenarios of async sequences, batches and observers of every key.
    static var sequenceScenarios: [Scenario] {
        [
            Scenario(
                name: "asyncstream-handoff", group: .handOff,
                summary: "baseline: yield a Double into a plain AsyncStream; a consumer task takes it",
                countsInstructions: false
            ) {
                let (stream, continuation) = AsyncStream<Double>.makeStream()
                return .handOff(retaining: []) { handOff in
                    consume(stream, skippingFirst: false, into: handOff) { $0 }
                } set: { value in
                    continuation.yield(Double(value))
                } expected: {
                    Double($0)
                }
            },
            Scenario(
                name: "observations-handoff", group: .handOff,
                summary: "baseline: set an @Observable property; Swift's Observations sequence delivers it to a consumer task",
                countsInstructions: false
            ) {
                let model = SharedObservablePlayer()
                return .handOff(retaining: [model]) { handOff in
                    consume(Observations { model.volume }, skippingFirst: true, into: handOff) { $0 }
                } set: { value in
                    model.volume = Double(value)
                } expected: {
                    Double($0)
                }
            },
            Scenario(
                name: "values-handoff", group: .handOff,
                summary: "set an @Observed property; values(for:, [.new]) delivers it to a consumer task",
                baseline: "asyncstream-handoff", comparisons: ["observations-handoff"],
                countsInstructions: false
            ) {
                let player = SharedPlayer()
                return .handOff(retaining: [player]) { handOff in
                    consume(player.values(for: \.volume, options: [.new]), skippingFirst: false, into: handOff) { $0 }
                } set: { value in
                    player.volume = Double(value)
                } expected: {
                    Double($0)
                }
            },
            Scenario(
                name: "ten-sets-unbatched", group: .sequences,
                summary: "baseline: 10 sets of 10 properties, one [.new] observer each, no batch (per 10 sets)"
            ) {
                let counter = Counter()
                let form = opaque(Form())
                let tokens = formObservers(form, counter)
                return .loop(retaining: tokens, resetting: counter) { values in
                    for i in values { setAllFields(form, i) }
                } check: { iterations, _ in
                    expectHandlerCalls(counter, 10 * iterations)
                }
            },
            Scenario(
                name: "batch-of-ten-sets", group: .sequences,
                summary: "the same 10 sets inside coalescingChanges { } (one notification per key at the end)",
                baseline: "ten-sets-unbatched"
            ) {
                let counter = Counter()
                let form = opaque(Form())
                let tokens = formObservers(form, counter)
                return .loop(retaining: tokens, resetting: counter) { values in
                    for i in values { form.coalescingChanges { setAllFields(form, i) } }
                } check: { iterations, _ in
                    expectHandlerCalls(counter, 10 * iterations)
                }
            },
            Scenario(
                name: "any-key-observer-set", group: .sequences,
                summary: "set one of 10 properties; one observeAnyKey observer (no per-key observers)",
                baseline: "observed-set-new"
            ) {
                let counter = Counter()
                let form = opaque(Form())
                let token = form.observeAnyKey { _, _ in counter.count &+= 1 }
                return .loop(retaining: [token], resetting: counter) { values in
                    for i in values { setF0(form, i) }
                } check: { iterations, _ in
                    expectHandlerCalls(counter, iterations)
                }
            },
        ]
    }

    private static func formObservers(_ form: Form, _ counter: Counter) -> [AnyObject] {
        let keys: [ReferenceWritableKeyPath<Form, Int>] = [\.f0, \.f1, \.f2, \.f3, \.f4, \.f5, \.f6, \.f7, \.f8, \.f9]
        return keys.map { key in form.observe(key, options: [.new]) { _, _ in counter.count &+= 1 } }
    }
}
