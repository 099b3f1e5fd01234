import Foundation
import KeyValueObserving
import Observation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

// MARK: Reading the allocator's books

/// Bytes the allocator has handed out and not yet got back, chunk headers and padding included (what
/// the process really pays), or `nil` where this benchmark cannot ask the allocator.
///
/// glibc: `malloc_info`'s totals over every arena: the system memory of the arenas, minus their free
/// chunks (bins, fast bins and the top chunk), plus memory mapped for large blocks; that is
/// `mallinfo2()`'s `uordblks + hblkhd` for all arenas, which `<malloc.h>` would declare but the Glibc
/// module does not import. The report goes through a memory stream whose buffer is allocated at every
/// reading alike. Up to 7 freed chunks per size class wait in a per-thread cache and count as in use:
/// an error of a few hundred bytes per measurement, a few hundredths of a byte per unit over 10,000
/// units. Darwin: `malloc_zone_statistics` of every zone (`size_in_use`).
func allocatedBytes() -> Int? {
    #if canImport(Glibc)
    return glibcBytesInUse()
    #elseif canImport(Darwin)
    var statistics = malloc_statistics_t()
    malloc_zone_statistics(nil, &statistics)
    return Int(statistics.size_in_use)
    #else
    return nil
    #endif
}

#if canImport(Glibc)
private typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32

private func glibcBytesInUse() -> Int? {
    guard let process = dlopen(nil, RTLD_NOW), let symbol = dlsym(process, "malloc_info") else { return nil }
    let mallocInfo = unsafeBitCast(symbol, to: MallocInfo.self)
    var buffer: UnsafeMutablePointer<CChar>?
    var length = 0
    guard let stream = open_memstream(&buffer, &length) else { return nil }
    let status = mallocInfo(0, stream)
    fclose(stream)
    defer { free(buffer) }
    guard status == 0, let buffer else { return nil }
    // The totals over all arenas follow the last </heap>.
    let report = String(cString: buffer)
    guard
        let totals = report.range(of: "</heap>", options: .backwards).map({ report[$0.upperBound...] })
            ?? report.range(of: "<malloc").map({ report[$0.upperBound...] })
    else {
        return nil
    }
    func sizeAttribute(of element: String) -> Int? {
        guard let start = totals.range(of: "<\(element) "),
            let attribute = totals[start.upperBound...].range(of: "size=\""),
            let end = totals[attribute.upperBound...].firstIndex(of: "\"")
        else { return nil }
        return Int(totals[attribute.upperBound..<end])
    }
    guard let system = sizeAttribute(of: "system type=\"current\""), let fast = sizeAttribute(of: "total type=\"fast\""),
        let rest = sizeAttribute(of: "total type=\"rest\""), let mapped = sizeAttribute(of: "total type=\"mmap\"")
    else { return nil }
    return system - fast - rest + mapped
}
#endif

// MARK: Memory scenarios

/// How many bytes one unit of something costs (an object, an observer, a key): the growth of the
/// allocator's bytes in use while `count` units are made and kept, over `count`.
struct MemoryScenario {
    let name: String
    let summary: String
    /// What one unit is, e.g. "object" (shown as "bytes per object").
    let unit: String
    /// How many units to make (the figure is an average over them).
    let count: Int
    /// The scenario this one's figure is compared with.
    var baseline: String? = nil
    /// Makes `count` units and returns the bytes they took (`nil` if the allocator cannot be asked).
    let measure: (_ count: Int) -> Int?
}

/// How many more bytes the allocator has handed out after `body` than before, with what `body`
/// returns kept alive until the second reading.
private func bytesAllocated<T>(by body: () -> T) -> Int? {
    guard let before = allocatedBytes() else { return nil }
    let kept = body()
    let after = allocatedBytes()
    withExtendedLifetime(kept) {}
    return after.map { $0 - before }
}

/// One memory scenario's result.
struct MemoryFigure {
    let scenario: MemoryScenario
    /// Bytes per unit.
    let bytes: Double
    /// This figure over the baseline's, when the baseline was measured.
    var baselineBytes: Double? = nil
}

/// How many units are made and dropped before measuring.
private let warmUpUnits = 16

/// The bytes taken by `make(0..<count)`, kept alive until measured. `make(count..<count +
/// warmUpUnits)` runs and is dropped first, so one-time costs (type metadata, key-path objects,
/// caches) are not mistaken for the cost of a unit; the array that keeps the units is allocated
/// before the first reading.
private func bytesOfUnits<T>(_ count: Int, _ make: (Int) -> T) -> Int? {
    for index in count..<count + warmUpUnits { _ = make(index) }
    var kept: [T] = []
    kept.reserveCapacity(count)
    return bytesAllocated {
        for index in 0..<count { kept.append(make(index)) }
        return kept
    }
}

/// The plain class the memory baselines are made of: the same two stored properties as `Player`.
final class PlainPair {
    var volume = 0.5
    var other = 0
}

/// `@Observable` with the same two properties. `@unchecked Sendable`: used on the main thread only;
/// `withObservationTracking`'s `onChange` is `@Sendable`.
@Observable
final class ObservablePair: @unchecked Sendable {
    var volume = 0.5
    var other = 0
}

/// The measured cost of the objects and registrations.
extension Scenarios {
    static func memoryScenarios(quick: Bool) -> [MemoryScenario] {
        let objects = quick ? 1_000 : 10_000
        return [
            MemoryScenario(
                name: "memory-plain-object", summary: "a plain final class with a Double and an Int (the floor)",
                unit: "object", count: objects
            ) { count in
                bytesOfUnits(count) { _ in PlainPair() }
            },
            MemoryScenario(
                name: "memory-unobserved-object", summary: "a KeyValueObservable subclass with two @Observed properties, never observed",
                unit: "object", count: objects, baseline: "memory-plain-object"
            ) { count in
                bytesOfUnits(count) { _ in Player() }
            },
            MemoryScenario(
                name: "memory-observable-object", summary: "baseline: an @Observable class (Observation) with the same two properties",
                unit: "object", count: objects, baseline: "memory-plain-object"
            ) { count in
                bytesOfUnits(count) { _ in ObservablePair() }
            },
            MemoryScenario(
                name: "memory-first-observer",
                summary: "the first observe(\\.volume, [.new]) on an object: its registry, the observer and the token",
                unit: "object", count: objects, baseline: "memory-observation-tracking"
            ) { count in
                let players = (0..<count + warmUpUnits).map { _ in Player() }
                return bytesOfUnits(count) { index in players[index].observe(\.volume, options: [.new]) { _, _ in } }
            },
            MemoryScenario(
                name: "memory-observation-tracking",
                summary: "baseline: one withObservationTracking { volume } registration on an @Observable object",
                unit: "object", count: objects
            ) { count in
                // Tracking ends when the property changes or the object goes away: keep the objects
                // and never set them while measuring.
                let models = (0..<count + warmUpUnits).map { _ in ObservablePair() }
                return withExtendedLifetime(models) {
                    bytesOfUnits(count) { index in
                        withObservationTracking {
                            _ = models[index].volume
                        } onChange: {
                        }
                    }
                }
            },
            MemoryScenario(
                name: "memory-observer",
                summary: "one more observe(\\.volume, [.new]) on an already observed key (observer + token)",
                unit: "observer", count: 1_000, baseline: "memory-notificationcenter-observer"
            ) { count in
                let player = Player()
                let first = player.observe(\.volume, options: [.new]) { _, _ in }
                return withExtendedLifetime(first) {
                    bytesOfUnits(count) { _ in player.observe(\.volume, options: [.new]) { _, _ in } }
                }
            },
            MemoryScenario(
                name: "memory-notificationcenter-observer",
                summary: "baseline: one more block observer for a name and sender on a NotificationCenter",
                unit: "observer", count: 1_000
            ) { count in
                let center = NotificationCenter()
                let name = Notification.Name("kvo-bench.memory")
                let sender = PlainPair()
                let first = center.addObserver(forName: name, object: sender, queue: nil) { _ in }
                return withExtendedLifetime((first, sender)) {
                    bytesOfUnits(count) { _ in center.addObserver(forName: name, object: sender, queue: nil) { _ in } }
                }
            },
            MemoryScenario(
                name: "memory-observed-key",
                summary: "one more observed key: 10 observers on 10 keys of an object, minus 10 observers on one key (per extra key)",
                unit: "key", count: objects / 10
            ) { count in
                // `count` objects with 10 observers on 10 keys, minus `count` objects with 10 observers
                // on one key: the difference is 9 keys' slots per object.
                let keys: [ReferenceWritableKeyPath<Form, Int>] = [\.f0, \.f1, \.f2, \.f3, \.f4, \.f5, \.f6, \.f7, \.f8, \.f9]
                func observe(_ form: Form, _ key: ReferenceWritableKeyPath<Form, Int>) -> KeyValueObservation {
                    form.observe(key, options: [.new]) { _, _ in }
                }
                let perShape = count + warmUpUnits
                let forms = (0..<2 * perShape).map { _ in Form() }
                guard let oneKey = bytesOfUnits(count, { index in keys.map { _ in observe(forms[index], \.f0) } }),
                    let tenKeys = bytesOfUnits(count, { index in keys.map { observe(forms[perShape + index], $0) } })
                else { return nil }
                return (tenKeys - oneKey) / 9
            },
            MemoryScenario(
                name: "memory-tracked-observation",
                summary: "one observeTracking([.new]) { a.x + a.b.y + a.c.count } (3 reads, 2 objects never observed before): "
                    + "the objects' registries, the recorded inputs and the token",
                unit: "observation", count: objects, baseline: "memory-observation-tracking-3-reads"
            ) { count in
                let roots = (0..<count + warmUpUnits).map { _ in TrackedRoot() }
                let counter = Counter()
                return bytesOfUnits(count) { index in observeTrackedSum(roots[index], counter) }
            },
            MemoryScenario(
                name: "memory-further-tracked-observation",
                summary: "one more observeTracking of the same 3-read expression on objects it already tracks",
                unit: "observation", count: 1_000, baseline: "memory-observer"
            ) { count in
                let root = TrackedRoot()
                let counter = Counter()
                let first = observeTrackedSum(root, counter)
                return withExtendedLifetime(first) {
                    bytesOfUnits(count) { _ in observeTrackedSum(root, counter) }
                }
            },
            MemoryScenario(
                name: "memory-observation-tracking-3-reads",
                summary: "baseline: one withObservationTracking { x + b.y + c.count } registration on @Observable objects",
                unit: "observation", count: objects
            ) { count in
                // As memory-observation-tracking: keep the objects and never set them while measuring.
                let models = (0..<count + warmUpUnits).map { _ in ObservableTrackedRoot() }
                return withExtendedLifetime(models) {
                    bytesOfUnits(count) { index in
                        withObservationTracking {
                            _ = trackedSum(models[index])
                        } onChange: {
                        }
                    }
                }
            },
        ]
    }
}

/// Measures `scenarios` in order (on the calling thread, before anything else runs), or returns
/// `nil` where the allocator cannot be asked.
func measureMemory(_ scenarios: [MemoryScenario]) -> [MemoryFigure]? {
    guard allocatedBytes() != nil else { return nil }
    var figures: [MemoryFigure] = []
    for scenario in scenarios {
        guard let bytes = scenario.measure(scenario.count) else { continue }
        figures.append(MemoryFigure(scenario: scenario, bytes: Double(bytes) / Double(scenario.count)))
    }
    let byName = Dictionary(figures.map { ($0.scenario.name, $0.bytes) }, uniquingKeysWith: { first, _ in first })
    return figures.map { figure in
        var figure = figure
        figure.baselineBytes = figure.scenario.baseline.flatMap { byName[$0] }
        return figure
    }
}

// MARK: A child process's own peak

/// The peak resident set of this process from a point of its own, for the child processes of
/// "registration at scale". Not `getrusage`'s maximum RSS: on Linux a process keeps its parent's
/// across `posix_spawn` (and `fork` and `exec`): the kernel carries the high-water mark of the
/// memory map `exec` replaces into the new program's figure, so a child of a benchmark that peaked at
/// 300 MB starts at 300 MB and shows no growth below it (`--quick` printed "+0.0 MB"). Linux's
/// `VmHWM` belongs to the process's own memory map, which `exec` makes anew; writing `5` to
/// `/proc/self/clear_refs` resets it to the current resident set.
enum ResidentSet {
    /// Resets the peak to the current resident set and returns that, in bytes: the point
    /// `peakGrowth(since:)` measures from. `nil` where the kernel's figures cannot be read
    /// (systems other than Linux).
    static func startMeasuringPeak() -> Int? {
        #if os(Linux)
        let clearRefs = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC)
        if clearRefs >= 0 {
            _ = write(clearRefs, "5", 1)
            close(clearRefs)
        }
        // Where the reset is refused, the peak still dates from this program's start, and the
        // current size is where the growth is counted from.
        return statusBytes("VmRSS:")
        #else
        return nil
        #endif
    }

    /// How far the peak resident set rose above `start` bytes (from `startMeasuringPeak()`).
    static func peakGrowth(since start: Int) -> Int? {
        #if os(Linux)
        return statusBytes("VmHWM:").map { $0 - start }
        #else
        return nil
        #endif
    }

    #if os(Linux)
    /// A "Name:   1234 kB" line of `/proc/self/status`, in bytes.
    private static func statusBytes(_ name: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) }),
            let kilobytes = line.dropFirst(name.count).split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) })
        else { return nil }
        return kilobytes * 1024
    }
    #endif
}
