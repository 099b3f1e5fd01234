import KeyValueObserving

extension ObservableProgress {
    /// Units of this progress completed per second, recently (over the last few seconds of
    /// updates), children's progress included; `nil` while the total is indeterminate, and until
    /// there is enough history to estimate from: at least 3 samples of `fractionCompleted`,
    /// spanning at least 1 second. Neither Foundation's `Progress` nor `ProgressManager` computes
    /// it.
    ///
    /// Computed from the changes of `fractionCompleted` (sampled at most four times a second as
    /// updates arrive, plus one sample when the progress is made), so at a parent it aggregates the
    /// whole subtree: a progress updated without pause reports its first rate about a second after
    /// it was made, a progress set once reports none. Not observable (it changes with time, not
    /// with updates): read it when you report.
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

    /// The time left at the recent rate (`throughput`): zero once finished; `nil` while
    /// indeterminate, while there is no rate yet (see `throughput`), or while no progress is being
    /// made.
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
    /// 5 s remaining"`, `"indeterminate (3 completed)"`, with `", paused"` or `", cancelled"`. The
    /// rate and the time remaining appear once `throughput` has a value; the time remaining is
    /// rounded to the nearest second (`"less than a second remaining"` below one), so it agrees
    /// with the rate and the units left.
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
                    text += ", \(_formatRemaining(seconds))"
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

/// Time remaining as `"less than a second remaining"` below one second, otherwise rounded to the
/// nearest second: `"about 42 s remaining"`, `"about 3 min 5 s remaining"`, `"about 2 h 7 min
/// remaining"`. (Rounded up, 2 ms read "about 1 s", and 1.3 s "about 2 s".)
func _formatRemaining(_ seconds: Double) -> String {
    if seconds < 1 { return "less than a second remaining" }
    let total = Int(seconds.rounded())
    let text =
        total < 60
        ? "\(total) s"
        : total < 3600 ? "\(total / 60) min \(total % 60) s" : "\(total / 3600) h \((total % 3600) / 60) min"
    return "about \(text) remaining"
}
