// The tables of a benchmark run, as aligned text (the terminal) and as Markdown (`--markdown`).
// Every row names its implementation; this package's own targets are not here (`gate --targets`).

/// A table: a header and lines of cells, with the columns to align right, and what they measure
/// where the header cannot say it.
struct Table {
    let title: String
    let header: [String]
    let lines: [[String]]
    let rightAligned: Set<Int>
    var note: String? = nil

    var text: String {
        "\(title)\n" + (note.map { "\($0)\n" } ?? "") + alignedTable([header] + lines, rightAligned: rightAligned)
    }

    var markdown: String {
        var output = "### \(title)\n\n" + (note.map { "_\($0)_\n\n" } ?? "")
        output += "| " + header.joined(separator: " | ") + " |\n"
        output += "|" + header.indices.map { rightAligned.contains($0) ? "---:" : "---" }.joined(separator: "|") + "|\n"
        for line in lines {
            // A backslash and a bar are Markdown: escaped, so `\.volume` and `a | b` read as written.
            let escaped = line.map {
                $0.isEmpty ? " " : $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "|", with: "\\|")
            }
            output += "| " + escaped.joined(separator: " | ") + " |\n"
        }
        return output
    }
}

/// A ratio's "compared" cell: what the median means, and "unstable" where the rounds disagree on
/// which side is faster (the range is in the ratio cell).
private func comparedCell(_ ratio: PairedRatio) -> String {
    speedPhrase(ratio.median) + (ratio.isUnstable ? ", unstable" : "")
}

/// A row's line, `figures` after its implementation and scenario, then one line per further
/// comparison ("↳ same, vs …"), with as many blank cells in place of the figures.
private func lines(of row: ReportRow, figures: [String], describe: Bool) -> [[String]] {
    func cells(_ comparison: Comparison) -> [String] {
        [comparison.baseline, formatNanoseconds(comparison.baselineP50), formatRatio(comparison.ratio), comparedCell(comparison.ratio)]
    }
    var line = [row.implementation.rawValue, row.scenario.name] + figures + (row.primary.map(cells) ?? ["—", "", "", ""])
    if describe { line.append(row.scenario.summary) }
    return [line]
        + row.extra.map { comparison in
            ["", "  ↳ same, vs \(Implementation(scenario: comparison.baseline).rawValue)"] + Array(repeating: "", count: figures.count)
                + cells(comparison) + (describe ? [""] : [])
        }
}

/// One table per scenario group. `describe` adds a column with each scenario's summary (Markdown,
/// where lines may be long).
func timingTables(_ rows: [ReportRow], describe: Bool) -> [Table] {
    let withInstructions = rows.contains { $0.instructionsPerOp != nil }
    var header = ["implementation", "scenario", "p50 ns", "p90 ns", "p99 ns"]
    if withInstructions { header.append("Ir/op") }
    header += ["baseline", "baseline p50", "ratio [range]", "compared"]
    if describe { header.append("what is measured") }
    let right = Set([2, 3, 4] + (withInstructions ? [5, 7, 8] : [6, 7]))
    return Scenario.Group.allCases.compactMap { group in
        let members = rows.filter { $0.scenario.group == group }
        guard !members.isEmpty else { return nil }
        if members.allSatisfy({ $0.measurement.deliveries != nil }) {
            return handOffTable(group, members, describe: describe)
        }
        let tableLines = members.flatMap { row in
            let m = row.measurement
            var figures = [formatNanoseconds(m.p50), formatNanoseconds(m.p90), formatNanoseconds(m.p99)]
            if withInstructions { figures.append(row.instructionsPerOp.map { formatFigure($0, .instructions) } ?? "") }
            return lines(of: row, figures: figures, describe: describe)
        }
        return Table(title: group.rawValue, header: header, lines: tableLines, rightAligned: right)
    }
}

/// The hand-off scenarios' table: per implementation, how often the first value delivered after a
/// set was an earlier one, and the latency of the fresh deliveries; ratios pair the rounds' median
/// latencies.
private func handOffTable(_ group: Scenario.Group, _ members: [ReportRow], describe: Bool) -> Table {
    var header = ["implementation", "scenario", "rounds", "stale first", "timeouts", "fresh p50 ns", "p90 ns", "p99 ns"]
    header += ["baseline", "baseline p50", "ratio [range]", "compared"]
    if describe { header.append("what is measured") }
    let tableLines = members.flatMap { row in
        let m = row.measurement
        let tally = m.deliveries!
        let figures = [
            tally.rounds.formatted(), String(format: "%.1f%%", 100 * Double(tally.staleFirst) / Double(max(tally.rounds, 1))),
            String(tally.timeouts), formatNanoseconds(m.p50), formatNanoseconds(m.p90), formatNanoseconds(m.p99),
        ]
        return lines(of: row, figures: figures, describe: describe)
    }
    let fresh = members.map { $0.measurement.deliveries!.freshNanoseconds.count }.min() ?? 0
    let fewer = fresh < SamplingPlan.full.deliveries ? " (--quick; a full run: \(SamplingPlan.full.deliveries.formatted()))" : ""
    let note =
        "One value at a time: set, then the first value the consumer task gets. fresh p50/p90/p99: set → the consumer has the "
        + "value just set, over the \(fresh.formatted())\(fewer) rounds of each implementation where that was the first delivery; "
        + "stale first: rounds whose "
        + "first delivery was an earlier value (the sequence read before the store, or coalesced); timeouts: no delivery in "
        + "\(HandOff.timeoutNanoseconds / 1_000_000) ms. Neither is a latency. Ratios pair each round's median fresh latency."
    return Table(title: group.rawValue, header: header, lines: tableLines, rightAligned: [2, 3, 4, 5, 6, 7, 9, 10], note: note)
}

func memoryTable(_ figures: [MemoryFigure], describe: Bool) -> Table {
    var header = ["implementation", "scenario", "bytes", "per", "baseline", "baseline bytes", "ratio"]
    if describe { header.append("what is measured") }
    let lines = figures.map { figure in
        var line = [
            Implementation(scenario: figure.scenario.name).rawValue, figure.scenario.name, formatBytes(figure.bytes), figure.scenario.unit,
        ]
        if let baseline = figure.scenario.baseline, let baselineBytes = figure.baselineBytes {
            line += [baseline, formatBytes(baselineBytes), baselineBytes > 0 ? formatRatio(figure.bytes / baselineBytes) : ""]
        } else {
            line += ["—", "", ""]
        }
        if describe { line.append(figure.scenario.summary) }
        return line
    }
    return Table(
        title: "Memory (bytes allocated per unit, allocator overhead included)", header: header, lines: lines, rightAligned: [2, 5, 6])
}

/// The cross-process section: a heading and one line per span, or one line saying why it did not run.
func latencyLines(_ outcome: LatencyOutcome, markdown: Bool) -> [String] {
    outcome.lines(unavailable: DefaultsLatency.name) { result in
        let heading =
            "Cross-process notification latency, ObservableDefaults (\(result.fromSet.count) changes, one at a time; "
            + "writer: this process, set + flush(); observer: kvo-bench \(DefaultsLatency.watchCommand) in another process, "
            + "stamped with CLOCK_MONOTONIC)"
        var lines = [markdown ? "### \(heading)\n" : heading]
        let spans = [
            // Each span runs from an event that causes the other: none can be negative.
            ("rename (of the fsynced file) → observer call — what watching costs", result.fromReplace),
            ("set() start (whole durable write included) → observer call — what a writer's change takes to arrive", result.fromSet),
            ("set() start → flush() return — the durable write alone (fsyncs), no observer", result.durableWrite),
            ("directory layer: rename of a key's file → observer call (a Secret's update, an operator's mv)", result.fromDirectoryRename),
        ]
        for (label, sorted) in spans where !sorted.isEmpty {
            let row =
                "\(label): p50 \(formatDuration(nanoseconds: percentile(sorted, 0.5))), "
                + "p90 \(formatDuration(nanoseconds: percentile(sorted, 0.9))), "
                + "p99 \(formatDuration(nanoseconds: percentile(sorted, 0.99))), max \(formatDuration(nanoseconds: sorted.last!))"
            lines.append(markdown ? "- \(row)" : "  \(row)")
        }
        let beside =
            "for comparison (documented, not measured: not a dependency): swift-configuration's ReloadingFileProvider polls "
            + "its file every 15 s by default"
        lines.append(markdown ? "- \(beside)" : "  \(beside)")
        return lines
    }
}

/// What the latency section found.
typealias LatencyOutcome = SectionOutcome<DefaultsLatency.Result>

/// What a section that needs something outside the process (another process, etcd) found: its
/// result, or why it did not run.
enum SectionOutcome<Result> {
    case measured(Result)
    case unavailable(String)

    /// `lines(result)`, or one line `NAME: REASON` when the section did not run.
    func lines(unavailable name: String, _ lines: (Result) -> [String]) -> [String] {
        switch self {
        case .measured(let result): lines(result)
        case .unavailable(let reason): ["\(name): \(reason)"]
        }
    }
}
