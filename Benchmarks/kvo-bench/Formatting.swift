import Foundation

/// Nanoseconds with precision that suits their size.
func formatNanoseconds(_ value: Double) -> String {
    if value < 10 { return String(format: "%.2f", value) }
    if value < 1000 { return String(format: "%.1f", value) }
    return String(format: "%.0f", value)
}

/// A duration in µs below a millisecond, in ms above (the latency section's unit).
func formatDuration(nanoseconds: Double) -> String {
    nanoseconds.magnitude >= 1_000_000
        ? "\(formatNumber((nanoseconds / 1_000_000 * 100).rounded() / 100)) ms"
        : "\(formatNumber((nanoseconds / 1_000).rounded())) µs"
}

func formatRatio(_ ratio: Double) -> String {
    ratio < 0.1 ? String(format: "%.3f×", ratio) : String(format: "%.2f×", ratio)
}

func formatNumber(_ value: Double) -> String {
    value == value.rounded() ? String(Int(value)) : String(format: "%g", value)
}

func formatBytes(_ value: Double) -> String {
    value.magnitude >= 100 ? String(format: "%.0f", value) : String(format: "%.1f", value)
}

/// A factor for people: "41×" from 10 up, "2.3×" below.
private func formatFactor(_ factor: Double) -> String {
    factor >= 10 ? "\(Int(factor.rounded()))×" : String(format: "%.1f×", factor)
}

/// "88–102×" (whole factors from 10 up, as `formatFactor`).
private func formatFactorRange(_ low: Double, _ high: Double) -> String {
    "\(formatFactor(low).dropLast())–\(formatFactor(high))"
}

/// A paired ratio for a table: "0.011× [0.010–0.012]" (median [lowest–highest]).
func formatRatio(_ ratio: PairedRatio) -> String {
    "\(formatRatio(ratio.median)) [\(formatRatio(ratio.lowest).dropLast())–\(formatRatio(ratio.highest).dropLast())]"
}

/// What a paired ratio means, with how far the rounds disagree: "95× faster [88–102×]", "1.4×
/// slower [1.3–1.5×]", "about as fast [0.97–1.04×]"; with `than`, the comparison is completed
/// ("95× faster than X [88–102×]"). A ratio whose rounds disagree on which side is faster (its range
/// spans 1×) is marked: "1.1× faster than X (unstable: from 1.3× faster to 1.2× slower over
/// rounds)".
func speedPhrase(_ ratio: PairedRatio, than other: String? = nil) -> String {
    let phrase = speedPhrase(ratio.median, than: other)
    if ratio.isUnstable {
        return phrase + " (unstable: from \(formatFactor(1 / ratio.lowest)) faster to \(formatFactor(ratio.highest)) slower over rounds)"
    }
    if ratio.median > 0.95 && ratio.median < 1.05 {
        return phrase + " [\(formatRatio(ratio.lowest).dropLast())–\(formatRatio(ratio.highest))]"
    }
    let range = ratio.median < 1 ? formatFactorRange(1 / ratio.highest, 1 / ratio.lowest) : formatFactorRange(ratio.lowest, ratio.highest)
    return "\(phrase) [\(range)]"
}

/// What a ratio (this p50 / the other's p50) means: "25× faster", "1.4× slower", or "about as fast"
/// within 5%; with `than`, the comparison is completed ("25× faster than X", "about as fast as X").
func speedPhrase(_ ratio: Double, than other: String? = nil) -> String {
    if ratio > 0.95 && ratio < 1.05 { return "about as fast" + (other.map { " as \($0)" } ?? "") }
    let phrase = ratio < 1 ? "\(formatFactor(1 / ratio)) faster" : "\(formatFactor(ratio)) slower"
    return phrase + (other.map { " than \($0)" } ?? "")
}

/// The nearest-rank percentile of ascending `sorted` values.
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    sorted[min(max(Int((fraction * Double(sorted.count)).rounded(.up)), 1), sorted.count) - 1]
}
