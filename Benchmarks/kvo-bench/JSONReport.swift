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

/// An optional field written as `null` when absent (a synthesized `Encodable` leaves the key out),
/// so that every scenario of the file has the same keys.
@propertyWrapper
struct NullWhenAbsent<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}

private struct JSONMemoryFigure: Encodable {
    let name: String
    let summary: String
    let unit: String
    let count: Int
    let bytes: Double
    @NullWhenAbsent var baseline: String?
    @NullWhenAbsent var baselineBytes: Double?
}

private struct JSONScenario: Encodable {
    let name: String
    let group: String
    let summary: String
    let iterationsPerSample: Int
    let p50: Double
    let p90: Double
    let p99: Double
    @NullWhenAbsent var baseline: String?
    @NullWhenAbsent var baselineP50: Double?
    /// The median of the rounds' paired ratios, and their range.
    @NullWhenAbsent var ratio: Double?
    @NullWhenAbsent var ratioLowest: Double?
    @NullWhenAbsent var ratioHighest: Double?
    /// A hand-off's rounds: fresh deliveries (whose latencies p50, p90 and p99 are over), rounds
    /// whose first delivery was an earlier value, rounds with no delivery in time.
    @NullWhenAbsent var deliveries: JSONDeliveries?
    @NullWhenAbsent var target: String?
    @NullWhenAbsent var targetMet: Bool?
    let comparisons: [JSONComparison]
    @NullWhenAbsent var instructionsPerOp: Double?
}

private struct JSONComparison: Encodable {
    let baseline: String
    let baselineP50: Double
    let ratio: Double
    let ratioLowest: Double
    let ratioHighest: Double

    init(_ comparison: Comparison) {
        baseline = comparison.baseline
        baselineP50 = rounded(comparison.baselineP50)
        ratio = rounded(comparison.ratio.median, digits: 4)
        ratioLowest = rounded(comparison.ratio.lowest, digits: 4)
        ratioHighest = rounded(comparison.ratio.highest, digits: 4)
    }
}

private struct JSONDeliveries: Encodable {
    let fresh: Int
    let staleFirst: Int
    let timeouts: Int
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
                ratio: row.primary.map { rounded($0.ratio.median, digits: 4) },
                ratioLowest: row.primary.map { rounded($0.ratio.lowest, digits: 4) },
                ratioHighest: row.primary.map { rounded($0.ratio.highest, digits: 4) },
                deliveries: row.measurement.deliveries.map {
                    JSONDeliveries(fresh: $0.freshNanoseconds.count, staleFirst: $0.staleFirst, timeouts: $0.timeouts)
                },
                target: target?.text,
                targetMet: target?.isMet,
                comparisons: row.extra.map(JSONComparison.init),
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
