import Foundation
import KVOToolArguments

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The benchmark run (`kvo-bench` with no command): measures, then prints the summary and the tables.

func benchmark(_ options: BenchmarkOptions) -> Never {
    let all = Scenarios.list
    var selected = all
    var memoryScenarios = Scenarios.memoryScenarios(quick: options.quick)
    let filters = options.filters
    let measuresLatency = filters.isEmpty || filters.contains { DefaultsLatency.name.contains($0) }
    let measuresEtcd = filters.isEmpty || filters.contains { "etcd".contains($0) }
    let measuresMassRegistration = filters.isEmpty || filters.contains { MassRegistration.name.contains($0) }
    if !filters.isEmpty {
        let matching = Set(all.filter { scenario in filters.contains { scenario.name.contains($0) } }.map(\.name))
        let matchingMemory = Set(memoryScenarios.filter { scenario in filters.contains { scenario.name.contains($0) } }.map(\.name))
        if matching.isEmpty && matchingMemory.isEmpty && !measuresLatency && !measuresEtcd && !measuresMassRegistration {
            badArgument("no scenario name contains \(filters.map { "'\($0)'" }.joined(separator: " or ")) (see 'kvo-bench --list')")
        }
        let needed = matching.union(all.filter { matching.contains($0.name) }.flatMap(\.dependencies))
        selected = all.filter { needed.contains($0.name) }
        let neededMemory = matchingMemory.union(memoryScenarios.filter { matchingMemory.contains($0.name) }.compactMap(\.baseline))
        memoryScenarios = memoryScenarios.filter { neededMemory.contains($0.name) }
    }
    if options.svgPath != nil && !drawCurve(selected) {
        badArgument(
            "--svg: the selected scenarios draw no curve (no family with two parameter values); "
                + "drop --filter or select a family, e.g. --filter observers-")
    }
    var counter: InstructionCounter?
    if options.callgrind {
        guard let valgrind = InstructionCounter.findValgrind() else {
            fail(
                "--callgrind needs valgrind, which is not on the PATH (Debian/Ubuntu: apt-get install -y valgrind; or set VALGRIND)",
                status: 1)
        }
        counter = InstructionCounter(valgrind: valgrind)
    }

    let plan: SamplingPlan = options.quick ? .quick : .full
    let loadAverage = Machine.loadAverage()
    let showProgress = isatty(2) != 0
    func progress(_ message: String) { if showProgress { printError(message) } }
    // Memory first, on the main thread, before any scenario starts a thread or a task.
    let memory = memoryScenarios.isEmpty ? nil : measureMemory(memoryScenarios)
    if memory == nil && !memoryScenarios.isEmpty {
        printError("memory: not measured (no allocator statistics on this platform)")
    }
    let measurements: [String: Measurement]
    do throws(CheckFailure) {
        measurements = try measure(selected, plan: plan, progress: progress)
    } catch {
        fail(error.description, status: 1)
    }

    var rows = makeRows(selected, measurements)
    if var counter {
        for index in rows.indices where rows[index].scenario.countsInstructions {
            // As many iterations as take ~0.2 s natively (at most 60,000): heavy scenarios would
            // otherwise take minutes under valgrind.
            let long = min(60_000, max(60, Int(200_000_000 / max(rows[index].measurement.p50, 1))))
            counter.longIterations = long
            counter.shortIterations = long / 6
            printError("counting instructions of \(rows[index].scenario.name) (\(counter.shortIterations) and \(long) iterations)")
            do throws(InstructionCounter.Failure) {
                rows[index].instructionsPerOp = try counter.instructionsPerOp(rows[index].scenario.name)
            } catch {
                printError("warning: no instruction count for \(rows[index].scenario.name): \(error)")
            }
        }
    }

    var latency: LatencyOutcome?
    if measuresLatency {
        progress("measuring the cross-process latency")
        let (result, problem) = DefaultsLatency.measure(changes: options.quick ? 20 : 300)
        latency = result.map { .measured($0) } ?? .unavailable(problem ?? "failed")
    }
    var massRegistration: (figures: [MassRegistration.Figure], problems: [String])?
    if measuresMassRegistration {
        progress("measuring registration at scale (a child process per implementation)")
        massRegistration = MassRegistration.measure(quick: options.quick)
    }
    var etcd: EtcdOutcome?
    if measuresEtcd {
        progress("measuring ObservableDefaults on etcd (where etcd is installed)")
        var fileLatency: DefaultsLatency.Result?
        if case .measured(let result)? = latency { fileLatency = result }
        etcd = EtcdBench.measure(quick: options.quick, fileLatency: fileLatency)
    }

    let report = RunReport(
        rows: rows, memory: memory, latency: latency, massRegistration: massRegistration, etcd: etcd, plan: plan, quick: options.quick,
        filters: filters,
        callgrind: options.callgrind, machine: .current(), loadAverage: loadAverage, toolchain: toolchainVersion() ?? compiledWith,
        date: Date()
    )
    print(report.text, terminator: "")

    if let markdownPath = options.markdownPath {
        writeFile(report.markdown, to: markdownPath)
        print("Markdown written to \(markdownPath)")
    }
    if let jsonPath = options.jsonPath {
        writeJSONReport(rows, memory: memory, plan: plan, mode: options.quick ? "quick" : "full", toolchain: report.toolchain, to: jsonPath)
        print("results written to \(jsonPath)")
    }
    if let svgPath = options.svgPath {
        let subtitle =
            "\(isoDay(report.date)), \(report.toolchain), \(buildConfiguration); \(report.machine.description)"
            + (options.quick ? "; --quick" : "")
        // The scenarios were checked to draw a curve before they were measured.
        guard let svg = scalingChartSVG(rows, subtitle: subtitle) else { fail("--svg: no curve to draw", status: 1) }
        writeFile(svg, to: svgPath)
        print("chart written to \(svgPath)")
    }
    exit(0)
}

/// Everything a run measured, and its two renderings: the terminal's and `--markdown`'s.
struct RunReport {
    let rows: [ReportRow]
    let memory: [MemoryFigure]?
    let latency: LatencyOutcome?
    let massRegistration: (figures: [MassRegistration.Figure], problems: [String])?
    let etcd: EtcdOutcome?
    let plan: SamplingPlan
    let quick: Bool
    let filters: [String]
    let callgrind: Bool
    let machine: Machine
    /// The machine's load average when the run started (before it added its own).
    let loadAverage: Double?
    let toolchain: String
    let date: Date

    var summary: [SummaryLine] { summaryLines(rows, memory: memory, latency: latency) }

    /// When, with what and on what it was measured.
    var provenance: String {
        "\(ISO8601DateFormatter().string(from: date)), \(toolchain), \(buildConfiguration); \(machine.description)"
            + (loadAverage.map { String(format: "; load average %.1f at the start", $0) } ?? "")
    }

    var method: String {
        "ns/op: p50 / p90 / p99 of \(plan.samples) interleaved samples of ~\(plan.sampleNanoseconds / 1_000_000) ms "
            + "after \(plan.warmUpNanoseconds / 1_000_000) ms of warm-up\(quick ? " (--quick)" : "")"
            + "\(plan.samples < 100 ? " (p99 = slowest sample)" : ""); "
            + "ratio = the median [lowest–highest] of the rounds' paired ratios (each round's sample over the baseline's in "
            + "the same round); hand-offs: \(plan.deliveries.formatted()) fresh deliveries per implementation, their table says what"
            + (callgrind ? "; Ir/op: callgrind, (Ir(long) − Ir(short)) / (long − short) iterations" : "")
    }

    var text: String {
        var output = "kvo-bench: this package against the alternatives, measured in one run\n\(provenance)\n"
        let summary = self.summary
        if !summary.isEmpty {
            output +=
                "\nSummary (ratios of this run, paired round by round: median [range]; the tables below have every figure)\n"
                + summaryText(summary)
        }
        output += "\n\(method)\n\n"
        return output + sections(markdown: false)
    }

    var markdown: String {
        let mode =
            quick
            ? "a `--quick` run (7 short samples per scenario: noisier than a full run)"
            : "a full run (\(plan.samples) samples per scenario)"
        var output = """
            # Benchmarks

            Written by `kvo-bench --markdown` from \(mode)\(filters.isEmpty ? "" : ", filtered by \(filters.map { "`\($0)`" }.joined(separator: ", "))"), \
            on \(provenance). Regenerate with:

            ```sh
            swift run -c release kvo-bench --markdown Benchmarks/README.md
            ```

            Every scenario runs in the same process as its baseline, in interleaved rounds; a ratio is the \
            median of the ratios of the two scenarios' samples paired round by round, with their range: \
            where the range spans 1× the rounds disagree on which is faster, and the ratio is marked \
            unstable. Absolute times drift with the machine's load (a shared machine drifts by a third from \
            run to run), ratios much less; instruction counts (`kvo-bench --callgrind`, `kvo-bench gate`) do \
            not drift. The implementation column names whose code each row measures. The async hand-offs \
            are timed per value, from the set to the consumer task's delivery of the value just set; a \
            round whose first delivery was an earlier value (a sequence that coalesces) is counted apart, \
            not as a latency.

            Not in these tables: the soak, `kvo-bench stress --seconds N` (`.ci/run` runs it for 20 s, and \
            for 1 s under valgrind's memcheck). For N seconds, threads register and remove observers, set \
            keys one at a time, in batches and through key-path chains, change the inputs of a dependent \
            key, a chain and a tracked observation (each checked to see exactly its changes and end on the \
            final value), update progress trees, and write a defaults store whose file two writer processes \
            (`kvo-bench _soak-writer`) write too. It prints malloc's bytes in use about 40 times a run and \
            fails if a check fails, if the store does not converge to the writers' last values, or if the \
            least-squares slope of bytes in use over the second half of the run is above the larger of 1 \
            KiB/s and 512 KiB spread over that half (more than a short run's noise and warm-up; a leak per \
            observer, set or defaults write is far above it, a rarer one needs a long run). See \
            `kvo-bench --help`.


            """
        let summary = self.summary
        if !summary.isEmpty {
            output += "## Summary\n\n" + summary.map { "- **\($0.label)**: \($0.text)\n" }.joined() + "\n"
        }
        output += "## Tables\n\n_\(method)._\n\n"
        return output + sections(markdown: true)
    }

    /// The timing and memory tables, then the cross-process and etcd sections, as plain text or
    /// Markdown (where the tables also describe their scenarios).
    private func sections(markdown: Bool) -> String {
        let tables = timingTables(rows, describe: markdown) + (memory.map { [memoryTable($0, describe: markdown)] } ?? [])
        var output = tables.map { (markdown ? $0.markdown : $0.text) + "\n" }.joined()
        if let latency { output += latencyLines(latency, markdown: markdown).joined(separator: "\n") + "\n" }
        if let massRegistration {
            output +=
                "\n"
                + massRegistrationLines(massRegistration.figures, problems: massRegistration.problems, markdown: markdown)
                .joined(separator: "\n") + "\n"
        }
        if let etcd { output += "\n" + etcdLines(etcd, markdown: markdown).joined(separator: "\n") + "\n" }
        return output
    }
}
