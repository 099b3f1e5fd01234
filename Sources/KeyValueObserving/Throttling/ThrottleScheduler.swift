import Dispatch

/// The clock and the queues a throttle runs on: dispatch queues on the monotonic clock, or, in
/// tests, a clock the test advances by hand (so no test sleeps to see a throttle work).
package protocol _ThrottleScheduler: Sendable {
    /// The current time on a monotonic clock, from an arbitrary origin.
    func now() -> Duration

    /// Runs `work` on `queue` at `deadline` on the clock of `now()`: at once if it is `nil` or past.
    func run(on queue: DispatchQueue, at deadline: Duration?, _ work: @escaping @Sendable () -> Void)
}

/// Dispatch's queues and its monotonic clock: what the public throttling API runs on.
package struct _DispatchThrottleScheduler: _ThrottleScheduler {
    package init() {}

    package func now() -> Duration {
        .nanoseconds(DispatchTime.now().uptimeNanoseconds)
    }

    package func run(on queue: DispatchQueue, at deadline: Duration?, _ work: @escaping @Sendable () -> Void) {
        guard let deadline else {
            queue.async(execute: work)
            return
        }
        let delay = deadline - now()
        guard delay > .zero else {
            queue.async(execute: work)
            return
        }
        queue.asyncAfter(deadline: .now() + .nanoseconds(_nanoseconds(delay)), execute: work)
    }
}

/// `duration` in whole nanoseconds, rounded up, at most `Int.max` (about 292 years).
func _nanoseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    guard seconds < Int64(Int.max / 1_000_000_000) - 1 else { return .max }
    return Int(seconds) * 1_000_000_000 + Int((attoseconds + 999_999_999) / 1_000_000_000)
}
