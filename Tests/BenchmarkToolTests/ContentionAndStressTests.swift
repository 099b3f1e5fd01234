import Testing

/// `kvo-bench contention` and `kvo-bench stress`: what they report and that they check their
/// results (never their figures).
extension BenchmarkToolTests {
    @Test func contentionTimesTheNodeTheTreeAndEveryLockAlone() throws {
        let run = try kvoBench(["contention", "--threads", "4", "--updates", "2000", "--rounds", "2"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.contains("4 threads × 2000 updates, 2 rounds"))
        #expect(run.output.contains("Progress nodes of this build use the spin lock."))
        for row in [
            "one node, unobserved (spin)", "one node, observed (spin)", "tree leaves, root observed (spin)", "lock alone: futex",
            "lock alone: spin + sched_yield", "lock alone: pthread (Lock)",
        ] {
            #expect(run.output.contains(row), "\(row) missing from \(run.output)")
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
    }
}
