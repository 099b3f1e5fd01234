import Dispatch
import Foundation

// MARK: Counting instructions

/// Counts the instructions of a scenario's loop with callgrind: this executable runs
/// `run SCENARIO --iterations N` under `valgrind --tool=callgrind` for a short and a long loop, and
/// Ir/op = (Ir(long) − Ir(short)) / (long − short), so start-up and set-up cancel out. Deterministic
/// (to a few instructions per million) however busy the machine is.
struct InstructionCounter {
    let valgrind: String
    var shortIterations = 10_000
    var longIterations = 60_000
    /// A run that takes longer is killed and reported (a hung valgrind must not hang CI).
    var timeoutSeconds = 300

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// `valgrind` from `$VALGRIND` or the `PATH`, or `nil` if it is not installed.
    static func findValgrind() -> String? {
        if let explicit = ProcessInfo.processInfo.environment["VALGRIND"], !explicit.isEmpty { return explicit }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") {
            let candidate = "\(folder)/valgrind"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// The first line of `valgrind --version`.
    func version() -> String? {
        guard let output = try? runProcess(valgrind, ["--version"], timeoutSeconds: 30), output.status == 0 else { return nil }
        return output.standardOutput.split(separator: "\n").first.map(String.init)
    }

    func instructionsPerOp(_ scenario: String) throws(Failure) -> Double {
        let short = try totalInstructions(scenario, iterations: shortIterations)
        let long = try totalInstructions(scenario, iterations: longIterations)
        return Double(long - short) / Double(longIterations - shortIterations)
    }

    private func totalInstructions(_ scenario: String, iterations: Int) throws(Failure) -> Int {
        let outFile = FileManager.default.temporaryDirectory
            .appendingPathComponent("kvo-bench-callgrind-\(getpid())-\(scenario)-\(iterations).out").path
        defer { try? FileManager.default.removeItem(atPath: outFile) }
        let arguments = ["--tool=callgrind", "--callgrind-out-file=\(outFile)",
                         currentExecutable(), "run", scenario, "--iterations", String(iterations)]
        let output: ProcessOutput
        do {
            output = try runProcess(valgrind, arguments, timeoutSeconds: timeoutSeconds)
        } catch {
            throw Failure(description: "cannot run '\(valgrind)': \(error)")
        }
        let command = "\(valgrind) \(arguments.joined(separator: " "))"
        if output.timedOut {
            throw Failure(description: "'\(command)' did not finish within \(timeoutSeconds) s and was killed")
        }
        guard output.status == 0 else {
            let tail = output.standardError.split(separator: "\n").suffix(12).joined(separator: "\n")
            throw Failure(description: "'\(command)' exited with status \(output.status):\n\(tail)")
        }
        // The profile's "summary:" (or "totals:") line holds the total Ir of the run.
        guard let profile = try? String(contentsOfFile: outFile, encoding: .utf8),
              let line = profile.split(separator: "\n").first(where: { $0.hasPrefix("summary:") || $0.hasPrefix("totals:") }),
              let total = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else {
            throw Failure(description: "'\(command)' wrote no instruction total to \(outFile)")
        }
        return total
    }
}

/// This executable's path (valgrind runs it again).
func currentExecutable() -> String {
    #if os(Linux)
    if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
    #endif
    return URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
}

// MARK: Running a child process

struct ProcessOutput {
    let status: Int32
    let standardOutput: String
    let standardError: String
    let timedOut: Bool
}

/// Runs `executable` with `arguments`, collecting its output; kills it after `timeoutSeconds`.
func runProcess(_ executable: String, _ arguments: [String], timeoutSeconds: Int) throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    try process.run()
    // Read both pipes on their own threads so a chatty child cannot block on a full pipe.
    let errorData = PipeReader(err), outputData = PipeReader(out)
    let timedOut = exited.wait(timeout: .now() + .seconds(timeoutSeconds)) == .timedOut
    if timedOut {
        process.terminate()
        exited.wait()
    }
    return ProcessOutput(
        status: process.terminationStatus,
        standardOutput: String(decoding: outputData.finish(), as: UTF8.self),
        standardError: String(decoding: errorData.finish(), as: UTF8.self),
        timedOut: timedOut
    )
}

/// Reads a pipe to its end on a thread of its own.
///
/// `@unchecked Sendable`: `data` is written by the reading thread before it signals `done`, and read
/// by `finish()` only after waiting for `done`.
private final class PipeReader: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        Thread { [self] in
            self.data = handle.readDataToEndOfFile()
            self.done.signal()
        }.start()
    }

    func finish() -> Data {
        done.wait()
        return data
    }
}

// MARK: The regression gate

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
    print("kvo-bench gate: instructions per operation (callgrind, (Ir(\(counter.longIterations)) − Ir(\(counter.shortIterations)))"
        + " / \(counter.longIterations - counter.shortIterations)) against \(thresholdsPath), tolerance \(formatNumber(thresholds.tolerancePercent))%")
    print("thresholds taken with: \(thresholds.toolchain); \(thresholds.architecture); \(thresholds.machine); \(thresholds.date)")
    print("measuring with:        \(toolchain); \(machine.architecture); \(counter.version() ?? "valgrind (version unknown)")")
    guard machine.architecture == thresholds.architecture else {
        printBanner("""
            SKIPPED: the thresholds were taken on \(thresholds.architecture), this machine is \(machine.architecture).
            Instruction counts of different instruction sets cannot be compared. Take thresholds for this
            architecture with 'kvo-bench gate --update' (in a file of its own, '--thresholds FILE').
            """)
        return (.skipped, [])
    }
    let toolchainDiffers = toolchain != thresholds.toolchain
    if toolchainDiffers {
        printBanner("""
            WARNING: the thresholds were taken with '\(thresholds.toolchain)',
            this is '\(toolchain)'. A different compiler may legitimately change instruction
            counts; comparing anyway. If the gate fails because of the toolchain alone, re-seed the
            thresholds with 'kvo-bench gate --update' in the commit that changes the toolchain.
            """)
    }

    var lines: [[String]] = [["scenario", "threshold Ir/op", "measured Ir/op", "change", "verdict"]]
    var measured: [(name: String, instructionsPerOp: Double)] = []
    var failures: [String] = []
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
        } else {
            verdict = "ok"
        }
        lines.append([gated.scenario, formatFigure(gated.instructionsPerOp, .instructions), String(format: "%.1f", value),
                      String(format: "%+.1f%%", percent), verdict])
    }
    print("")
    print(alignedTable(lines, rightAligned: [1, 2, 3]), terminator: "")
    print("")
    if failures.isEmpty {
        print("gate passed: \(measured.count) scenario\(measured.count == 1 ? "" : "s") within \(formatNumber(thresholds.tolerancePercent))% of the thresholds")
        return (.passed, measured)
    }
    printBanner("""
        GATE FAILED: \(failures.joined(separator: ", ")) cost\(failures.count == 1 ? "s" : "") more than \
        \(formatNumber(thresholds.tolerancePercent))% over \(thresholdsPath).\(toolchainDiffers ? "\nNote: the toolchain differs from the thresholds' (see the warning above)." : "")
        Look with: valgrind --tool=callgrind .build/release/kvo-bench run SCENARIO --iterations 60000 and
        callgrind_annotate. If the cost is intended, update the thresholds: kvo-bench gate --update.
        """)
    return (.regressed, measured)
}

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
    let date = ISO8601DateFormatter().string(from: Date()).prefix(10)
    func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
    let lines = measured.map { "    { \"scenario\": \(quoted($0.name)), \"instructionsPerOp\": \(Int($0.instructionsPerOp.rounded())) }" }
    return """
        {
          "toolchain": \(quoted(toolchainVersion() ?? compiledWith)),
          "architecture": \(quoted(machine.architecture)),
          "machine": \(quoted("\(machine.description); \(valgrindVersion ?? "valgrind")")),
          "date": \(quoted(String(date))),
          "tolerancePercent": \(formatNumber(tolerancePercent)),
          "gated": [
        \(lines.joined(separator: ",\n"))
          ]
        }

        """
}
