/// The units of one progress node, as a pure value: what `fractionCompleted`, `isFinished` and
/// `isIndeterminate` are computed from, with Foundation's rules.
struct _ProgressCounts {
    var total: Int64
    var completed: Int64
    /// The sum of the contributions of the node's unfinished children, in units of the node
    /// (a child's fraction times its pending units), each exact (see `_ProgressUnits`). Integers
    /// add exactly and in any order, so the sum never drifts, however many updates arrive and in
    /// whatever order the children's threads deliver them, and it returns to exactly zero when the
    /// children's contributions do.
    var childUnits = _ProgressUnits.zero

    /// What the counts amount to, by Foundation's rules: indeterminate when completed or total is
    /// below zero or both are zero (fraction 0, not finished); otherwise finished when completed is
    /// at least total (so a total of 0 with units completed is finished, fraction 1); the fraction is
    /// own completed units plus the children's contributions over total, above 1 when over-completed.
    var values: _ProgressValues {
        @inline(__always) get {
            let indeterminate = completed < 0 || total < 0 || (completed | total) == 0
            let fraction: Double =
                indeterminate
                ? 0
                : total == 0
                    ? 1
                    : childUnits.fraction(plus: completed, over: total)
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

extension _ProgressCounts {
    /// The count after an in-place mutation that read `read` and left `value`, now that the count
    /// is `current`: `value` itself when nothing changed it meanwhile (exact even where the
    /// difference would overflow, as in a swap of `.max` and a negative count), otherwise `current`
    /// plus the mutation's difference, computed without intermediate overflow (the difference
    /// alone may not fit in an `Int64` when the result does). Traps if the result does not fit.
    @inline(__always)
    static func merging(_ value: Int64, read: Int64, into current: Int64, _ name: StaticString) -> Int64 {
        if current == read { return value }
        let merged = Int64(exactly: Int128(current) + (Int128(value) - Int128(read)))
        guard let merged else {
            preconditionFailure(
                "ObservableProgress.\(name): an in-place change from \(read) to \(value), applied to \(current) (another thread changed it meanwhile), overflows"
            )
        }
        return merged
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
