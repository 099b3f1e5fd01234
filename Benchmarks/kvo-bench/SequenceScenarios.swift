import Dispatch
import Foundation
import Synchronization
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

/// A value crossing from the setting thread to a consuming task, one at a time.
///
/// `@unchecked Sendable`: the producer changes the model only after the consumer has signalled that
/// it took the previous value, so the model is never accessed from two threads at once.
final class PingPong: @unchecked Sendable {
    let taken = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)
    var delivered = 0
    var last: Double = .nan
    /// The value the producer is waiting for: a sequence that re-reads its source (Observations) may
    /// also yield a value it had already delivered, which must not count as the new one.
    private let expectedValue = Atomic<Int>(-1)

    func expect(_ value: Double) {
        expectedValue.store(Int(value * 2), ordering: .releasing)
    }

    func isExpected(_ value: Double) -> Bool {
        Int(value * 2) == expectedValue.load(ordering: .acquiring)
    }
}

/// `@unchecked Sendable`: see `PingPong`.
@Observable
final class SharedObservablePlayer: @unchecked Sendable {
    var volume = 0.5
}

/// `@unchecked Sendable`: see `PingPong`.
final class SharedPlayer: KeyValueObservable, @unchecked Sendable {
    @Observed var volume = 0.5
}

extension Scenarios {
    /// The scenarios of async sequences, batches and observers of every key.
    static var sequenceScenarios: [Scenario] {
        [
            Scenario(
                name: "asyncstream-handoff", group: .sequences,
                summary: "baseline: yield a Double into a plain AsyncStream, consumer task takes it (one at a time)",
                countsInstructions: false
            ) {
                let state = PingPong()
                let (stream, continuation) = AsyncStream<Double>.makeStream()
                Task.detached {
                    for await value in stream {
                        state.delivered += 1
                        state.last = value
                        state.taken.signal()
                    }
                    state.finished.signal()
                }
                let values = Values()
                return Workload(retaining: [state]) { iterations in
                    state.delivered = 0
                    for i in values.next(iterations) {
                        continuation.yield(Double(i))
                        state.taken.wait()
                    }
                } check: { iterations in
                    state.delivered == iterations && state.last == Double(values.last)
                        ? nil : "consumer took \(state.delivered) values, last \(state.last)"
                }
            },
            Scenario(
                name: "observations-handoff", group: .sequences,
                summary: "baseline: set an @Observable property, Swift's Observations sequence delivers it (one at a time; "
                    + "when it yields the old value, a new one is set after 20 ms, and that wait counts)",
                countsInstructions: false
            ) {
                let state = PingPong()
                let model = SharedObservablePlayer()
                let started = DispatchSemaphore(value: 0)
                Task.detached {
                    var isFirst = true
                    for await value in Observations({ model.volume }) {
                        if isFirst {
                            isFirst = false
                            started.signal()
                            continue
                        }
                        guard state.isExpected(value) else { continue }
                        state.delivered += 1
                        state.last = value
                        state.taken.signal()
                    }
                }
                started.wait()
                let values = Values()
                return Workload(retaining: [state, model]) { iterations in
                    state.delivered = 0
                    for i in values.next(iterations) {
                        // Observations is driven by `willSet` and may read the property before the
                        // new value is stored, then yield the old value and wait for the next change.
                        // When no fresh value arrives, nudge it with another one (at most a few times
                        // per run; counted as the same delivery).
                        var value = Double(i)
                        state.expect(value)
                        model.volume = value
                        while state.taken.wait(timeout: .now() + .milliseconds(20)) == .timedOut {
                            value += 0.5
                            state.expect(value)
                            model.volume = value
                        }
                    }
                } check: { iterations in
                    state.delivered == iterations && state.last >= Double(values.last)
                        ? nil : "consumer took \(state.delivered) values, last \(state.last)"
                }
            },
            Scenario(
                name: "values-handoff", group: .sequences,
                summary: "set an @Observed property, values(for:, [.new]) delivers it to a consumer task (one at a time)",
                baseline: "asyncstream-handoff", comparisons: ["observations-handoff"],
                countsInstructions: false
            ) {
                let state = PingPong()
                let player = SharedPlayer()
                let sequence = player.values(for: \.volume, options: [.new])
                Task.detached {
                    for await value in sequence {
                        state.delivered += 1
                        state.last = value
                        state.taken.signal()
                    }
                }
                let values = Values()
                return Workload(retaining: [state, player]) { iterations in
                    state.delivered = 0
                    for i in values.next(iterations) {
                        player.volume = Double(i)
                        state.taken.wait()
                    }
                } check: { iterations in
                    state.delivered == iterations && state.last == Double(values.last)
                        ? nil : "consumer took \(state.delivered) values, last \(state.last)"
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
