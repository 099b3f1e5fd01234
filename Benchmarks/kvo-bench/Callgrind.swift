import Foundation

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
        let arguments = [
            "--tool=callgrind", "--callgrind-out-file=\(outFile)",
            currentExecutable(), "run", scenario, "--iterations", String(iterations),
        ]
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
