import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: Rows

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

    /// The target as text, e.g. "≤ 2×", and whether this run met it.
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

// MARK: Number formatting

/// Nanoseconds with precision that suits their size.
func formatNanoseconds(_ value: Double) -> String {
    if value < 10 { return String(format: "%.2f", value) }
    if value < 1000 { return String(format: "%.1f", value) }
    return String(format: "%.0f", value)
}

func formatRatio(_ ratio: Double) -> String {
    ratio < 0.1 ? String(format: "%.3f×", ratio) : String(format: "%.2f×", ratio)
}

func formatNumber(_ value: Double) -> String {
    value == value.rounded() ? String(Int(value)) : String(format: "%g", value)
}

private func timesFaster(_ ratio: Double) -> String {
    let factor = 1 / ratio
    return factor < 100 ? String(format: "%.1f× faster", factor) : String(format: "%.0f× faster", factor)
}

// MARK: Text and Markdown tables

private let baseHeaders = ["scenario", "p50 ns", "p90 ns", "p99 ns", "baseline", "baseline p50", "ratio", "target"]

/// The columns: an "Ir/op" column after p99 when some row has an instruction count.
private func headers(_ rows: [ReportRow]) -> (names: [String], rightAligned: Set<Int>) {
    rows.contains { $0.instructionsPerOp != nil }
        ? (Array(baseHeaders[..<4]) + ["Ir/op"] + Array(baseHeaders[4...]), [1, 2, 3, 4, 6, 7])
        : (baseHeaders, [1, 2, 3, 5, 6])
}

/// The cells of a group's table: one line per scenario, plus one per extra comparison.
private func cells(of rows: [ReportRow], withInstructions: Bool) -> [[String]] {
    var lines: [[String]] = []
    for row in rows {
        let m = row.measurement
        var line = [row.scenario.name, formatNanoseconds(m.p50), formatNanoseconds(m.p90), formatNanoseconds(m.p99)]
        if withInstructions { line.append(row.instructionsPerOp.map { formatFigure($0, .instructions) } ?? "") }
        if let primary = row.primary {
            line += [primary.baseline, formatNanoseconds(primary.baselineP50), formatRatio(primary.ratio)]
        } else {
            line += ["—", "", ""]
        }
        if let target = row.target {
            line.append("\(target.text) \(target.isMet ? "✓" : "✗")")
        } else {
            line.append("")
        }
        lines.append(line)
        for comparison in row.extra {
            lines.append([
                "  ↳ same, vs", "", "", ""] + (withInstructions ? [""] : []) + [
                comparison.baseline, formatNanoseconds(comparison.baselineP50), formatRatio(comparison.ratio),
                comparison.ratio < 1 ? timesFaster(comparison.ratio) : "",
            ])
        }
    }
    return lines
}

private func groups(of rows: [ReportRow]) -> [(Scenario.Group, [ReportRow])] {
    Scenario.Group.allCases.compactMap { group in
        let members = rows.filter { $0.scenario.group == group }
        return members.isEmpty ? nil : (group, members)
    }
}

func textReport(_ rows: [ReportRow]) -> String {
    let (headers, rightAligned) = headers(rows)
    var output = ""
    for (group, members) in groups(of: rows) {
        output += "\(group.rawValue)\n"
        output += alignedTable([headers] + cells(of: members, withInstructions: headers.count > baseHeaders.count), rightAligned: rightAligned)
        output += "\n"
    }
    return output
}

func markdownReport(_ rows: [ReportRow]) -> String {
    let (headers, rightAligned) = headers(rows)
    var output = ""
    for (group, members) in groups(of: rows) {
        output += "### \(group.rawValue)\n\n"
        output += "| " + headers.joined(separator: " | ") + " |\n"
        output += "|" + headers.indices.map { rightAligned.contains($0) ? "---:" : "---" }.joined(separator: "|") + "|\n"
        for line in cells(of: members, withInstructions: headers.count > baseHeaders.count) {
            let escaped = line.map { $0.isEmpty ? " " : $0.replacingOccurrences(of: "|", with: "\\|") }
            output += "| " + escaped.joined(separator: " | ") + " |\n"
        }
        output += "\n"
    }
    return output
}

// MARK: Environment

struct Machine: Encodable {
    let system: String
    let release: String
    let architecture: String
    let cpuModel: String?
    let processors: Int

    static func current() -> Machine {
        var name = utsname()
        uname(&name)
        func string<T>(_ field: inout T) -> String {
            withUnsafePointer(to: &field) {
                $0.withMemoryRebound(to: CChar.self, capacity: MemoryLayout<T>.size) { String(cString: $0) }
            }
        }
        return Machine(
            system: string(&name.sysname),
            release: string(&name.release),
            architecture: string(&name.machine),
            cpuModel: cpuModel(),
            processors: ProcessInfo.processInfo.activeProcessorCount
        )
    }

    var description: String {
        "\(system) \(release) \(architecture), \(processors) CPUs\(cpuModel.map { ", \($0)" } ?? "")"
    }

    private static func cpuModel() -> String? {
        guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for line in info.split(separator: "\n") where line.hasPrefix("model name") {
            return line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        return nil
    }
}

/// The compiler that built this executable, as far as `#if compiler` can tell.
let compiledWith: String = {
    #if compiler(>=6.5)
    "Swift compiler >= 6.5"
    #elseif compiler(>=6.4)
    "Swift compiler 6.4.x"
    #elseif compiler(>=6.3.1)
    "Swift compiler 6.3.x (>= 6.3.1)"
    #elseif compiler(>=6.3)
    "Swift compiler 6.3"
    #elseif compiler(>=6.2)
    "Swift compiler 6.2.x"
    #elseif compiler(>=6.1)
    "Swift compiler 6.1.x"
    #else
    "Swift compiler 6.0.x"
    #endif
}()

/// The first line of `swift --version` of the `swift` on `PATH`, or `nil` if it cannot be run.
func toolchainVersion() -> String? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["swift", "--version"]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    do {
        try process.run()
    } catch {
        return nil
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { return nil }
    return String(decoding: data, as: UTF8.self)
        .split(separator: "\n").first.map { $0.trimmingCharacters(in: .whitespaces) }
}

// MARK: JSON

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

func jsonReport(_ rows: [ReportRow], memory: [MemoryFigure]?, plan: SamplingPlan, mode: String) throws -> Data {
    let report = JSONReport(
        date: ISO8601DateFormatter().string(from: Date()),
        toolchain: toolchainVersion() ?? compiledWith,
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
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    return try encoder.encode(report)
}
