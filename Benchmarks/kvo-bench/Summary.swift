// The lines that open a benchmark run: this package against each alternative, in a phrase, from the
// ratios of the same run paired round by round (median [range]; a ratio whose rounds disagree on
// which side is faster is marked unstable). A line appears when the run measured both sides (a
// --filter can drop it).

/// One summary line: what was measured and how it compares.
struct SummaryLine {
    let label: String
    let text: String
}

/// A summary line's comparisons, one phrase per alternative measured: "25× faster than
/// NotificationCenter [22–27×], 41× faster than Observation [38–45×]"; a ratio whose paired range
/// spans 1× is marked unstable, with the range (`speedPhrase`). `nil` when there is none.
func comparisonsText(_ comparisons: [(ratio: PairedRatio, name: String)]) -> String? {
    comparisons.isEmpty ? nil : comparisons.map { speedPhrase($0.ratio, than: $0.name) }.joined(separator: ", ")
}

/// Where hand-offs delivered an earlier value first, or nothing in time: "Observation's
/// Observations: an earlier value came first in 48.2% of rounds, as it coalesces by design; those
/// rounds are not in its latency", for each tally with such rounds; `nil` when none has.
func staleNote(_ tallies: [(tally: DeliveryTally, name: String, coalescesByDesign: Bool)]) -> String? {
    let notes = tallies.compactMap { entry -> String? in
        let tally = entry.tally
        guard tally.staleFirst > 0 || tally.timeouts > 0 else { return nil }
        var parts: [String] = []
        if tally.staleFirst > 0 {
            let percent = String(format: "%.1f%%", 100 * Double(tally.staleFirst) / Double(tally.rounds))
            parts.append(
                "an earlier value came first in \(percent) of rounds" + (entry.coalescesByDesign ? ", as it coalesces by design" : ""))
        }
        if tally.timeouts > 0 { parts.append("\(tally.timeouts) rounds had no delivery in time") }
        return "\(entry.name): \(parts.joined(separator: "; ")); those rounds are not in its latency"
    }
    return notes.isEmpty ? nil : notes.joined(separator: ". ")
}

func summaryLines(_ rows: [ReportRow], memory: [MemoryFigure]?, latency: LatencyOutcome?) -> [SummaryLine] {
    let measured = Dictionary(rows.map { ($0.scenario.name, $0.measurement) }, uniquingKeysWith: { first, _ in first })
    /// "25× faster than NotificationCenter [22–27×], 41× faster than Observation [38–45×]" for the
    /// alternatives measured.
    func against(_ ours: String, _ alternatives: [(scenario: String, name: String)]) -> String? {
        guard let mine = measured[ours] else { return nil }
        return comparisonsText(
            alternatives.compactMap { alternative in
                measured[alternative.scenario].map { (PairedRatio(mine.rounds, over: $0.rounds), alternative.name) }
            })
    }
    var lines: [SummaryLine] = []
    func add(_ label: String, _ text: String?) {
        if let text { lines.append(SummaryLine(label: label, text: text)) }
    }

    add(
        "KeyValueObserving, set with one observer",
        against(
            "observed-set-new",
            [
                ("notificationcenter-post", "a NotificationCenter post"), ("observation-rearmed", "Observation (re-armed tracking)"),
            ]))
    add(
        "KeyValueObserving, set with 1,000 observers",
        against(
            "observers-1000",
            [
                ("notificationcenter-observers-1000", "NotificationCenter"), ("observation-observers-1000", "Observation"),
            ]))
    add("KeyValueObserving, set of an unobserved @Observed", against("unobserved-set", [("plain-set", "a plain stored property")]))
    add(
        "KeyValueObserving, tracked observation (3 reads)",
        against("tracked-set-3-reads", [("tracked-rearmed-observation", "Observation re-armed (withObservationTracking)")]))
    let handOffs = [("asyncstream-handoff", "a plain AsyncStream"), ("observations-handoff", "Observation's Observations")]
    add(
        "KeyValueObserving, async values(for:)",
        against("values-handoff", handOffs).map { comparisons in
            let stale = staleNote(
                ([("values-handoff", "values(for:)")] + handOffs).compactMap { scenario, name in
                    measured[scenario]?.deliveries.map { ($0, name, Implementation(scenario: scenario) == .observation) }
                })
            return "a fresh delivery \(comparisons)" + (stale.map { ". \($0)" } ?? "")
        })
    add(
        "ObservableProgress, leaf update, 3 levels",
        against(
            "progress-leaf-observed-root",
            [
                ("foundation-progress-3-levels", "Foundation Progress")
            ]
        ).map { "\($0) (ours with an observer of the root; Foundation's unobserved, it has none on Linux)" })
    add(
        "ObservableDefaults, read",
        against(
            "defaults-read",
            [
                ("userdefaults-read", "UserDefaults.double(forKey:)"),
                ("plain-dictionary-read", "a [String: Double] lookup of a decoded value"),
            ]))
    add("ObservableDefaults, set, observed", against("defaults-set-observed", [("userdefaults-set", "UserDefaults.set")]))
    add(
        "ObservableDefaults, set + flush()",
        against(
            "defaults-durable-write",
            [
                ("userdefaults-set-synchronize", "UserDefaults.set + synchronize()")
            ]
        ).map { "\($0) (ours: lock, merge, fsync, rename; corelibs: rewrite in place)" })
    add(
        "ObservableDefaults, atomic update",
        against(
            "defaults-update",
            [
                ("userdefaults-increment-synchronize", "UserDefaults read + set + synchronize() (not atomic)")
            ]))
    if case .measured(let result)? = latency, !result.fromReplace.isEmpty {
        add(
            "ObservableDefaults, across processes",
            "another process's observer is called \(formatDuration(nanoseconds: percentile(result.fromReplace, 0.5))) (p50) after the file is replaced, "
                + "\(formatDuration(nanoseconds: percentile(result.fromSet, 0.5))) after set() starts")
    }
    if let memory {
        let bytes = Dictionary(memory.map { ($0.scenario.name, $0.bytes) }, uniquingKeysWith: { first, _ in first })
        func b(_ name: String) -> String? { bytes[name].map { "\(formatBytes($0)) B" } }
        if let ours = b("memory-unobserved-object") {
            var parts = ["\(ours) per object never observed"]
            if let plain = b("memory-plain-object") { parts.append("a plain Swift object: \(plain)") }
            if let observable = b("memory-observable-object") { parts.append("an @Observable object: \(observable)") }
            add("Memory, object", parts.joined(separator: "; "))
        }
        if let ours = b("memory-observer") {
            var parts = ["\(ours) per further observer"]
            if let center = b("memory-notificationcenter-observer") { parts.append("NotificationCenter: \(center)") }
            if let first = b("memory-first-observer") { parts.append("the first on an object \(first)") }
            if let tracking = b("memory-observation-tracking") { parts.append("Observation's tracking: \(tracking)") }
            add("Memory, observer", parts.joined(separator: "; "))
        }
    }
    return lines
}

/// The summary as aligned text lines, labels padded to one width.
func summaryText(_ lines: [SummaryLine]) -> String {
    let width = lines.map(\.label.count).max() ?? 0
    return lines.map { "  \($0.label):" + String(repeating: " ", count: width - $0.label.count) + " \($0.text)\n" }.joined()
}
