import KeyValueObserving
import Testing
@testable import ObservableProgress

@Suite("Progress description, throughput and time remaining")
struct EstimatesTests {
    @Test func descriptionSaysPercentAndUnits() {
        let progress = ObservableProgress(totalUnitCount: 10)
        progress.completedUnitCount = 3
        #expect(progress.description.hasPrefix("30% completed (3 of 10)"))
        progress.completedUnitCount = 10
        #expect(progress.description == "100% completed (10 of 10)")
    }

    @Test func descriptionNamesIndeterminateCancelledAndPaused() {
        let progress = ObservableProgress(totalUnitCount: -1)
        progress.completedUnitCount = 3
        progress.pause()
        #expect(progress.description == "indeterminate (3 completed), paused")
        progress.resume()
        progress.cancel()
        #expect(progress.description == "indeterminate (3 completed), cancelled")
    }

    @Test func rateIsTheAverageOverTheKeptSamples() {
        var rate = _ProgressRate(fraction: 0, now: 0)
        // 0.1 per second, sampled every half second.
        for step in 1...10 {
            rate.record(fraction: Double(step) * 0.05, now: UInt64(step) * 500_000_000)
        }
        let perSecond = try! #require(rate.fractionPerSecond(current: 0.5, now: 5_000_000_000))
        #expect(abs(perSecond - 0.1) < 1e-12)
    }

    @Test func rateFollowsRecentSpeedAndFallsWhenUpdatesStop() {
        var rate = _ProgressRate(fraction: 0, now: 0)
        let second: UInt64 = 1_000_000_000
        // Slow for 100 s (0.001/s), then fast for 10 s (0.05/s): only recent samples count.
        var fraction = 0.0
        for step in 1...400 {
            fraction += 0.00025
            rate.record(fraction: fraction, now: UInt64(step) * second / 4)
        }
        for step in 1...40 {
            fraction += 0.0125
            rate.record(fraction: fraction, now: 100 * second + UInt64(step) * second / 4)
        }
        let recent = try! #require(rate.fractionPerSecond(current: fraction, now: 110 * second))
        #expect(abs(recent - 0.05) < 1e-9)
        // Nothing for 10 s more: the estimate halves.
        let stalled = try! #require(rate.fractionPerSecond(current: fraction, now: 120 * second))
        #expect(stalled < recent * 0.6)
    }

    @Test func samplesAreTakenAtMostFourTimesASecond() {
        var rate = _ProgressRate(fraction: 0, now: 0)
        // A thousand updates within 100 ms add no sample: the oldest sample stays the start (had
        // each added one, the ring of 20 would start at 98.1 ms, and the rate would read 0.22).
        for step in 1...1_000 {
            rate.record(fraction: Double(step) * 0.0001, now: UInt64(step) * 100_000)
        }
        rate.record(fraction: 0.2, now: 500_000_000)
        rate.record(fraction: 0.3, now: 1_000_000_000)
        let perSecond = try! #require(rate.fractionPerSecond(current: 0.3, now: 1_000_000_000))
        #expect(abs(perSecond - 0.3) < 1e-12)
    }

    @Test func finishedProgressHasNoTimeRemaining() {
        let progress = ObservableProgress(totalUnitCount: 1)
        progress.complete()
        #expect(progress.estimatedTimeRemaining == .zero)
        #expect(ObservableProgress(totalUnitCount: -1).estimatedTimeRemaining == nil)
        #expect(ObservableProgress(totalUnitCount: -1).throughput == nil)
    }

    @Test func formatsAreReadable() {
        #expect(_formatRate(1234.5) == "1235")
        #expect(_formatRate(12.345) == "12.3")
        #expect(_formatRate(1.5) == "1.5")
        #expect(_formatRate(0.012345) == "0.0123")
        #expect(_formatRemaining(42) == "about 42 s remaining")
        #expect(_formatRemaining(185) == "about 3 min 5 s remaining")
        #expect(_formatRemaining(7_620) == "about 2 h 7 min remaining")
    }

    @Test func throughputIsAggregatedUpTheTree() throws {
        // The root (2 units) counts its child (100 units, 1 pending unit) at half its fraction: the
        // root's estimate is the child's, seen in the root's units. Time is a manual clock.
        let time = Locked<UInt64>(1_000_000_000)
        let clock = _ProgressClock { time.current }
        let root = ObservableProgress(totalUnitCount: 2, clock: clock)
        let child = ObservableProgress(totalUnitCount: 100, clock: clock)
        root.addChild(child, withPendingUnitCount: 1)
        // 10 units of the child at once, then 10 every 250 ms: samples at 0, 0.25, 0.5 and 0.75 s
        // span less than a second.
        child.complete(count: 10)
        for _ in 1...3 {
            time.withLock { $0 += 250_000_000 }
            child.complete(count: 10)
        }
        #expect(root.throughput == nil)
        #expect(child.throughput == nil)
        time.withLock { $0 += 250_000_000 }
        child.complete(count: 10)
        // child: 0.5 of its fraction in 1 s; root: 0.25 of its fraction in the same time.
        let rootUnits = try #require(root.throughput)
        let childUnits = try #require(child.throughput)
        #expect(abs(rootUnits - 0.25 * 2) < 1e-9)
        #expect(abs(childUnits - 0.5 * 100) < 1e-9)
        // 0.75 left at 0.25 per second: 3 s.
        let remaining = try #require(root.estimatedTimeRemaining)
        #expect(abs(remaining / .seconds(1) - 3) < 1e-9)
        #expect(root.description == "25% completed (0 of 2), 0.5 units/s, about 3 s remaining")
    }

    @Test func estimatesWaitForThreeSamplesSpanningASecond() throws {
        // 2,810 of 4,000 units 4 ms in: no rate yet (it would read 702,500 units/s).
        let time = Locked<UInt64>(1_000_000_000)
        let clock = _ProgressClock { time.current }
        let progress = ObservableProgress(totalUnitCount: 4_000, clock: clock)
        for units: Int64 in [702, 703, 702, 703] {
            time.withLock { $0 += 1_000_000 }
            progress.complete(count: units)
        }
        #expect(progress.throughput == nil)
        #expect(progress.estimatedTimeRemaining == nil)
        #expect(progress.description == "70% completed (2810 of 4000)")
        // Then 10 units every 250 ms. Samples at 0, 0.254, 0.504 and 0.754 s are enough in
        // number but span less than a second: still no rate.
        for _ in 1...3 {
            time.withLock { $0 += 250_000_000 }
            progress.complete(count: 10)
        }
        #expect(progress.throughput == nil)
        #expect(progress.estimatedTimeRemaining == nil)
        #expect(progress.description == "71% completed (2840 of 4000)")
        // The fifth sample, at 1.004 s: 2,850 units in 1.004 s, 1,150 units left, 0.405 s.
        time.withLock { $0 += 250_000_000 }
        progress.complete(count: 10)
        let units = try #require(progress.throughput)
        #expect(abs(units - 2_850 / 1.004) < 1e-6)
        let remaining = try #require(progress.estimatedTimeRemaining)
        #expect(abs(remaining / .seconds(1) - 1_150 / (2_850 / 1.004)) < 1e-9)
        #expect(progress.description == "71% completed (2850 of 4000), 2839 units/s, less than a second remaining")
    }

    @Test func aProgressSetOnceHasNoRateAndNeitherHasItsParent() {
        let time = Locked<UInt64>(1_000_000_000)
        let clock = _ProgressClock { time.current }
        let parent = ObservableProgress(totalUnitCount: 1, clock: clock)
        let child = ObservableProgress(totalUnitCount: 4_000, clock: clock)
        parent.addChild(child, withPendingUnitCount: 1)
        time.withLock { $0 += 2_000_000_000 }
        child.completedUnitCount = 2_500
        time.withLock { $0 += 2_000_000_000 }
        #expect(child.throughput == nil)
        #expect(child.estimatedTimeRemaining == nil)
        #expect(child.description == "63% completed (2500 of 4000)")
        #expect(parent.throughput == nil)
        #expect(parent.estimatedTimeRemaining == nil)
    }

    @Test func timeRemainingIsWordedToAgreeWithTheRate() throws {
        // 100 units, 60 done over 2 s at 30 units/s: 40 left, 1.33 s, which is "about 1 s" (it
        // was rounded up to 2 s).
        let time = Locked<UInt64>(1_000_000_000)
        let clock = _ProgressClock { time.current }
        let progress = ObservableProgress(totalUnitCount: 100, clock: clock)
        for _ in 1...8 {
            time.withLock { $0 += 250_000_000 }
            progress.complete(count: 7)
        }
        progress.complete(count: 4)
        #expect(progress.description == "60% completed (60 of 100), 30 units/s, about 1 s remaining")
        #expect(_formatRemaining(0.002) == "less than a second remaining")
        #expect(_formatRemaining(0.999) == "less than a second remaining")
        #expect(_formatRemaining(1.0) == "about 1 s remaining")
        #expect(_formatRemaining(1.49) == "about 1 s remaining")
        #expect(_formatRemaining(1.5) == "about 2 s remaining")
        #expect(_formatRemaining(185.4) == "about 3 min 5 s remaining")
        #expect(_formatRemaining(7_620) == "about 2 h 7 min remaining")
    }
}
