import KeyValueObserving
import Testing

/// `kvo-bench contention` and `kvo-bench stress`: what they report and that they check their
/// results (never their figures).
extension BenchmarkToolTests {
    @Test func contentionTimesTheNodeTheTreeAndEveryLockAloneUnpinnedAndPinnedToOneCPU() throws {
        let run = try kvoBench(["contention", "--threads", "4", "--updates", "2000", "--rounds", "2"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("4 threads × 2000 updates, 2 rounds"))
        // Named from the lock's own definition, as --help names it (helpDescribesContentionAndStress).
        #expect(
            run.output.contains(
                "Progress nodes use the package's lock, PlatformLock (\(PlatformLock.form) in this build); the spinning lock is a comparison only."
            ), "\(run.output)")
        let rows = [
            "one node, unobserved", "one node, observed", "tree leaves, root observed", "lock alone: PlatformLock",
            "lock alone: spin + sched_yield",
        ]
        let unpinned = try #require(run.output.range(of: "Unpinned (every CPU the process may use):"))
        #if os(Linux)
        let pinned = try #require(run.output.range(of: "Pinned to one CPU (CPU "), "\(run.output)")
        #expect(unpinned.upperBound < pinned.lowerBound)
        let sections = [run.output[unpinned.upperBound..<pinned.lowerBound], run.output[pinned.upperBound...]]
        #else
        #expect(run.output.contains("Pinned to one CPU: Linux only (sched_setaffinity)"))
        let sections = [run.output[unpinned.upperBound...]]
        #endif
        for section in sections {
            for row in rows {
                #expect(section.contains(row), "\(row) missing from \(section)")
            }
        }
    }

    @Test func contentionRejectsACountThatIsNotPositive() throws {
        let run = try kvoBench(["contention", "--threads", "0"])
        #expect(run.status == 2)
        #expect(run.error.contains("'--threads' must be a positive integer, not '0'"))
    }

    @Test func stressRunsEveryKindOfWorkAndPassesItsChecks() throws {
        let run = try kvoBench(["stress", "--seconds", "1"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("stress: 1 s, "))
        for part in [
            "observers registered and removed", "sets", "deliveries", "checked rounds of dependent keys, chains and tracked observations",
            "progress trees", "defaults writes", "2 writer processes",
        ] {
            #expect(run.output.contains(part), "\(part) missing from \(run.output)")
        }
        #expect(run.output.contains("stress: memory trend not judged: a run of 1.0 s, shorter than 10.0 s"), "\(run.output)")
    }

    /// A soak long enough to be judged: its memory samples (about 40, a quarter second apart) and the
    /// verdict on their trend; the writer processes' values converged (or the run fails).
    @Test func aShortSoakPrintsItsMemorySamplesAndJudgesTheirTrend() throws {
        let run = try kvoBench(["stress", "--seconds", "10"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        let samples = run.output.split(separator: "\n").filter { $0.hasPrefix("stress: memory ") && $0.hasSuffix(" bytes in use") }
        #expect(samples.count >= 30, "\(run.output)")
        #expect(samples.first?.hasPrefix("stress: memory 0.") == true, "\(run.output)")
        #expect(run.output.contains("stress: memory in use over the second half ("), "\(run.output)")
        #expect(run.output.contains("bytes/s, limit 104857.6 bytes/s: steady"), "\(run.output)")
    }

    @Test func aWriterProcessNeedsAFileAndAnIndex() throws {
        let run = try kvoBench(["_soak-writer", "file.json", "7"])
        #expect(run.status == 2)
        #expect(run.error.contains("usage: kvo-bench _soak-writer FILE INDEX"))
    }

    @Test func helpDescribesContentionAndStress() throws {
        let run = try kvoBench(["--help"])
        #expect(run.status == 0)
        #expect(run.output.contains("kvo-bench contention [--quick]"))
        #expect(run.output.contains("kvo-bench stress [--quick] [--seconds N]"))
        #expect(run.output.contains("least-squares slope of bytes in use over the second half"))
        #expect(run.output.contains("two writer processes"))
        #expect(
            run.output.split(whereSeparator: \.isWhitespace).joined(separator: " ").contains(
                "a counter behind each lock alone: the package's lock, PlatformLock (\(PlatformLock.form) in this build), which progress nodes use"
            ), "\(run.output)")
        #expect(run.output.contains("2 on bad arguments (every command); 3 when compare or gate"))
    }
}
