import Foundation
import KVOToolArguments

// The CI regression gate: instructions per operation of the hot paths against
// Benchmarks/thresholds.json, and (with --targets) this package's own timing targets.

/// What `gate --json` writes: readable by `compare`.
private struct GateJSON: Encodable {
    struct Figure: Encodable {
        let name: String
        let instructionsPerOp: Double
    }

    let date: String
    let toolchain: String
    let machine: Machine
    let mode = "callgrind"
    let unit = "instructions per op"
    let scenarios: [Figure]
}

func gate(_ options: GateOptions) -> Never {
    let thresholdsPath = options.thresholdsPath
    let thresholds: Thresholds
    do throws(ResultsFileError) {
        thresholds = try readThresholds(thresholdsPath)
    } catch {
        fail("\(error) (run from the package root, or pass --thresholds FILE)", status: 1)
    }
    guard let valgrind = InstructionCounter.findValgrind() else {
        fail("gate: valgrind is not installed (Debian/Ubuntu: apt-get install -y valgrind; or set VALGRIND=/path/to/valgrind)", status: 1)
    }
    let counter = InstructionCounter(valgrind: valgrind)
    let verdict: GateVerdict
    let measured: [(name: String, instructionsPerOp: Double)]
    do throws(InstructionCounter.Failure) {
        (verdict, measured) = try runGate(thresholds: thresholds, thresholdsPath: thresholdsPath, counter: counter, only: options.filters)
    } catch {
        fail("gate: \(error)", status: 1)
    }
    if let jsonPath = options.jsonPath {
        writeJSON(
            GateJSON(
                date: ISO8601DateFormatter().string(from: Date()), toolchain: toolchainVersion() ?? compiledWith,
                machine: .current(),
                scenarios: measured.map { .init(name: $0.name, instructionsPerOp: ($0.instructionsPerOp * 10).rounded() / 10) }
            ), to: jsonPath)
    }
    if options.update {
        guard verdict != .skipped else { fail("gate --update: nothing measured on this architecture", status: 1) }
        writeFile(
            thresholdsFile(measured, tolerancePercent: thresholds.tolerancePercent, valgrindVersion: counter.version()), to: thresholdsPath)
        print("thresholds rewritten: \(thresholdsPath)")
        exit(0)
    }
    if options.targets { printTimingTargets(filters: options.filters) }
    exit(verdict == .regressed ? regressionStatus : 0)
}

// MARK: Timing targets

/// Times the scenarios that carry a target (and their baselines) and prints whether each met it.
/// Informative only: timings drift with the machine's load, so they never fail the gate.
private func printTimingTargets(filters: [String]) {
    let all = Scenarios.list
    let targeted = all.filter { $0.target != nil && (filters.isEmpty || filters.contains(where: $0.name.contains)) }
    let needed = Set(targeted.map(\.name) + targeted.flatMap(\.dependencies))
    let selected = all.filter { needed.contains($0.name) }
    let measurements: [String: Measurement]
    do throws(CheckFailure) {
        measurements = try measure(selected, plan: .full)
    } catch {
        fail(error.description, status: 1)
    }
    var lines: [[String]] = [["implementation", "scenario", "p50 ns", "baseline", "baseline p50", "ratio", "target", ""]]
    for row in makeRows(targeted, measurements) {
        guard let target = row.target else { continue }
        lines.append([
            row.implementation.rawValue, row.scenario.name, formatNanoseconds(row.measurement.p50),
            row.primary?.baseline ?? "—", row.primary.map { formatNanoseconds($0.baselineP50) } ?? "",
            row.primary.map { formatRatio($0.ratio.median) } ?? "", target.text, target.isMet ? "✓" : "✗ missed",
        ])
    }
    print("\nTiming targets of this package (p50 of \(SamplingPlan.full.samples) samples; informative, not gated: timings drift with load)")
    print(alignedTable(lines, rightAligned: [2, 4, 5]), terminator: "")
}

/// The checked-in instruction budgets of the hot paths (`Benchmarks/thresholds.json`).
struct Thresholds: Decodable {
    struct Gated: Decodable {
        let scenario: String
        let instructionsPerOp: Double
    }

    /// First line of `swift --version` of the toolchain the figures were taken with.
    let toolchain: String
    /// `uname -m` of the machine they were taken on: instruction counts of different instruction
    /// sets cannot be compared.
    let architecture: String
    /// The machine, for people: CPU model, system, valgrind version.
    let machine: String
    let date: String
    /// How much more than its threshold a scenario may cost before the gate fails.
    let tolerancePercent: Double
    let gated: [Gated]
}

/// What `gate` found.
enum GateVerdict {
    case passed
    case regressed
    case skipped
}

/// Measures every gated scenario and compares it with its threshold: a scenario fails when its Ir/op
/// exceeds the threshold by more than the tolerance. Prints the table, returns the verdict and the
/// measured figures.
func runGate(
    thresholds: Thresholds,
    thresholdsPath: String,
    counter: InstructionCounter,
    only filters: [String]
) throws(InstructionCounter.Failure) -> (GateVerdict, [(name: String, instructionsPerOp: Double)]) {
    let machine = Machine.current()
    let toolchain = toolchainVersion() ?? compiledWith
    print(
        "kvo-bench gate: instructions per operation (callgrind, (Ir(\(counter.longIterations)) − Ir(\(counter.shortIterations)))"
            + " / \(counter.longIterations - counter.shortIterations)) against \(thresholdsPath), tolerance \(formatNumber(thresholds.tolerancePercent))%"
    )
    print("thresholds taken with: \(thresholds.toolchain); \(thresholds.architecture); \(thresholds.machine); \(thresholds.date)")
    print("measuring with:        \(toolchain); \(machine.architecture); \(counter.version() ?? "valgrind (version unknown)")")
    guard machine.architecture == thresholds.architecture else {
        printBanner(
            """
            SKIPPED: the thresholds were taken on \(thresholds.architecture), this machine is \(machine.architecture).
            Instruction counts of different instruction sets cannot be compared. Take thresholds for this
            architecture with 'kvo-bench gate --update' (in a file of its own, '--thresholds FILE').
            """)
        return (.skipped, [])
    }
    let toolchainDiffers = toolchain != thresholds.toolchain
    if toolchainDiffers {
        printBanner(
            """
            WARNING: the thresholds were taken with '\(thresholds.toolchain)',
            this is '\(toolchain)'. A different compiler may legitimately change instruction
            counts; comparing anyway. If the gate fails because of the toolchain alone, re-seed the
            thresholds with 'kvo-bench gate --update' in the commit that changes the toolchain.
            """)
    }

    var lines: [[String]] = [["scenario", "threshold Ir/op", "measured Ir/op", "change", "verdict"]]
    var measured: [(name: String, instructionsPerOp: Double)] = []
    var failures: [String] = []
    var creeping: [String] = []
    for gated in thresholds.gated where filters.isEmpty || filters.contains(where: { gated.scenario.contains($0) }) {
        let value = try counter.instructionsPerOp(gated.scenario)
        measured.append((gated.scenario, value))
        let percent = (value / gated.instructionsPerOp - 1) * 100
        let verdict: String
        if percent > thresholds.tolerancePercent {
            verdict = "FAIL (more than \(formatNumber(thresholds.tolerancePercent))% over)"
            failures.append(gated.scenario)
        } else if percent < -thresholds.tolerancePercent {
            verdict = "ok, cheaper: lower the threshold (gate --update)"
        } else if value > gated.instructionsPerOp + max(creepAllowance, gated.instructionsPerOp * creepAllowanceFraction) {
            // Within the tolerance, but dearer than the threshold: a regression the tolerance hides
            // (a threshold is raised only for an intended cost, so this is a slower hot path, not noise).
            verdict = "ok, but \(String(format: "%.1f", value - gated.instructionsPerOp)) Ir/op over the threshold"
            creeping.append(gated.scenario)
        } else {
            verdict = "ok"
        }
        lines.append([
            gated.scenario, formatFigure(gated.instructionsPerOp, .instructions), String(format: "%.1f", value),
            String(format: "%+.1f%%", percent), verdict,
        ])
    }
    print("")
    print(alignedTable(lines, rightAligned: [1, 2, 3]), terminator: "")
    print("")
    if failures.isEmpty {
        print(
            "gate passed: \(measured.count) scenario\(measured.count == 1 ? "" : "s") within \(formatNumber(thresholds.tolerancePercent))% of the thresholds"
        )
        if !creeping.isEmpty {
            print(
                "warning: \(creeping.joined(separator: ", ")) cost\(creeping.count == 1 ? "s" : "") more than \(thresholdsPath) "
                    + "allows without tolerance: find what got dearer, or re-seed with gate --update if it is intended"
            )
        }
        return (.passed, measured)
    }
    printBanner(
        """
        GATE FAILED: \(failures.joined(separator: ", ")) cost\(failures.count == 1 ? "s" : "") more than \
        \(formatNumber(thresholds.tolerancePercent))% over \(thresholdsPath).\(toolchainDiffers ? "\nNote: the toolchain differs from the thresholds' (see the warning above)." : "")
        Look with: valgrind --tool=callgrind .build/release/kvo-bench run SCENARIO --iterations 60000 and
        callgrind_annotate. If the cost is intended, update the thresholds: kvo-bench gate --update.
        """)
    return (.regressed, measured)
}

/// How far above its threshold a scenario may measure before the gate warns: 2.5 Ir/op or 0.25%,
/// whichever is more. A few scenarios vary by a few instructions from run to run
/// (`observed-keys-100` by 2, the defaults reads by up to 5), which is not a regression.
private let creepAllowance = 2.5
private let creepAllowanceFraction = 0.0025

private func printBanner(_ text: String) {
    let rule = String(repeating: "!", count: 78)
    print("\n\(rule)\n\(text)\n\(rule)\n")
}

func readThresholds(_ path: String) throws(ResultsFileError) -> Thresholds {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw ResultsFileError(path: path, cause: FileManager.default.fileExists(atPath: path) ? "it cannot be opened" : "no such file")
    }
    do {
        return try JSONDecoder().decode(Thresholds.self, from: data)
    } catch {
        throw ResultsFileError(path: path, cause: "not a thresholds file: \(error)")
    }
}

/// The thresholds file with `measured` as the new figures, the scenarios in the same order, one per
/// line (adding a gated scenario is adding one line).
func thresholdsFile(
    _ measured: [(name: String, instructionsPerOp: Double)],
    tolerancePercent: Double,
    valgrindVersion: String?
) -> String {
    let machine = Machine.current()
    let date = isoDay()
    func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
    let lines = measured.map { "    { \"scenario\": \(quoted($0.name)), \"instructionsPerOp\": \(Int($0.instructionsPerOp.rounded())) }" }
    return """
        {
          "toolchain": \(quoted(toolchainVersion() ?? compiledWith)),
          "architecture": \(quoted(machine.architecture)),
          "machine": \(quoted("\(machine.description); \(valgrindVersion ?? "valgrind")")),
          "date": \(quoted(date)),
          "tolerancePercent": \(formatNumber(tolerancePercent)),
          "gated": [
        \(lines.joined(separator: ",\n"))
          ]
        }

        """
}
