import Foundation
import KeyValueObserving
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where SwiftPM puts the executables: the folder of this test binary. Found through
/// `/proc/self/exe`, so on Linux only.
private let buildFolder = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()

/// `kvo-bench`, run as the built executable next to this test binary (this target depends on
/// kvo-bench, so SwiftPM builds it): `compare` and `gate` on results files and thresholds written by
/// the tests, the gate with a stand-in for valgrind that reports a chosen instruction count (verdicts
/// tested without valgrind and without timing anything), and the shape of a benchmark run's report
/// (never its figures).
@Suite("kvo-bench", .enabled(if: isLinux), .tags(.processes))
struct BenchmarkToolTests {
    typealias Run = ToolResult

    /// A fresh folder for one test's files.
    let folder: URL = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kvo-bench-tests-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }()

    func write(_ name: String, _ text: String) throws -> String {
        let file = folder.appendingPathComponent(name)
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    func kvoBench(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        let executable = buildFolder.appendingPathComponent("kvo-bench")
        try #require(
            FileManager.default.isExecutableFile(atPath: executable.path),
            "kvo-bench is not built next to the tests (\(executable.path))")
        return try runTool(
            arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new }, currentDirectory: folder,
            seconds: 1800, executable: executable.path)
    }

    /// A results file as `--json` writes it (only the fields `compare` reads).
    func results(_ scenarios: [(name: String, p50: Double, irPerOp: Double?)], memoryBytes: Double? = nil) -> String {
        let entries = scenarios.map { scenario in
            """
            {"name": "\(scenario.name)", "p50": \(scenario.p50), "baseline": "plain-set", "ratio": \(scenario.p50 / 2),
             "instructionsPerOp": \(scenario.irPerOp.map { "\($0)" } ?? "null")}
            """
        }
        let memory = memoryBytes.map { #", "memory": [{"name": "memory-observer", "bytes": \#($0)}]"# } ?? ""
        return #"{"date": "2026-11-29", "toolchain": "test", "scenarios": [\#(entries.joined(separator: ", "))]\#(memory)}"#
    }

    // MARK: compare

    @Test func compareExitsZeroWhenNothingGrewBeyondTheThreshold() throws {
        let old = try write("old.json", results([("observed-set-new", 50, nil), ("unobserved-set", 3, nil)]))
        let new = try write("new.json", results([("observed-set-new", 54, nil), ("unobserved-set", 2.5, nil)]))
        let run = try kvoBench(["compare", old, new])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("observed-set-new"))
        #expect(run.output.contains("+8.0%"))
        #expect(run.output.contains("no regression beyond 10%"))
        #expect(!run.output.contains("REGRESSION"))
    }

    @Test func compareExitsThreeAndNamesTheScenarioThatRegressed() throws {
        let old = try write("old.json", results([("observed-set-new", 50, nil), ("unobserved-set", 3, nil)]))
        let new = try write("new.json", results([("observed-set-new", 60, nil), ("unobserved-set", 3, nil)]))
        let run = try kvoBench(["compare", old, new])
        #expect(run.status == 3)
        #expect(run.output.contains("REGRESSION"))
        #expect(run.output.contains("1 regression beyond 10%: observed-set-new (p50 ns +20.0%)"))
        // The ratio to the baseline is shown old → new.
        #expect(run.output.contains("25.00×") && run.output.contains("30.00×"))
    }

    @Test func compareHonoursTheThresholdOption() throws {
        let old = try write("old.json", results([("observed-set-new", 50, nil)]))
        let new = try write("new.json", results([("observed-set-new", 60, nil)]))
        #expect(try kvoBench(["compare", old, new, "--threshold", "25"]).status == 0)
        #expect(try kvoBench(["compare", old, new, "--threshold=15"]).status == 3)
    }

    @Test func instructionCountsDecideOverTimesWhenBothRunsHaveThem() throws {
        let old = try write("old.json", results([("observed-set-new", 50, 318)]))
        let slowerTimesSameInstructions = try write("noisy.json", results([("observed-set-new", 90, 318)]))
        let moreInstructions = try write("more.json", results([("observed-set-new", 50, 360)]))
        let noisy = try kvoBench(["compare", old, slowerTimesSameInstructions])
        #expect(noisy.status == 0, "\(noisy.output)")
        #expect(noisy.output.contains("(not deciding)"))
        let regressed = try kvoBench(["compare", old, moreInstructions])
        #expect(regressed.status == 3)
        #expect(regressed.output.contains("observed-set-new (Ir/op +13.2%)"))
    }

    @Test func compareReportsGrownMemoryAsARegression() throws {
        let old = try write("old.json", results([("observed-set-new", 50, nil)], memoryBytes: 138))
        let new = try write("new.json", results([("observed-set-new", 50, nil)], memoryBytes: 170))
        let run = try kvoBench(["compare", old, new])
        #expect(run.status == 3)
        #expect(run.output.contains("memory-observer (bytes +23.2%)"))
    }

    @Test func compareListsScenariosPresentInOnlyOneRun() throws {
        let old = try write("old.json", results([("observed-set-new", 50, nil), ("retired", 1, nil)]))
        let new = try write("new.json", results([("observed-set-new", 50, nil), ("fresh", 1, nil)]))
        let run = try kvoBench(["compare", old, new])
        #expect(run.status == 0)
        #expect(run.output.contains("only in \(old): retired"))
        #expect(run.output.contains("only in \(new): fresh"))
    }

    @Test func compareExitsOneNamingAMissingFile() throws {
        let new = try write("new.json", results([("observed-set-new", 50, nil)]))
        let missing = folder.appendingPathComponent("missing.json").path
        let run = try kvoBench(["compare", missing, new])
        #expect(run.status == 1)
        #expect(run.error.contains("cannot read '\(missing)': no such file"))
    }

    @Test func compareExitsOneNamingAFileThatIsNotResults() throws {
        let old = try write("old.json", results([("observed-set-new", 50, nil)]))
        let garbage = try write("garbage.json", "this is not JSON")
        let wrongShape = try write("shape.json", #"{"benchmarks": []}"#)
        let invalid = try kvoBench(["compare", old, garbage])
        #expect(invalid.status == 1)
        #expect(invalid.error.contains("cannot read '\(garbage)': not a kvo-bench results file: invalid JSON"))
        let shape = try kvoBench(["compare", wrongShape, old])
        #expect(shape.status == 1)
        #expect(shape.error.contains("cannot read '\(wrongShape)': not a kvo-bench results file: missing 'scenarios'"))
    }

    @Test func compareWithoutTwoFilesIsAUsageErrorNotARegression() throws {
        let old = try write("old.json", results([("observed-set-new", 50, nil)]))
        let run = try kvoBench(["compare", old])
        #expect(run.status == 2)
        #expect(run.error.contains("needs two results files"))
    }

    /// A command line a command refuses exits 2 in every command; only a regression found by
    /// `compare` or `gate` exits 3 (the tests above and below).
    @Test func everyCommandExitsTwoOnAUsageError() throws {
        for arguments in [
            ["--bogus"], ["--list", "--quick"], ["run"], ["run", "no-such-scenario"], ["compare", "only.json"],
            ["compare", "a.json", "b.json", "--threshold", "-1"], ["gate", "--bogus"], ["gate", "--update", "--filter", "set"],
            ["contention", "--rounds", "0"], ["stress", "--seconds", "x"], ["--filter", "no-scenario-has-this-name"],
            ["--svg", "chart.svg", "--filter", "plain-set"],
        ] {
            let run = try kvoBench(arguments, environment: ["VALGRIND": "/nonexistent"])
            #expect(run.status == 2, "\(arguments): \(run.output)\(run.error)")
            #expect(run.error.contains("Run 'kvo-bench --help' for usage."), "\(arguments): \(run.error)")
        }
    }

    /// An option written with "=" and nothing after it has an empty value: refused, never taken
    /// from the next argument, and a flag's is refused too (found by the kvo-bench-arguments fuzz
    /// target: `--list=` listed, `--markdown= out.md` wrote out.md).
    @Test func anOptionWithAnEmptyValueAfterItsEqualsSignIsAUsageError() throws {
        for (arguments, message) in [
            (["--markdown=", "out.md"], "option '--markdown' needs a value"), (["--list="], "option '--list' takes no value"),
            (["compare", "a.json", "b.json", "--threshold="], "option '--threshold' needs a value"),
        ] {
            let run = try kvoBench(arguments)
            #expect(run.status == 2, "\(arguments): \(run.error)")
            #expect(run.error.contains(message), "\(arguments): \(run.error)")
        }
    }

    // MARK: gate

    /// A stand-in for valgrind: writes a callgrind profile whose total is
    /// `iterations × $FAKE_IR_PER_OP + 123456` (start-up), which the gate's two runs cancel out.
    func fakeValgrind() throws -> String {
        let path = try write(
            "valgrind",
            """
            #!/bin/sh
            if [ "$1" = "--version" ]; then echo valgrind-fake; exit 0; fi
            out=""; iterations=""; previous=""
            for argument in "$@"; do
                case "$argument" in --callgrind-out-file=*) out="${argument#--callgrind-out-file=}";; esac
                if [ "$previous" = "--iterations" ]; then iterations="$argument"; fi
                previous="$argument"
            done
            echo "summary: $((iterations * FAKE_IR_PER_OP + 123456))" > "$out"

            """)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        return path
    }

    func thresholds(instructionsPerOp: Int, architecture: String? = nil, toolchain: String? = nil) throws -> String {
        var machine = utsname()
        uname(&machine)
        let currentArchitecture = withUnsafeBytes(of: &machine.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return try write(
            "thresholds.json",
            """
            {
              "toolchain": "\(toolchain ?? "a toolchain")",
              "architecture": "\(architecture ?? currentArchitecture)",
              "machine": "test",
              "date": "2026-11-29",
              "tolerancePercent": 10,
              "gated": [
                { "scenario": "unobserved-set", "instructionsPerOp": \(instructionsPerOp) }
              ]
            }
            """)
    }

    @Test func gatePassesWithinTheTolerance() throws {
        let file = try thresholds(instructionsPerOp: 100)
        let run = try kvoBench(["gate", "--thresholds", file], environment: ["VALGRIND": try fakeValgrind(), "FAKE_IR_PER_OP": "109"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("gate passed"))
        #expect(run.output.contains("109.0"))
    }

    @Test func gateWarnsAboutAScenarioDearerThanItsThresholdWithinTheTolerance() throws {
        let file = try thresholds(instructionsPerOp: 100)
        let run = try kvoBench(["gate", "--thresholds", file], environment: ["VALGRIND": try fakeValgrind(), "FAKE_IR_PER_OP": "105"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("ok, but 5.0 Ir/op over the threshold"))
        #expect(run.output.contains("warning: unobserved-set costs more than"))
        let level = try kvoBench(["gate", "--thresholds", file], environment: ["VALGRIND": try fakeValgrind(), "FAKE_IR_PER_OP": "101"])
        #expect(level.status == 0, "\(level.output)\(level.error)")
        #expect(!level.output.contains("warning:"))
    }

    @Test func gateFailsWithStatusThreeBeyondTheTolerance() throws {
        let file = try thresholds(instructionsPerOp: 100)
        let run = try kvoBench(["gate", "--thresholds", file], environment: ["VALGRIND": try fakeValgrind(), "FAKE_IR_PER_OP": "111"])
        #expect(run.status == 3, "\(run.output)\(run.error)")
        #expect(run.output.contains("GATE FAILED: unobserved-set"))
    }

    @Test func gateWarnsLoudlyAboutAnotherToolchainAndStillCompares() throws {
        let file = try thresholds(instructionsPerOp: 100, toolchain: "Swift version 0.1")
        let run = try kvoBench(["gate", "--thresholds", file], environment: ["VALGRIND": try fakeValgrind(), "FAKE_IR_PER_OP": "150"])
        #expect(run.status == 3)
        #expect(run.output.contains("WARNING: the thresholds were taken with 'Swift version 0.1'"))
    }

    @Test func gateSkipsOnAnotherArchitecture() throws {
        let file = try thresholds(instructionsPerOp: 100, architecture: "pdp11")
        let run = try kvoBench(["gate", "--thresholds", file], environment: ["VALGRIND": try fakeValgrind(), "FAKE_IR_PER_OP": "150"])
        #expect(run.status == 0)
        #expect(run.output.contains("SKIPPED: the thresholds were taken on pdp11"))
    }

    @Test func gateUpdateRewritesTheThresholdsWithTheMeasuredFigures() throws {
        let file = try thresholds(instructionsPerOp: 100)
        let run = try kvoBench(
            ["gate", "--thresholds", file, "--update"],
            environment: ["VALGRIND": try fakeValgrind(), "FAKE_IR_PER_OP": "42"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        let rewritten = try String(contentsOfFile: file, encoding: .utf8)
        #expect(rewritten.contains(#"{ "scenario": "unobserved-set", "instructionsPerOp": 42 }"#))
        #expect(rewritten.contains("valgrind-fake"))
    }

    @Test func gateExitsOneWhenTheThresholdsFileIsMissing() throws {
        let run = try kvoBench(["gate", "--thresholds", "nowhere.json"], environment: ["VALGRIND": try fakeValgrind()])
        #expect(run.status == 1)
        #expect(run.error.contains("cannot read 'nowhere.json': no such file"))
    }

    @Test func gateWithTargetsAlsoReportsThisPackagesTimingTargets() throws {
        let file = try thresholds(instructionsPerOp: 100)
        let run = try kvoBench(
            ["gate", "--thresholds", file, "--filter", "unobserved-set", "--targets"],
            environment: ["VALGRIND": try fakeValgrind(), "FAKE_IR_PER_OP": "100"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("gate passed"))
        #expect(run.output.contains("Timing targets of this package"))
        #expect(run.output.contains("unobserved-set") && run.output.contains("≤ 2×"))
    }

    // MARK: the benchmark run

    @Test func listNamesTheImplementationOfEveryScenario() throws {
        let run = try kvoBench(["--list"])
        #expect(run.status == 0, "\(run.error)")
        let lines = run.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        func implementation(of scenario: String) -> String? {
            lines.first { $0.contains(Substring(scenario)) }.map { $0.prefix { $0 != Substring(scenario) }.joined(separator: " ") }
        }
        #expect(implementation(of: "memory-observable-object") == "Observation")
        #expect(implementation(of: "memory-unobserved-object") == "KeyValueObserving")
        #expect(implementation(of: "notificationcenter-post") == "NotificationCenter")
        #expect(implementation(of: "foundation-progress-child") == "Foundation Progress")
        #expect(implementation(of: "progress-leaf-unobserved") == "ObservableProgress")
        #expect(implementation(of: "userdefaults-set") == "UserDefaults")
        #expect(implementation(of: "defaults-set-observed") == "ObservableDefaults")
        #expect(implementation(of: "userdefaults-read") == "UserDefaults")
        #expect(implementation(of: "plain-dictionary-read") == "plain Swift")
        #expect(!run.output.contains("(target ≤"))
    }

    @Test func aRunOpensWithASummaryLabelsEveryRowAndShowsNoTargets() throws {
        let markdown = folder.appendingPathComponent("bench.md").path
        let run = try kvoBench(["--quick", "--filter", "observed-set-new", "--filter", "memory-observer", "--markdown", markdown])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        let summary = try #require(run.output.range(of: "Summary"))
        let firstTable = try #require(run.output.range(of: "Set path"))
        #expect(summary.lowerBound < firstTable.lowerBound)
        #expect(run.output.contains("KeyValueObserving, set with one observer:"))
        #expect(run.output.contains("a NotificationCenter post") && run.output.contains("Observation (re-armed tracking)"))
        #expect(run.output.contains("Memory, observer:"))
        #expect(run.output.contains("NotificationCenter  memory-notificationcenter-observer"))
        #expect(run.output.contains("KeyValueObserving   memory-observer"))
        #expect(!run.output.contains("target") && !run.output.contains("✗"), "\(run.output)")

        let document = try String(contentsOfFile: markdown, encoding: .utf8)
        #expect(document.hasPrefix("# Benchmarks\n"))
        #expect(document.contains("a `--quick` run"))
        #expect(document.contains("## Summary"))
        #expect(document.contains("| KeyValueObserving | observed-set-new |"))
        #expect(document.contains("| Observation | observation-rearmed |"))
        #expect(document.contains("| NotificationCenter | memory-notificationcenter-observer |"))
        var machine = utsname()
        uname(&machine)
        let architecture = withUnsafeBytes(of: &machine.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        #expect(document.contains(architecture))
    }

    /// The hand-offs are reported per value: what the table measures, the stale first deliveries
    /// and timeouts apart from the latency, and a --quick run says it has fewer values.
    @Test func theHandOffTableSaysWhatItMeasuresAndTheSummaryComparesFreshDeliveries() throws {
        let run = try kvoBench(["--quick", "--filter", "values-handoff"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("KeyValueObserving, async values(for:): a fresh delivery "), "\(run.output)")
        #expect(run.output.contains(" a plain AsyncStream") && run.output.contains(" Observation's Observations"))
        let table = try #require(run.output.range(of: "Async sequences: a value handed to a consumer task\n"))
        #expect(run.output[table.upperBound...].hasPrefix("One value at a time: set, then the first value the consumer task gets."))
        #expect(run.output.contains("over the 210 (--quick; a full run: 10,013) rounds of each implementation"), "\(run.output)")
        for column in ["rounds", "stale first", "timeouts", "fresh p50 ns", "ratio [range]"] {
            #expect(run.output.contains(column), "\(column)")
        }
        for scenario in ["asyncstream-handoff", "observations-handoff", "values-handoff"] {
            let line = try #require(run.output.split(separator: "\n").first { $0.contains(" \(scenario) ") }, "\(scenario)")
            // Each implementation delivered 210 fresh values; its rounds are at least that many.
            #expect(line.split(separator: " ").compactMap { Int($0) }.first.map { $0 >= 210 } == true, "\(line)")
        }
    }

    /// A defaults read runs beside what a user would pick instead: UserDefaults' read and a lookup
    /// in a dictionary of decoded values.
    @Test func aDefaultsReadIsComparedWithUserDefaultsAndADictionaryLookup() throws {
        let run = try kvoBench(["--quick", "--filter", "defaults-read"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("ObservableDefaults, read: "), "\(run.output)")
        // "N× faster than …", "about as fast as …": whichever this run measured.
        #expect(run.output.contains(" UserDefaults.double(forKey:)"), "\(run.output)")
        #expect(run.output.contains(" a [String: Double] lookup of a decoded value"), "\(run.output)")
        let row = try #require(run.output.split(separator: "\n").first { $0.hasPrefix("ObservableDefaults  defaults-read  ") })
        #expect(row.contains("plain-dictionary-read"))
        #expect(run.output.contains("↳ same, vs UserDefaults") && run.output.contains("userdefaults-read"))
    }

    @Test func theCrossProcessSectionStartsKvoBenchItselfAsTheWatcher() throws {
        let run = try kvoBench(["--quick", "--filter", "defaults-cross-process-latency"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("observer: kvo-bench _watch-defaults in another process"))
        #expect(run.output.contains("rename (of the fsynced file) → observer call — what watching costs: p50"))
        #expect(run.output.contains("directory layer: rename of a key's file → observer call"))
        #expect(run.output.contains("swift-configuration's ReloadingFileProvider polls its file every 15 s by default"))
        // Every span starts at an event that causes its end: none is negative.
        #expect(!run.output.contains("p50 -"), "\(run.output)")
        #expect(run.output.contains("ObservableDefaults, across processes:"))
    }

    @Test func registrationAtScaleRunsEachImplementationInAChildAndComparesThem() throws {
        let run = try kvoBench(["--quick", "--filter", "mass-registration"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("Registration at scale (10,000 objects × 10 observers"))
        #expect(run.output.contains("  KeyValueObserving: register "))
        #expect(run.output.contains("  NotificationCenter: register "))
        #expect(run.output.contains("  Observation: register ") && run.output.contains("invalidate n/a (no cancellation)"))
        #expect(run.output.contains("KeyValueObserving against NotificationCenter: registration "))
        #expect(run.output.contains("KeyValueObserving against Observation: registration "))
        #expect(run.output.contains("memory from the child's own start"))
        // Each child checked that a change reached its observers: no problem line.
        #expect(!run.output.contains("failed (status"))
    }

    /// A child's memory is counted from its own start: started by a process whose resident set
    /// once peaked far above what the child will use, it still reports its own growth (getrusage's
    /// maximum RSS, which the child inherits from its parent on Linux, reported none).
    @Test func aChildsPeakIsItsOwnNotItsParents() throws {
        let size = 512 << 20
        let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        for page in stride(from: 0, to: size, by: 4096) { block.storeBytes(of: 1, toByteOffset: page, as: UInt8.self) }
        block.deallocate()
        let run = try kvoBench(["_mass-registration", "KeyValueObserving", "10000", "10"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        let fields = run.output.split(whereSeparator: \.isWhitespace)
        #expect(fields.count == 8 && fields[4] == "heap" && fields[6] == "peak", "\(run.output)")
        // 100,000 observers and their objects: well over a mebibyte. (The heap figure is glibc's
        // books, which a sanitizer's allocator bypasses: only its presence is checked.)
        let peak = try #require(Int(fields[7]), "\(run.output)")
        #expect(peak > 1 << 20, "\(run.output)")
        #expect(Int(fields[5]) != nil, "\(run.output)")
    }

    @Test func theWatcherReportsChangesOfTheFileAndExitsWhenItsInputEnds() throws {
        let file = folder.appendingPathComponent("watched.json")
        try Data(#"{"latency": 1}"#.utf8).write(to: file)
        let process = Process()
        process.executableURL = buildFolder.appendingPathComponent("kvo-bench")
        process.arguments = ["_watch-defaults", file.path, "latency"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        // Write until the watcher reports a value (a write made before it started watching is not a change it sees).
        var report = ""
        for value in 2..<2_000 where !report.contains(" latency: -> ") {
            try Data(#"{"latency": \#(value)}"#.utf8).write(to: file, options: .atomic)
            var pending = pollfd(fd: output.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
            if poll(&pending, 1, 50) > 0 { report += String(decoding: output.fileHandleForReading.availableData, as: UTF8.self) }
        }
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let line = try #require(report.split(separator: "\n").first)
        let fields = line.split(separator: " ")
        #expect(fields.count == 4 && UInt64(fields[0]) != nil && fields[1] == "latency:" && Int(fields[3]) != nil, "\(line)")
    }
}

#if os(Linux)
let isLinux = true
#else
let isLinux = false
#endif
