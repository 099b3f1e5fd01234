import Foundation

// The `--json` results file (read back by `compare`).

private struct JSONReport: Encodable {
    let date: String
    let toolchain: String
    let compiler: String
    let machine: Machine
    let mode: String
    let unit = "ns/op"
    let samplesPerScenario: Int
    let scenarios: [JSONScenario]
    /// Bytes per unit; absent where the allocator cannot be asked or no memory scenario was selected.
    let memory: [JSONMemoryFigure]?
}

private struct JSONMemoryFigure: Encodable {
    let name: String
    let summary: String
    let unit: String
    let count: Int
    let bytes: Double
    let baseline: String?
    let baselineBytes: Double?

    private enum CodingKeys: String, CodingKey {
        case name, summary, unit, count, bytes, baseline, baselineBytes
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(summary, forKey: .summary)
        try container.encode(unit, forKey: .unit)
        try container.encode(count, forKey: .count)
        try container.encode(bytes, forKey: .bytes)
        try container.encode(baseline, forKey: .baseline)
        try container.encode(baselineBytes, forKey: .baselineBytes)
    }
}

private struct JSONScenario: Encodable {
    let name: String
    let group: String
    let summary: String
    let iterationsPerSample: Int
    let p50: Double
    let p90: Double
    let p99: Double
    let baseline: String?
    let baselineP50: Double?
    let ratio: Double?
    let target: String?
    let targetMet: Bool?
    let comparisons: [JSONComparison]
    let instructionsPerOp: Double?

    private enum CodingKeys: String, CodingKey {
        case name, group, summary, iterationsPerSample, p50, p90, p99
        case baseline, baselineP50, ratio, target, targetMet, comparisons, instructionsPerOp
    }

    // Written by hand so that absent values appear as `null` rather than disappear.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(group, forKey: .group)
        try container.encode(summary, forKey: .summary)
        try container.encode(iterationsPerSample, forKey: .iterationsPerSample)
        try container.encode(p50, forKey: .p50)
        try container.encode(p90, forKey: .p90)
        try container.encode(p99, forKey: .p99)
        try container.encode(baseline, forKey: .baseline)
        try container.encode(baselineP50, forKey: .baselineP50)
        try container.encode(ratio, forKey: .ratio)
        try container.encode(target, forKey: .target)
        try container.encode(targetMet, forKey: .targetMet)
        try container.encode(comparisons, forKey: .comparisons)
        try container.encode(instructionsPerOp, forKey: .instructionsPerOp)
    }
}

private struct JSONComparison: Encodable {
    let baseline: String
    let baselineP50: Double
    let ratio: Double
}

private func rounded(_ value: Double, digits: Int = 3) -> Double {
    let scale = pow(10, Double(digits))
    return (value * scale).rounded() / scale
}

/// Writes the results of a run as JSON to `path` (toolchain, machine, date, ns/op, ratios, bytes, Ir/op).
func writeJSONReport(_ rows: [ReportRow], memory: [MemoryFigure]?, plan: SamplingPlan, mode: String, toolchain: String, to path: String) {
    let report = JSONReport(
        date: ISO8601DateFormatter().string(from: Date()),
        toolchain: toolchain,
        compiler: compiledWith,
        machine: .current(),
        mode: mode,
        samplesPerScenario: plan.samples,
        scenarios: rows.map { row in
            let target = row.target
            return JSONScenario(
                name: row.scenario.name,
                group: row.scenario.group.rawValue,
                summary: row.scenario.summary,
                iterationsPerSample: row.measurement.iterationsPerSample,
                p50: rounded(row.measurement.p50),
                p90: rounded(row.measurement.p90),
                p99: rounded(row.measurement.p99),
                baseline: row.primary?.baseline,
                baselineP50: row.primary.map { rounded($0.baselineP50) },
                ratio: row.primary.map { rounded($0.ratio, digits: 4) },
                target: target?.text,
                targetMet: target?.isMet,
                comparisons: row.extra.map {
                    JSONComparison(baseline: $0.baseline, baselineP50: rounded($0.baselineP50), ratio: rounded($0.ratio, digits: 4))
                },
                instructionsPerOp: row.instructionsPerOp.map { rounded($0, digits: 1) }
            )
        },
        memory: memory.map { figures in
            figures.map { figure in
                JSONMemoryFigure(
                    name: figure.scenario.name, summary: figure.scenario.summary, unit: figure.scenario.unit,
                    count: figure.scenario.count, bytes: rounded(figure.bytes, digits: 1),
                    baseline: figure.scenario.baseline, baselineBytes: figure.baselineBytes.map { rounded($0, digits: 1) }
                )
            }
        }
    )
    writeJSON(report, to: path)
}
