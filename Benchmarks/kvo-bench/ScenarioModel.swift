// The scenario model: a named operation and its workload (the loop and the check of its result).

// MARK: Scenario model

/// One benchmark: a named operation, timed per iteration.
struct Scenario {
    enum Group: String, CaseIterable {
        case baselines = "Baselines"
        case setPath = "Set path"
        case dependentAndChains = "Dependent keys and chains"
        case handOff = "Async sequences: a value handed to a consumer task"
        case sequences = "Batches, observers of every key"
        case scaling = "Scaling and contention"
        case registration = "Registration"
        case progress = "Progress trees"
        case defaults = "Defaults store (ObservableDefaults vs Foundation UserDefaults)"
    }

    enum Target {
        /// p50 at most this multiple of the baseline's p50.
        case ratioAtMost(Double)
        /// p50 at most this many nanoseconds.
        case nanosecondsAtMost(Double)
    }

    let name: String
    let group: Group
    let summary: String
    /// The scenario this one's ratio is computed against.
    var baseline: String? = nil
    var target: Target? = nil
    /// Further scenarios to compare against, shown as "how many times faster" rows.
    var comparisons: [String] = []
    /// Where this scenario's p50 appears on the `--svg` scaling chart, if anywhere.
    var chart: [ChartPoint] = []
    /// Whether `--callgrind` counts this scenario's instructions (not for a scenario that waits for
    /// another thread with a timeout: under valgrind's serialised threads it would take minutes).
    var countsInstructions = true
    /// Builds the objects (outside the timed region) and returns the loop.
    let makeWorkload: () -> Workload

    /// This scenario's name and those of the scenarios its ratios need.
    var dependencies: [String] {
        (baseline.map { [$0] } ?? []) + comparisons
    }
}

/// The loop of a scenario and the check of its result.
final class Workload {
    /// Runs the operation `iterations` times.
    let run: (_ iterations: Int) -> Void
    /// Called after `run(iterations)`: a description of what went wrong, or `nil` if the loop did
    /// exactly what it claims to measure.
    let check: (_ iterations: Int) -> String?
    /// Objects that must live as long as the loop (observation tokens).
    let retained: [AnyObject]
    /// Where a hand-off scenario's loop records each value's delivery (its iterations are fresh
    /// deliveries, and its figures their latencies); `nil` for a loop timed as a whole.
    let handOff: HandOff?

    init(
        retaining retained: [AnyObject] = [],
        handOff: HandOff? = nil,
        run: @escaping (_ iterations: Int) -> Void,
        check: @escaping (_ iterations: Int) -> String?
    ) {
        self.retained = retained
        self.handOff = handOff
        self.run = run
        self.check = check
    }
}

extension Workload {
    /// The usual loop: each run resets `counter` (if any), then `body` performs the operation once
    /// per value of a range of fresh integers (see `Values`), one value per iteration; `check` judges
    /// the run from its iteration count and the last value handed out.
    ///
    /// `body` is called once per run, not per iteration: the measured loop is the one it contains.
    static func loop(
        retaining retained: [AnyObject] = [],
        resetting counter: Counter? = nil,
        _ body: @escaping (_ values: Range<Int>) -> Void,
        check: @escaping (_ iterations: Int, _ last: Int) -> String?
    ) -> Workload {
        let values = Values()
        return Workload(retaining: retained) { iterations in
            counter?.reset()
            body(values.next(iterations))
        } check: { iterations in
            check(iterations, values.last)
        }
    }
}
