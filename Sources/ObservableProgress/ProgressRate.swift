#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// The recent history of a node's fraction, from which throughput and time remaining are
/// estimated. Updated by every change of the fraction, at most one sample per `sampleInterval`, so
/// a per-byte update loop pays one comparison; queried when someone asks.
///
/// The estimate is the average rate between the oldest kept sample (about five seconds ago while
/// updates flow) and now, so it follows changes of speed within seconds and falls when updates
/// stop arriving. There is none until the kept samples are at least `minimumSamples` (the one
/// taken when the node was made included) and span at least `minimumSpan` from the oldest to the
/// newest: a few milliseconds of updates, or a single update, say nothing of the speed to come.
struct _ProgressRate {
    static let sampleInterval: UInt64 = 250_000_000
    static let capacity = 20
    static let minimumSamples = 3
    static let minimumSpan: UInt64 = 1_000_000_000

    private var times: ContiguousArray<UInt64> = []
    private var fractions: ContiguousArray<Double> = []
    /// Index of the oldest sample once the ring is full.
    private var oldest = 0
    /// When the next sample may be taken: `sampleInterval` after the last one.
    private var nextSampleTime: UInt64
    /// The clock, read sparingly (see `time()`).
    private var lastClock: UInt64
    private var clockStride = 0
    private var clockSkipped = 0

    init(fraction: Double, now: UInt64) {
        nextSampleTime = now &+ Self.sampleInterval
        lastClock = now
        times.reserveCapacity(Self.capacity)
        fractions.reserveCapacity(Self.capacity)
        times.append(now)
        fractions.append(fraction)
    }

    /// The time of an update of this node, for `record`. While updates come less than a
    /// millisecond apart, the clock is read only every few updates (up to every 64th) and the last
    /// reading stands in for the others; when they come slower, it is read for every one. A sample
    /// may thus be stamped early: by about a millisecond while updates flow, by the length of a
    /// pause for the first few updates after it (at most 63), which shifts one sample of the
    /// window and leaves the estimate's trend intact.
    @inline(__always)
    mutating func time(_ clock: _ProgressClock) -> UInt64 {
        if clockSkipped < clockStride {
            clockSkipped &+= 1
            return lastClock
        }
        return readClock(clock)
    }

    private mutating func readClock(_ clock: _ProgressClock) -> UInt64 {
        let now = clock.now()
        clockStride = now &- lastClock < 1_000_000 ? min(clockStride &* 2 &+ 1, 63) : 0
        clockSkipped = 0
        lastClock = now
        return now
    }

    /// Records `fraction` at `now` if the last sample is old enough.
    @inline(__always)
    mutating func record(fraction: Double, now: UInt64) {
        // Parents are stamped with their children's times, which may arrive out of order: a time
        // before the last sample is before the next one too.
        guard now >= nextSampleTime else { return }
        append(fraction: fraction, now: now)
    }

    private mutating func append(fraction: Double, now: UInt64) {
        nextSampleTime = now &+ Self.sampleInterval
        if times.count < Self.capacity {
            times.append(now)
            fractions.append(fraction)
        } else {
            times[oldest] = now
            fractions[oldest] = fraction
            oldest = (oldest + 1) % Self.capacity
        }
    }

    /// Fraction per second between the oldest kept sample and `fraction` at `now`, or `nil` until
    /// there are `minimumSamples` samples spanning `minimumSpan`.
    func fractionPerSecond(current fraction: Double, now: UInt64) -> Double? {
        guard times.count >= Self.minimumSamples else { return nil }
        let start = times[oldest]
        // Samples are taken in increasing time order; the newest is just before the oldest in the ring.
        let newest = times[(oldest == 0 ? times.count : oldest) - 1]
        guard newest - start >= Self.minimumSpan, now > start else { return nil }
        return (fraction - fractions[oldest]) / (Double(now - start) * 1e-9)
    }
}

/// Where a progress reads the time: the coarse clock (`_coarseNanoseconds()`), or, for tests, a
/// function that must return a non-decreasing time and must not call out (it may run under the
/// node's lock).
package struct _ProgressClock: Sendable {
    private let read: (@Sendable () -> UInt64)?

    /// The coarse monotonic clock.
    init() {
        read = nil
    }

    /// A clock that reads `read`, in nanoseconds (a manual clock in tests).
    package init(_ read: @escaping @Sendable () -> UInt64) {
        self.read = read
    }

    @inline(__always)
    func now() -> UInt64 {
        if let read { return read() }
        return _coarseNanoseconds()
    }
}

/// Monotonic time in nanoseconds from the coarse clock (a few milliseconds of resolution, read
/// without a system call or a hardware timer): cheap enough for every update.
@inline(__always)
func _coarseNanoseconds() -> UInt64 {
    #if canImport(Darwin)
    return clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW_APPROX)
    #else
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
    return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    #endif
}
