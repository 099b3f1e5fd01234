/// A scenario against another measured in the same run, round by round.
struct Comparison {
    let baseline: String
    let baselineP50: Double
    /// This scenario's figure over the baseline's, paired round by round.
    let ratio: PairedRatio
}

/// One scenario's line of the report, with its ratios and target.
struct ReportRow {
    let scenario: Scenario
    let measurement: Measurement
    let primary: Comparison?
    let extra: [Comparison]
    /// Instructions per operation, when counted with callgrind (`--callgrind`).
    var instructionsPerOp: Double? = nil

    var implementation: Implementation { Implementation(scenario: scenario.name) }

    /// The target as text, e.g. "≤ 2×", and whether this run met it (shown by `gate --targets` only).
    var target: (text: String, isMet: Bool)? {
        switch scenario.target {
        case .ratioAtMost(let limit)?:
            guard let primary else { return nil }
            return ("≤ \(formatNumber(limit))×", primary.ratio.median <= limit)
        case .nanosecondsAtMost(let limit)?:
            return ("≤ \(formatNumber(limit)) ns", measurement.p50 <= limit)
        case nil:
            return nil
        }
    }
}

func makeRows(_ scenarios: [Scenario], _ measurements: [String: Measurement]) -> [ReportRow] {
    func compare(_ measurement: Measurement, with name: String) -> Comparison? {
        guard let baseline = measurements[name] else { return nil }
        return Comparison(baseline: name, baselineP50: baseline.p50, ratio: PairedRatio(measurement.rounds, over: baseline.rounds))
    }
    return scenarios.compactMap { scenario in
        guard let measurement = measurements[scenario.name] else { return nil }
        return ReportRow(
            scenario: scenario,
            measurement: measurement,
            primary: scenario.baseline.flatMap { compare(measurement, with: $0) },
            extra: scenario.comparisons.compactMap { compare(measurement, with: $0) }
        )
    }
}
