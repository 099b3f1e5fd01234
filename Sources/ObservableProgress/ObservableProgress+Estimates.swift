import KeyValueObserving

extension ObservableProgress {
    /// Units of this progress completed per second, recently (over the last few seconds of
    /// updates), children's progress included; `nil` until time has passed, or while the total is
    /// indeterminate. Neither Foundation's `Progress` nor `ProgressManager` computes it.
    ///
    /// Computed from the changes of `fractionCompleted` (sampled at most four times a second as
    /// updates arrive), so at a parent it aggregates the whole subtree. Not observable (it changes
    /// with time, not with updates): read it when you report.
    public var throughput: Double? {
        let now = clock.now()
        return withRefreshedLock { progress -> Double? in
            let values = progress.values
            guard !values.isIndeterminate, values.total > 0,
                let rate = progress.rate.fractionPerSecond(current: values.fraction, now: now)
            else { return nil }
            return rate * Double(values.total)
        }
    }

    /// The time left at the recent rate: zero once finished, `nil` while indeterminate, before
    /// time has passed, or while no progress is being made.
    public var estimatedTimeRemaining: Duration? {
        let now = clock.now()
        return withRefreshedLock { progress -> Duration? in
            let values = progress.values
            if values.isFinished { return .zero }
            let rate = progress.rate.fractionPerSecond(current: values.fraction, now: now)
            guard let seconds = values.secondsRemaining(at: rate), seconds < 1e12 else { return nil }
            return .seconds(seconds)
        }
    }
}

extension ObservableProgress: CustomStringConvertible {
    /// A one-line, English-only summary for logs: `"42% completed (42 of 100), 12.5 units/s, about
    /// 5 s remaining"`, `"indeterminate (3 completed)"`, with `", paused"` or `", cancelled"`.
    public var description: String {
        let now = clock.now()
        let (values, fractionRate, cancelled, paused) = withRefreshedLock { progress in
            (
                progress.values,
                progress.rate.fractionPerSecond(current: progress.values.fraction, now: now),
                progress.cancelled,
                progress.paused
            )
        }
        var text: String
        if values.isIndeterminate {
            text = "indeterminate (\(values.completed) completed)"
        } else {
            // Clamped: a wildly over-completed progress must not trap converting to Int.
            let percent = min((values.fraction * 100).rounded(), 1e15)
            text = "\(Int(percent))% completed (\(values.completed) of \(values.total))"
            if !values.isFinished, values.total > 0, let fractionRate, fractionRate > 0 {
                text += ", \(_formatRate(fractionRate * Double(values.total))) units/s"
                if let seconds = values.secondsRemaining(at: fractionRate), seconds < 1e9 {
                    text += ", about \(_formatSeconds(seconds)) remaining"
                }
            }
        }
        if cancelled { text += ", cancelled" }
        if paused { text += ", paused" }
        return text
    }
}

/// `1234.5` → `"1235"`, `12.345` → `"12.3"`, `0.01234` → `"0.0123"`: three significant digits at
/// most, no exponent.
func _formatRate(_ value: Double) -> String {
    if value >= 1e15 { return "more than 10^15" }
    if value >= 100 { return String(Int(value.rounded())) }
    let decimals = value >= 10 ? 1 : value >= 1 ? 2 : 4
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    var text = String(rounded)
    if text.hasSuffix(".0") { text.removeLast(2) }
    return text
}

/// Seconds as `"42 s"`, `"3 min 5 s"`, `"2 h 7 min"`.
func _formatSeconds(_ seconds: Double) -> String {
    let total = Int(seconds.rounded(.up))
    if total < 60 { return "\(total) s" }
    if total < 3600 { return "\(total / 60) min \(total % 60) s" }
    return "\(total / 3600) h \((total % 3600) / 60) min"
}
