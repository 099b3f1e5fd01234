import Dispatch
import Foundation
import KeyValueObserving

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

// The soak's memory figure: the allocator's bytes in use (`allocatedBytes()`), sampled at intervals
// while the stress runs, and the verdict on their trend over the second half of the run.

/// One reading of the allocator's bytes in use, `seconds` after the run started.
struct MemorySample: Equatable, Sendable {
    var seconds: Double
    var bytes: Int
}

/// What the soak concludes from its memory samples.
enum MemoryVerdict: Equatable, Sendable {
    /// The least-squares slope of the second half's samples, in bytes per second, is at most `limit`.
    case steady(slope: Double, samples: Int, limit: Double)
    /// The slope is above `limit`: memory in use kept growing once the run was warm.
    case growing(slope: Double, samples: Int, limit: Double)
    /// Too few samples in the second half, or too short a span of them, to tell a trend from noise.
    case notJudged(samples: Int, reason: String)
}

/// How the soak judges memory in use.
///
/// The verdict is on the least-squares slope of the samples taken in the second half of the run (at
/// or after half its duration), in bytes per second: the first half is left out, since caches,
/// key-path objects, metadata, the allocator's arenas and per-thread caches and the store's buffers
/// reach their size there. A run is judged only when it lasted at least `minimumDuration` seconds
/// and its second half holds at least `minimumSamples` samples.
///
/// The limit is the larger of `floor` (1 KiB/s) and `noiseBytes` (512 KiB) spread over the second
/// half: 51.2 KiB/s for a 20 s run, 102.4 KiB/s for 10 s, 1 KiB/s from a 1024 s run on. Why:
/// - A run that keeps nothing has no trend once warm, but its bytes in use swing with what the
///   workers hold at the instant of a sample (observers, batches, a progress tree, a store's pending
///   write and reloads, the allocator's per-thread caches): by up to 100 KB between samples on a
///   2-core machine. And a short run is still warming in its second half: high-water marks (the
///   allocator's per-thread caches, the largest observer lists and batches met so far) keep rising
///   now and then; a 20-minute run rose from 300 KB to 800 KB over its first 500 s, then stayed
///   flat. Second halves measured here: +0.1 to +6.5 KB/s for 20 s release runs, +8 to +18 KB/s
///   for 10 s debug runs, +24 B/s for the second half of a 20-minute release run. A fixed limit in
///   bytes per second would either fail short runs on this or wave through a slow leak in long
///   ones; a rise of 512 KiB over the second half is more than it made, so the limit shrinks as the
///   half grows, down to the floor.
/// - A leak of anything the workers make by the hundred thousand a second (one 48-byte block per
///   observer registered, set or delivery) grows by MB per second and fails even a 10 s run; one
///   per defaults write (thousands a second) by hundreds of KB per second. A leak of something made
///   less often (a checked round, a change another process wrote) needs the long soak, where the
///   limit is 1 KiB/s: 1.2 MB over 20 minutes that never comes back.
enum MemoryTrend {
    static let floor = 1024.0
    static let noiseBytes = 524_288.0
    static let minimumSamples = 8
    static let minimumDuration = 10.0

    /// The limit in bytes per second for a run of `duration` seconds.
    static func limit(forDuration duration: Double) -> Double {
        max(floor, noiseBytes / (duration / 2))
    }

    /// The least-squares slope of `y` over `x`, or `nil` with fewer than two distinct `x`.
    static func slope(_ points: [(x: Double, y: Double)]) -> Double? {
        guard points.count >= 2 else { return nil }
        let count = Double(points.count)
        let meanX = points.reduce(0) { $0 + $1.x } / count
        let meanY = points.reduce(0) { $0 + $1.y } / count
        var covariance = 0.0
        var variance = 0.0
        for point in points {
            covariance += (point.x - meanX) * (point.y - meanY)
            variance += (point.x - meanX) * (point.x - meanX)
        }
        return variance > 0 ? covariance / variance : nil
    }

    /// The verdict on `samples` of a run of `duration` seconds: the trend of those taken in its
    /// second half (at or after `duration / 2`) against `limit(forDuration:)`.
    static func judge(_ samples: [MemorySample], duration: Double) -> MemoryVerdict {
        let limit = limit(forDuration: duration)
        let half = samples.filter { $0.seconds >= duration / 2 }
        guard duration >= minimumDuration else {
            return .notJudged(samples: half.count, reason: "a run of \(format(duration)) s, shorter than \(format(minimumDuration)) s")
        }
        guard half.count >= minimumSamples else {
            return .notJudged(samples: half.count, reason: "\(half.count) samples in the second half, fewer than \(minimumSamples)")
        }
        guard let slope = slope(half.map { (x: $0.seconds, y: Double($0.bytes)) }) else {
            return .notJudged(samples: half.count, reason: "the second half's samples were all taken at one instant")
        }
        return slope > limit
            ? .growing(slope: slope, samples: half.count, limit: limit) : .steady(slope: slope, samples: half.count, limit: limit)
    }

    /// The verdict as the soak prints it, and whether it fails the run.
    static func report(_ verdict: MemoryVerdict) -> (line: String, fails: Bool) {
        switch verdict {
        case .steady(let slope, let samples, let limit):
            return (
                "stress: memory in use over the second half (\(samples) samples): slope \(signed(slope)) bytes/s, "
                    + "limit \(format(limit)) bytes/s: steady", false
            )
        case .growing(let slope, let samples, let limit):
            return (
                "memory in use grew by \(signed(slope)) bytes/s over the second half (\(samples) samples, least-squares slope), "
                    + "above the limit of \(format(limit)) bytes/s", true
            )
        case .notJudged(_, let reason):
            return ("stress: memory trend not judged: \(reason)", false)
        }
    }

    private static func format(_ value: Double) -> String { String(format: "%.1f", value) }
    private static func signed(_ value: Double) -> String { String(format: "%+.1f", value) }

    /// How far apart the samples of a run of `seconds` are: about 40 samples a run, at least a
    /// quarter second and at most 10 s apart.
    static func interval(forSeconds seconds: Int) -> Double {
        min(10, max(0.25, Double(seconds) / 40))
    }
}

/// Reads the allocator's bytes in use every `interval` seconds until a deadline, printing each
/// reading as it is taken.
final class MemorySampler: Sendable {
    let interval: Double
    private let taken: Locked<[MemorySample]>

    init(seconds: Int) {
        interval = MemoryTrend.interval(forSeconds: seconds)
        // Room for every sample up front: the array's growth is not the run's.
        var samples: [MemorySample] = []
        samples.reserveCapacity(Int(Double(seconds) / interval) + 2)
        taken = Locked(samples)
    }

    var samples: [MemorySample] { taken.current }

    /// Samples from `start` until `deadline` (uptime nanoseconds), on the calling thread; returns at
    /// the deadline.
    func run(start: UInt64, deadline: UInt64) {
        func sleep(until time: UInt64) {
            while case let now = DispatchTime.now().uptimeNanoseconds, now < time {
                usleep(UInt32(min(100_000, (time - now) / 1000 + 1)))
            }
        }
        defer { sleep(until: deadline) }
        var index = 0
        while true {
            let due = start + UInt64(Double(index) * interval * 1e9)
            if due >= deadline { return }
            sleep(until: due)
            guard let bytes = allocatedBytes() else {
                _ = writeLine("stress: memory in use cannot be read here (no allocator statistics): not judged", toDescriptor: 1)
                return
            }
            let sample = MemorySample(seconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, bytes: bytes)
            taken.withLock { $0.append(sample) }
            _ = writeLine("stress: memory \(String(format: "%.2f", sample.seconds)) s \(bytes) bytes in use", toDescriptor: 1)
            index += 1
        }
    }
}
