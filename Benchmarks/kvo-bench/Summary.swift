// The lines that open a benchmark run: this package against each alternative, in a phrase, from the
// p50s of the same run. A line appears when the run measured both sides (a --filter can drop it).

/// One summary line: what was measured and how it compares.
struct SummaryLine {
    let label: String
    let text: String
}

func summaryLines(_ rows: [ReportRow], memory: [MemoryFigure]?, latency: LatencyOutcome?) -> [SummaryLine] {
    let p50 = Dictionary(rows.map { ($0.scenario.name, $0.measurement.p50) }, uniquingKeysWith: { first, _ in first })
    /// "25× faster than NotificationCenter, 41× faster than Observation" for the alternatives measured.
    func against(_ ours: String, _ alternatives: [(scenario: String, name: String)]) -> String? {
        guard let mine = p50[ours] else { return nil }
        let phrases = alternatives.compactMap { alternative in
            p50[alternative.scenario].map { speedPhrase(mine / $0, than: alternative.name) }
        }
        return phrases.isEmpty ? nil : phrases.joined(separator: ", ")
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
    add(
        "KeyValueObserving, set of an unobserved @Observed",
        p50["unobserved-set"].flatMap { mine in
            p50["plain-set"].map { speedPhrase(mine / $0, than: "a plain stored property") }
        })
    add(
        "KeyValueObserving, tracked observation (3 reads)",
        against("tracked-set-3-reads", [("tracked-rearmed-observation", "Observation re-armed (withObservationTracking)")]))
    add(
        "KeyValueObserving, async values(for:)",
        against(
            "values-handoff",
            [
                ("asyncstream-handoff", "a plain AsyncStream"), ("observations-handoff", "Observation's Observations"),
            ]))
    add(
        "ObservableProgress, leaf update, 3 levels",
        against(
            "progress-leaf-observed-root",
            [
                ("foundation-progress-3-levels", "Foundation Progress")
            ]
        ).map { "\($0) (ours with an observer of the root; Foundation's unobserved, it has none on Linux)" })
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
