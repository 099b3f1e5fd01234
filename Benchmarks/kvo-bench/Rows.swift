/// A scenario's p50 against another scenario's p50, measured in the same run.
struct Comparison {
    let baseline: String
    let baselineP50: Double
    /// scenario p50 / baseline p50.
    let ratio: Double
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
            return ("≤ \(formatNumber(limit))×", primary.ratio <= limit)
        case .nanosecondsAtMost(let limit)?:
            return ("≤ \(formatNumber(limit)) ns", measurement.p50 <= limit)
        case nil:
            return nil
        }
    }
}

func makeRows(_ scenarios: [Scenario], _ measurements: [String: Measurement]) -> [ReportRow] {
    func compare(_ p50: Double, with name: String) -> Comparison? {
        guard let baseline = measurements[name] else { return nil }
        return Comparison(baseline: name, baselineP50: baseline.p50, ratio: p50 / baseline.p50)
    }
    return scenarios.compactMap { scenario in
        guard let measurement = measurements[scenario.name] else { return nil }
        return ReportRow(
            scenario: scenario,
            measurement: measurement,
            primary: scenario.baseline.flatMap { compare(measurement.p50, with: $0) },
            extra: scenario.comparisons.compactMap { compare(measurement.p50, with: $0) }
        )
    }
}
