#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: Keeping the optimiser honest

/// The benchmark's black hole: returns its argument through a call the optimiser cannot see
/// through (`@_optimize(none)` keeps the body opaque to inter-procedural analysis too), so an object
/// built by a scenario is not known to the loop that uses it and no store to it can be folded away.
/// Every loop's effect is then read back and checked after the loop.
@inline(never) @_optimize(none)
func opaque<T>(_ value: T) -> T { value }

// MARK: Time

/// This process's resource usage so far (`getrusage(RUSAGE_SELF)`).
func processUsage() -> rusage {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return usage
}

/// Monotonic time in nanoseconds.
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
}

// MARK: Sampling

/// How long and how often to measure.
struct SamplingPlan {
    /// Number of timed samples per scenario.
    var samples: Int
    /// Wall time one sample should take; the batch size is calibrated to it.
    var sampleNanoseconds: UInt64
    /// Wall time spent running the workload, untimed, before sampling (calibration included).
    var warmUpNanoseconds: UInt64
    /// Fresh deliveries per sample of a hand-off scenario (`HandOff`), which is not calibrated:
    /// its figures are the latencies of single deliveries, not a batch's time.
    var deliveriesPerSample: Int

    static let full = SamplingPlan(samples: 31, sampleNanoseconds: 10_000_000, warmUpNanoseconds: 100_000_000, deliveriesPerSample: 323)
    static let quick = SamplingPlan(samples: 7, sampleNanoseconds: 1_000_000, warmUpNanoseconds: 3_000_000, deliveriesPerSample: 30)

    /// Fresh deliveries per hand-off scenario in a run (a full run: 10,013).
    var deliveries: Int { samples * deliveriesPerSample }
}

/// The measured cost of one scenario.
struct Measurement {
    let scenario: String
    let iterationsPerSample: Int
    /// What the percentiles are over, ascending: each sample's ns/op, or (a hand-off) the latency
    /// of every fresh delivery.
    let sortedNanosecondsPerOp: [Double]
    /// One figure per round, in round order: the sample's ns/op, or (a hand-off) the median
    /// latency of the round's fresh deliveries. Ratios pair them round by round (`PairedRatio`).
    let rounds: [Double]
    /// A hand-off's deliveries over the whole run; `nil` for a loop timed as a whole.
    var deliveries: DeliveryTally? = nil

    var p50: Double { percentile(0.50) }
    var p90: Double { percentile(0.90) }
    var p99: Double { percentile(0.99) }

    /// Nearest-rank percentile (with fewer than 100 samples, p99 is the slowest sample).
    func percentile(_ fraction: Double) -> Double {
        let count = sortedNanosecondsPerOp.count
        let rank = Int((fraction * Double(count)).rounded(.up))
        return sortedNanosecondsPerOp[min(max(rank, 1), count) - 1]
    }
}

/// A failed result check: the loop did not do what it claims to measure.
struct CheckFailure: Error, CustomStringConvertible {
    let scenario: String
    let iterations: Int
    let problem: String

    var description: String {
        "\(scenario): result check failed after a loop of \(iterations) iterations: \(problem)"
    }
}

/// Runs `workload` once for `iterations` and checks its result.
func runChecked(_ scenario: Scenario, _ workload: Workload, iterations: Int) throws(CheckFailure) {
    workload.run(iterations)
    if let problem = workload.check(iterations) {
        throw CheckFailure(scenario: scenario.name, iterations: iterations, problem: problem)
    }
}

/// A scenario ready to be sampled: its workload built, warmed up, and a batch size calibrated.
private struct Prepared {
    let scenario: Scenario
    let workload: Workload
    let iterations: Int
    var samples: [Double] = []
    /// A hand-off's deliveries, one tally per round.
    var deliveries: [DeliveryTally] = []
}

/// Builds the workload, warms it up and calibrates a batch size to `plan.sampleNanoseconds`. Every
/// batch's result is checked.
private func prepare(_ scenario: Scenario, plan: SamplingPlan) throws(CheckFailure) -> Prepared {
    let workload = scenario.makeWorkload()
    let warmUpStart = monotonicNanoseconds()
    func timedBatch(_ iterations: Int) throws(CheckFailure) -> Double {
        let start = monotonicNanoseconds()
        workload.run(iterations)
        let end = monotonicNanoseconds()
        if let problem = workload.check(iterations) {
            throw CheckFailure(scenario: scenario.name, iterations: iterations, problem: problem)
        }
        return Double(end - start) / Double(iterations)
    }
    func batchSize(nanosecondsPerOp: Double) -> Int {
        max(1, Int(Double(plan.sampleNanoseconds) / max(nanosecondsPerOp, 0.01)))
    }

    // One-time costs (type metadata, key-path objects, lazy binding) must not be mistaken for the
    // speed of the loop: pay them first, untimed.
    try runChecked(scenario, workload, iterations: 1)

    if let handOff = workload.handOff {
        // Not calibrated: a fixed number of fresh deliveries per sample, after warm-up rounds.
        repeat {
            try runChecked(scenario, workload, iterations: plan.deliveriesPerSample)
        } while monotonicNanoseconds() - warmUpStart < plan.warmUpNanoseconds
        _ = handOff.takeTally()
        return Prepared(scenario: scenario, workload: workload, iterations: plan.deliveriesPerSample)
    }

    // A first estimate: double the batch until it takes a tenth of a sample.
    var iterations = 1
    var nanosecondsPerOp = try timedBatch(iterations)
    while nanosecondsPerOp * Double(iterations) < Double(plan.sampleNanoseconds / 10), iterations < 1 << 30 {
        iterations *= 2
        nanosecondsPerOp = try timedBatch(iterations)
    }
    iterations = batchSize(nanosecondsPerOp: nanosecondsPerOp)

    // Warm up with full batches (at least one), and size the batch from their median speed.
    var estimates: [Double] = []
    repeat {
        estimates.append(try timedBatch(iterations))
    } while monotonicNanoseconds() - warmUpStart < plan.warmUpNanoseconds
    estimates.sort()
    iterations = batchSize(nanosecondsPerOp: estimates[estimates.count / 2])
    return Prepared(scenario: scenario, workload: workload, iterations: iterations)
}

/// Measures `scenarios` with their samples interleaved: each round times one batch of every
/// scenario in turn, so that a busy spell of a shared machine slows a scenario and its baseline
/// alike instead of skewing their ratio. Every batch's result is checked, outside the timed region.
func measure(
    _ scenarios: [Scenario],
    plan: SamplingPlan,
    progress: (String) -> Void = { _ in }
) throws(CheckFailure) -> [String: Measurement] {
    var prepared: [Prepared] = []
    for scenario in scenarios {
        progress("warming up \(scenario.name)")
        prepared.append(try prepare(scenario, plan: plan))
    }
    for round in 0..<plan.samples {
        progress("sampling, round \(round + 1) of \(plan.samples)")
        for index in prepared.indices {
            let entry = prepared[index]
            let start = monotonicNanoseconds()
            entry.workload.run(entry.iterations)
            let end = monotonicNanoseconds()
            if let problem = entry.workload.check(entry.iterations) {
                throw CheckFailure(scenario: entry.scenario.name, iterations: entry.iterations, problem: problem)
            }
            prepared[index].samples.append(Double(end - start) / Double(entry.iterations))
            if let handOff = entry.workload.handOff { prepared[index].deliveries.append(handOff.takeTally()) }
        }
    }
    var measurements: [String: Measurement] = [:]
    for entry in prepared {
        if entry.workload.handOff != nil {
            let tally = entry.deliveries.reduce(into: DeliveryTally()) { $0.add($1) }
            measurements[entry.scenario.name] = Measurement(
                scenario: entry.scenario.name,
                iterationsPerSample: entry.iterations,
                sortedNanosecondsPerOp: tally.freshNanoseconds.sorted(),
                rounds: entry.deliveries.map { percentile($0.freshNanoseconds.sorted(), 0.5) },
                deliveries: tally
            )
        } else {
            measurements[entry.scenario.name] = Measurement(
                scenario: entry.scenario.name,
                iterationsPerSample: entry.iterations,
                sortedNanosecondsPerOp: entry.samples.sorted(),
                rounds: entry.samples
            )
        }
    }
    return measurements
}

/// One scenario's figure over another's, round by round: the harness interleaves their samples,
/// so a busy spell of the machine slows both within a round. Their median is the ratio reported,
/// their range how far the rounds disagree.
struct PairedRatio: Equatable {
    let median: Double
    let lowest: Double
    let highest: Double

    /// Whether the rounds disagree on which side is faster: the range spans 1×.
    var isUnstable: Bool { lowest < 1 && highest > 1 }
}

extension PairedRatio {
    /// The ratios `ours[i] / theirs[i]` of the rounds both have.
    init(_ ours: [Double], over theirs: [Double]) {
        precondition(!ours.isEmpty && ours.count == theirs.count, "paired ratios need the same rounds on both sides")
        let ratios = zip(ours, theirs).map { $0 / $1 }.sorted()
        self.init(median: percentile(ratios, 0.5), lowest: ratios.first!, highest: ratios.last!)
    }
}
