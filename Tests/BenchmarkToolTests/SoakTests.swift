import Foundation
import Testing

@testable import kvo_bench

/// The soak's verdict on memory in use (a pure function over samples, so a growing series can be
/// judged without growing anything) and a short real run.
@Suite("kvo-bench stress as a soak")
struct SoakTests {
    /// `count` samples `interval` seconds apart, each `bytes(seconds)`.
    func samples(_ count: Int = 40, every interval: Double = 0.5, _ bytes: (Double) -> Double) -> [MemorySample] {
        (0..<count).map { index in
            let seconds = Double(index) * interval
            return MemorySample(seconds: seconds, bytes: Int(bytes(seconds)))
        }
    }

    @Test func theSlopeIsTheLeastSquaresOne() throws {
        #expect(MemoryTrend.slope([(x: 0, y: 10), (x: 1, y: 12), (x: 2, y: 14)]) == 2)
        // Least squares, not the ends: the points (0, 0), (1, 3), (2, 0), (3, 3) lie about y = 0.6 x + 0.6.
        let slope = try #require(MemoryTrend.slope([(x: 0, y: 0), (x: 1, y: 3), (x: 2, y: 0), (x: 3, y: 3)]))
        #expect(abs(slope - 0.6) < 1e-9)
        #expect(MemoryTrend.slope([(x: 1, y: 10)]) == nil)
        #expect(MemoryTrend.slope([(x: 1, y: 10), (x: 1, y: 20)]) == nil)
    }

    @Test func theLimitIsTheNoiseSpreadOverTheSecondHalfDownToTheFloor() {
        #expect(MemoryTrend.limit(forDuration: 20) == 524_288.0 / 10)
        #expect(MemoryTrend.limit(forDuration: 1024) == 1024)
        #expect(MemoryTrend.limit(forDuration: 1200) == 1024)
    }

    @Test func aSeriesThatKeepsGrowingFailsNamingItsSlope() {
        // 20 s: 50 MB of warm-up, then 100 KB a second.
        let growing = samples { seconds in 50_000_000 + 100_000 * seconds }
        let verdict = MemoryTrend.judge(growing, duration: 20)
        guard case .growing(let slope, let count, let limit) = verdict else {
            Issue.record("judged \(verdict)")
            return
        }
        #expect(abs(slope - 100_000) < 1e-6)
        #expect(count == 20)
        #expect(limit == 52_428.8)
        let report = MemoryTrend.report(verdict)
        #expect(report.fails)
        #expect(report.line.contains("grew by +100000.0 bytes/s"), "\(report.line)")
        #expect(report.line.contains("limit of 52428.8 bytes/s"), "\(report.line)")
    }

    @Test func aSlowLeakFailsALongRunThroughTheNoise() {
        // 20 minutes, a sample every 10 s: 2 KB a second under swings of 300 KB.
        let noisy = samples(120, every: 10) { seconds in
            50_000_000 + 2_000 * seconds + (Int(seconds / 10) % 3 == 0 ? 200_000 : -100_000)
        }
        guard case .growing(let slope, let count, let limit) = MemoryTrend.judge(noisy, duration: 1200) else {
            Issue.record("judged \(MemoryTrend.judge(noisy, duration: 1200))")
            return
        }
        #expect(count == 60)
        #expect(limit == 1024)
        #expect(abs(slope - 2_000) < 200)
    }

    @Test func growthInTheFirstHalfOnlyIsWarmUp() {
        // Grows by 20 MB over the first 10 s, then swings by 300 KB with no trend.
        let warming = samples { seconds in
            seconds < 10 ? 30_000_000 + 2_000_000 * seconds : 50_000_000 + (Int(seconds * 2).isMultiple(of: 2) ? 300_000 : 0)
        }
        let verdict = MemoryTrend.judge(warming, duration: 20)
        guard case .steady(let slope, let count, _) = verdict else {
            Issue.record("judged \(verdict)")
            return
        }
        #expect(count == 20)
        #expect(abs(slope) < MemoryTrend.limit(forDuration: 20))
        #expect(!MemoryTrend.report(verdict).fails)
        #expect(MemoryTrend.report(verdict).line.hasSuffix("steady"))
    }

    @Test func aRunTooShortToShowATrendIsNotJudged() {
        let short = samples(4, every: 0.25) { seconds in 1_000_000 * seconds }
        let verdict = MemoryTrend.judge(short, duration: 1)
        guard case .notJudged = verdict else {
            Issue.record("judged \(verdict)")
            return
        }
        #expect(!MemoryTrend.report(verdict).fails)
        #expect(MemoryTrend.report(verdict).line.contains("not judged"))
    }

    @Test func aboutFortySamplesARunAtMostTenSecondsApart() {
        #expect(MemoryTrend.interval(forSeconds: 1) == 0.25)
        #expect(MemoryTrend.interval(forSeconds: 20) == 0.5)
        #expect(MemoryTrend.interval(forSeconds: 1200) == 10)
    }
}
