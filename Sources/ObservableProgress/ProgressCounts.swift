/// The units of one progress node, as a pure value: what `fractionCompleted`, `isFinished` and
/// `isIndeterminate` are computed from, with Foundation's rules.
struct _ProgressCounts {
    var total: Int64
    var completed: Int64
    /// The sum of the contributions of the node's unfinished children, in units of the node
    /// (a child's fraction times its pending units), as fixed-point numbers with 32 fractional
    /// bits. Integers add exactly and in any order, so the sum never drifts, however many updates
    /// arrive and in whatever order the children's threads deliver them. The price: each child's
    /// contribution is truncated to a multiple of 2^-32 of a unit (Foundation's doubles are off by their own
    /// rounding instead, which accumulates).
    var childUnits: Int128 = 0

    /// What the counts amount to, by Foundation's rules: indeterminate when completed or total is
    /// below zero or both are zero (fraction 0, not finished); otherwise finished when completed is
    /// at least total (so a total of 0 with units completed is finished, fraction 1); the fraction is
    /// own completed units plus the children's contributions over total, above 1 when over-completed.
    var values: _ProgressValues {
        @inline(__always) get {
            let indeterminate = completed < 0 || total < 0 || (completed | total) == 0
            let fraction: Double = indeterminate ? 0
                : total == 0 ? 1
                : (Double(completed) + _units(childUnits)) / Double(total)
            return _ProgressValues(
                completed: completed,
                total: total,
                fraction: fraction,
                isFinished: !indeterminate && completed >= total,
                isIndeterminate: indeterminate
            )
        }
    }
}

/// The observable values of a node at one moment, computed under its lock.
struct _ProgressValues {
    var completed: Int64
    var total: Int64
    var fraction: Double
    var isFinished: Bool
    var isIndeterminate: Bool

    /// The time left at `fractionPerSecond`, in seconds, if the progress is determinate, unfinished
    /// and advancing.
    func secondsRemaining(at fractionPerSecond: Double?) -> Double? {
        guard !isIndeterminate, !isFinished, let fractionPerSecond, fractionPerSecond > 0 else { return nil }
        let seconds = (1 - fraction) / fractionPerSecond
        return seconds.isFinite ? seconds : nil
    }
}

/// `units` (in parent units) as fixed point with 32 fractional bits.
@inline(__always)
func _fixedPoint(_ units: Double) -> Int128 {
    let scaled = units * 0x1p32
    // The common case (under 2^31 units) converts through Int64, which the hardware does directly.
    // Truncated: rounding to nearest measured ~85 instructions more per update (three levels).
    if abs(scaled) < 0x1p62 { return Int128(Int64(scaled)) }
    guard scaled.isFinite else { return 0 }
    // Beyond any real count of units; clamped so that sums of many cannot overflow.
    return Int128(max(min(scaled, 0x1p120), -0x1p120))
}

/// A fixed-point number with 32 fractional bits as a `Double`.
@inline(__always)
func _units(_ fixedPoint: Int128) -> Double {
    if let small = Int64(exactly: fixedPoint) { return Double(small) * 0x1p-32 }
    return Double(fixedPoint) * 0x1p-32
}
