import Foundation

// MARK: Reading a results file

/// What `compare` reads from a results file: the `--json` output of a benchmark run or of `gate`.
/// Every figure is optional so that a timing run (p50, no Ir/op) and a gate run (Ir/op, no p50) can
/// be read alike.
struct ResultsFile: Decodable {
    struct Scenario: Decodable {
        let name: String
        let p50: Double?
        let baseline: String?
        let ratio: Double?
        let instructionsPerOp: Double?
    }

    struct MemoryFigure: Decodable {
        let name: String
        let bytes: Double?
    }

    let date: String?
    let toolchain: String?
    let scenarios: [Scenario]
    let memory: [MemoryFigure]?
}

/// A results file that cannot be used, with the file and the cause.
struct ResultsFileError: Error, CustomStringConvertible {
    let path: String
    let cause: String

    var description: String { "cannot read '\(path)': \(cause)" }
}

func readResultsFile(_ path: String) throws(ResultsFileError) -> ResultsFile {
    let data: Data
    do {
        data = try Data(contentsOf: URL(fileURLWithPath: path))
    } catch {
        let cause = FileManager.default.fileExists(atPath: path) ? "it cannot be opened (\(error.localizedDescription))" : "no such file"
        throw ResultsFileError(path: path, cause: cause)
    }
    do {
        return try JSONDecoder().decode(ResultsFile.self, from: data)
    } catch let error as DecodingError {
        throw ResultsFileError(path: path, cause: "not a kvo-bench results file: \(describe(error))")
    } catch {
        throw ResultsFileError(path: path, cause: "not a kvo-bench results file: \(error)")
    }
}

private func describe(_ error: DecodingError) -> String {
    func at(_ path: [any CodingKey]) -> String {
        path.isEmpty ? "" : " at '\(path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: "."))'"
    }
    switch error {
    case .dataCorrupted(let context):
        return "invalid JSON\(at(context.codingPath))"
    case .keyNotFound(let key, let context):
        return "missing '\(key.stringValue)'\(at(context.codingPath))"
    case .typeMismatch(_, let context), .valueNotFound(_, let context):
        return "unexpected value\(at(context.codingPath)): \(context.debugDescription)"
    @unknown default:
        return "\(error)"
    }
}

// MARK: Comparing two runs

/// One figure of one scenario in both runs.
struct FigureChange {
    enum Kind: String {
        case instructions = "Ir/op"
        case nanoseconds = "p50 ns"
        case bytes = "bytes"
    }

    let scenario: String
    let kind: Kind
    let old: Double
    let new: Double
    /// Whether this figure decides if the scenario regressed (Ir/op when both runs have it, else p50).
    let isDeciding: Bool

    /// The change in percent of the old value (positive: slower or bigger).
    var percent: Double { old == 0 ? (new == 0 ? 0 : .infinity) : (new / old - 1) * 100 }
}

/// The ratio of a scenario to its baseline in both runs.
struct RatioChange {
    let scenario: String
    let baseline: String
    let old: Double
    let new: Double
}

struct ComparisonResult {
    var figures: [FigureChange] = []
    var ratios: [RatioChange] = []
    var onlyInOld: [String] = []
    var onlyInNew: [String] = []

    /// The deciding figures that grew by more than `thresholdPercent`.
    func regressions(thresholdPercent: Double) -> [FigureChange] {
        figures.filter { $0.isDeciding && $0.percent > thresholdPercent }
    }
}

/// Compares every scenario present in both runs. A scenario's instruction count decides whether it
/// regressed when both runs measured it (it does not drift with machine load); its p50 otherwise.
/// Memory figures are compared in bytes.
func compareResults(old: ResultsFile, new: ResultsFile) -> ComparisonResult {
    var result = ComparisonResult()
    let newByName = Dictionary(new.scenarios.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    let oldNames = Set(old.scenarios.map(\.name))
    for before in old.scenarios {
        guard let after = newByName[before.name] else {
            result.onlyInOld.append(before.name)
            continue
        }
        let hasInstructions = before.instructionsPerOp != nil && after.instructionsPerOp != nil
        if let oldIr = before.instructionsPerOp, let newIr = after.instructionsPerOp {
            result.figures.append(FigureChange(scenario: before.name, kind: .instructions, old: oldIr, new: newIr, isDeciding: true))
        }
        if let oldP50 = before.p50, let newP50 = after.p50 {
            result.figures.append(
                FigureChange(scenario: before.name, kind: .nanoseconds, old: oldP50, new: newP50, isDeciding: !hasInstructions))
        }
        if let baseline = before.baseline, baseline == after.baseline, let oldRatio = before.ratio, let newRatio = after.ratio {
            result.ratios.append(RatioChange(scenario: before.name, baseline: baseline, old: oldRatio, new: newRatio))
        }
    }
    result.onlyInNew = new.scenarios.map(\.name).filter { !oldNames.contains($0) }

    let newMemory = Dictionary((new.memory ?? []).map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    for before in old.memory ?? [] {
        guard let oldBytes = before.bytes, let newBytes = newMemory[before.name]?.bytes else { continue }
        result.figures.append(FigureChange(scenario: before.name, kind: .bytes, old: oldBytes, new: newBytes, isDeciding: true))
    }
    return result
}

// MARK: Printing

func formatFigure(_ value: Double, _ kind: FigureChange.Kind) -> String {
    switch kind {
    case .nanoseconds: formatNanoseconds(value)
    case .instructions, .bytes: value >= 100 ? String(format: "%.0f", value) : String(format: "%.1f", value)
    }
}

private func formatPercent(_ percent: Double) -> String {
    percent.isInfinite ? "+∞%" : String(format: "%+.1f%%", percent)
}

func comparisonReport(_ result: ComparisonResult, oldPath: String, newPath: String, thresholdPercent: Double) -> String {
    var output =
        "kvo-bench compare: \(oldPath) → \(newPath) (regression: a deciding figure more than "
        + "\(formatNumber(thresholdPercent))% higher; Ir/op decides where both runs have it, p50 otherwise)\n\n"
    let header = ["scenario", "figure", "old", "new", "change", ""]
    var lines: [[String]] = []
    for figure in result.figures {
        let mark: String
        if figure.isDeciding && figure.percent > thresholdPercent {
            mark = "REGRESSION"
        } else if figure.isDeciding && figure.percent < -thresholdPercent {
            mark = "improved"
        } else {
            mark = figure.isDeciding ? "" : "(not deciding)"
        }
        lines.append([
            figure.scenario, figure.kind.rawValue, formatFigure(figure.old, figure.kind),
            formatFigure(figure.new, figure.kind), formatPercent(figure.percent), mark,
        ])
    }
    output += alignedTable([header] + lines, rightAligned: [2, 3, 4])
    if !result.ratios.isEmpty {
        output += "\nratios to baselines (same run each):\n"
        let ratioLines = result.ratios.map { change in
            [
                change.scenario, "/ \(change.baseline)", formatRatio(change.old), formatRatio(change.new),
                formatPercent((change.new / change.old - 1) * 100),
            ]
        }
        output += alignedTable([["scenario", "baseline", "old", "new", "change"]] + ratioLines, rightAligned: [2, 3, 4])
    }
    if !result.onlyInOld.isEmpty { output += "\nonly in \(oldPath): \(result.onlyInOld.joined(separator: ", "))\n" }
    if !result.onlyInNew.isEmpty { output += "\nonly in \(newPath): \(result.onlyInNew.joined(separator: ", "))\n" }
    let regressions = result.regressions(thresholdPercent: thresholdPercent)
    output +=
        regressions.isEmpty
        ? "\nno regression beyond \(formatNumber(thresholdPercent))% (\(result.figures.filter(\.isDeciding).count) figures compared)\n"
        : "\n\(regressions.count) regression\(regressions.count == 1 ? "" : "s") beyond \(formatNumber(thresholdPercent))%: "
            + regressions.map { "\($0.scenario) (\($0.kind.rawValue) \(formatPercent($0.percent)))" }.joined(separator: ", ") + "\n"
    return output
}

/// A plain-text table with columns padded to their widest cell and a rule under the header.
func alignedTable(_ lines: [[String]], rightAligned: Set<Int>) -> String {
    guard let header = lines.first else { return "" }
    let widths = header.indices.map { column in lines.map { $0[column].count }.max()! }
    var output = ""
    for (index, line) in lines.enumerated() {
        let padded = line.indices.map { column in
            let padding = String(repeating: " ", count: widths[column] - line[column].count)
            return rightAligned.contains(column) ? padding + line[column] : line[column] + padding
        }
        var text = padded.joined(separator: "  ")
        while text.last == " " { text.removeLast() }
        output += text + "\n"
        if index == 0 {
            output += widths.filter { $0 > 0 }.map { String(repeating: "-", count: $0) }.joined(separator: "  ") + "\n"
        }
    }
    return output
}
