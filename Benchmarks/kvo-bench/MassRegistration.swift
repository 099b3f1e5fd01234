import Foundation
import KVOToolArguments
import KeyValueObserving
import Observation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Registration at scale: many objects, several observers each, registered, then invalidated, in a
/// fresh child process per implementation (so that one's memory is not the other's), timed with
/// `CLOCK_MONOTONIC` and weighed from the child's own start: the allocator's bytes in use once
/// every observer is registered (`allocatedBytes`), and the peak resident set (`ResidentSet`, Linux).
/// Not gated: the time is wall time, and the child's allocator decides the memory.
enum MassRegistration {
    static let name = "mass-registration"
    /// The hidden command that makes this executable the child of the section.
    static let command = BenchHiddenCommands.massRegistration
    /// Growth below this is too small to measure at the run's scale: the runtime's own
    /// allocations and the pages it touches move the figures by about as much.
    static let smallestMeasurableBytes = 1 << 20

    struct Figure {
        let implementation: String
        let objects: Int
        let observersPerObject: Int
        /// Per observer.
        let registerNanoseconds: Double
        /// Per observer; `nil` where observations cannot be cancelled (Observation's
        /// `withObservationTracking`).
        let invalidateNanoseconds: Double?
        /// The growth of the allocator's bytes in use from the child's start to the moment every
        /// observer was registered, objects included; `nil` where the allocator cannot be asked.
        let heapBytes: Int?
        /// The growth of the child's peak resident set over its whole run; `nil` off Linux.
        let peakResidentBytes: Int?
        var observers: Int { objects * observersPerObject }
    }

    /// The implementations, this package's first.
    static let implementations = ["KeyValueObserving", "NotificationCenter", "Observation"]

    /// `kvo-bench _mass-registration IMPLEMENTATION OBJECTS OBSERVERS`: makes OBJECTS objects, registers
    /// OBSERVERS observers on each, checks that a change of one object reaches its observers, then
    /// invalidates them all (Observation's cannot be); prints `register NS invalidate NS heap BYTES
    /// peak BYTES` (per observer, per observer, in all, in all; `-` for what was not measured).
    static func runChild(implementation: String, objects count: Int, observers perObject: Int) -> Never {
        let residentStart = ResidentSet.startMeasuringPeak()
        let heapStart = allocatedBytes()
        let calls = Counter()
        var registered: UInt64 = 0
        var invalidated: UInt64?
        var heapInUse: Int?
        var kept: [AnyObject] = []
        switch implementation {
        case "KeyValueObserving":
            let objects = (0..<count).map { _ in Player() }
            var tokens: [KeyValueObservation] = []
            tokens.reserveCapacity(count * perObject)
            let start = monotonicNanoseconds()
            for object in objects {
                for _ in 0..<perObject { tokens.append(object.observe(\.volume, options: [.new]) { _, _ in calls.record(1) }) }
            }
            registered = monotonicNanoseconds() - start
            heapInUse = allocatedBytes()
            objects[count / 2].volume = 0.75
            let end = monotonicNanoseconds()
            for token in tokens { token.invalidate() }
            invalidated = monotonicNanoseconds() - end
            kept = objects
        case "NotificationCenter":
            let objects = (0..<count).map { _ in Player() }
            let center = NotificationCenter()
            let name = Notification.Name("volume")
            var tokens: [any NSObjectProtocol] = []
            tokens.reserveCapacity(count * perObject)
            let start = monotonicNanoseconds()
            for object in objects {
                for _ in 0..<perObject {
                    tokens.append(center.addObserver(forName: name, object: object, queue: nil) { _ in calls.record(1) })
                }
            }
            registered = monotonicNanoseconds() - start
            heapInUse = allocatedBytes()
            center.post(name: name, object: objects[count / 2])
            let end = monotonicNanoseconds()
            for token in tokens { center.removeObserver(token) }
            invalidated = monotonicNanoseconds() - end
            kept = objects
        case "Observation":
            // As many registrations, each a withObservationTracking of the property; they end at
            // the property's next change, and cannot be cancelled before it.
            let objects = (0..<count).map { _ in ObservablePair() }
            let start = monotonicNanoseconds()
            for object in objects {
                for _ in 0..<perObject {
                    withObservationTracking {
                        _ = object.volume
                    } onChange: {
                        calls.record(1)
                    }
                }
            }
            registered = monotonicNanoseconds() - start
            heapInUse = allocatedBytes()
            objects[count / 2].volume = 0.75
            kept = objects
        default:
            fail("\(command): unknown implementation '\(implementation)'", status: 2)
        }
        let peak = residentStart.flatMap { ResidentSet.peakGrowth(since: $0) }
        guard calls.count == perObject else {
            fail("\(command): a change reached \(calls.count) observers, expected \(perObject)", status: 1)
        }
        let observers = Double(count * perObject)
        func field(_ value: (some CustomStringConvertible)?) -> String { value?.description ?? "-" }
        print(
            "register \(Double(registered) / observers) invalidate \(field(invalidated.map { Double($0) / observers })) "
                + "heap \(field(heapStart.flatMap { start in heapInUse.map { $0 - start } })) peak \(field(peak))")
        withExtendedLifetime(kept) {}
        exit(0)
    }

    /// Runs each implementation's child; returns the figures and the problems met.
    static func measure(quick: Bool) -> (figures: [Figure], problems: [String]) {
        let objects = quick ? 10_000 : 100_000
        let perObject = 10
        var figures: [Figure] = []
        var problems: [String] = []
        for implementation in implementations {
            let arguments = [command, implementation, String(objects), String(perObject)]
            guard let output = try? runProcess(currentExecutable(), arguments, timeoutSeconds: quick ? 120 : 600) else {
                problems.append("\(implementation): cannot start \(currentExecutable())")
                continue
            }
            if output.timedOut {
                problems.append("\(implementation): did not finish in \(quick ? 120 : 600) s")
                continue
            }
            let fields = output.standardOutput.split(whereSeparator: \.isWhitespace)
            guard output.status == 0, fields.count == 8, let register = Double(fields[1]) else {
                problems.append("\(implementation): failed (status \(output.status)): \(output.standardError)\(output.standardOutput)")
                continue
            }
            figures.append(
                Figure(
                    implementation: implementation, objects: objects, observersPerObject: perObject, registerNanoseconds: register,
                    invalidateNanoseconds: Double(fields[3]), heapBytes: Int(fields[5]), peakResidentBytes: Int(fields[7])))
        }
        return (figures, problems)
    }
}

/// A growth in bytes as "+137.0 MB (143 B per observer)", or why it is not shown: not measured
/// here, or too small to measure at this scale (under `MassRegistration.smallestMeasurableBytes`).
func registrationMemory(_ bytes: Int?, observers: Int, what: String) -> String {
    guard let bytes else { return "\(what) not measured on this system" }
    guard bytes >= MassRegistration.smallestMeasurableBytes else {
        return "\(what) too small to measure at this scale (grew by \(formatBytes(Double(bytes) / 1_048_576)) MB, under "
            + "\(MassRegistration.smallestMeasurableBytes / 1_048_576) MB)"
    }
    return "\(what) +\(String(format: "%.1f", Double(bytes) / 1_048_576)) MB (\(bytes / max(observers, 1)) B per observer)"
}

/// The mass-registration section: a heading, a line per implementation and this package's ratios
/// to each other implementation. A memory ratio appears only where both sides were measurable.
func massRegistrationLines(_ figures: [MassRegistration.Figure], problems: [String], markdown: Bool) -> [String] {
    guard let first = figures.first else {
        return ["\(MassRegistration.name): " + (problems.isEmpty ? "not measured" : problems.joined(separator: "; "))]
    }
    let heading =
        "Registration at scale (\(first.objects.formatted()) objects × \(first.observersPerObject) observers, registered then "
        + "invalidated, each implementation in a fresh child process; wall time per observer; memory from the child's own start, "
        + "objects included: malloc's bytes in use once every observer is registered (heap) and the growth of the peak resident "
        + "set (VmHWM, reset at the start; not getrusage's maximum RSS, which a child inherits from its parent))"
    var lines = [markdown ? "### \(heading)\n" : heading]
    for figure in figures {
        let invalidation =
            figure.invalidateNanoseconds.map { "invalidate \(Int($0.rounded())) ns/observer" } ?? "invalidate n/a (no cancellation)"
        let row =
            "\(figure.implementation): register \(Int(figure.registerNanoseconds.rounded())) ns/observer, \(invalidation), "
            + registrationMemory(figure.heapBytes, observers: figure.observers, what: "heap") + ", "
            + registrationMemory(figure.peakResidentBytes, observers: figure.observers, what: "peak RSS")
        lines.append(markdown ? "- \(row)" : "  \(row)")
    }
    if let ours = figures.first(where: { $0.implementation == MassRegistration.implementations[0] }) {
        /// "2.0× faster" for theirs / ours = 2, "about the same" within 5%.
        func compared(_ ratio: Double, _ better: String, _ worse: String) -> String {
            if ratio > 0.95 && ratio < 1.05 { return "about the same" }
            return ratio >= 1 ? String(format: "%.1f× %@", ratio, better) : String(format: "%.1f× %@", 1 / ratio, worse)
        }
        func memory(_ what: String, _ theirs: Int?, _ mine: Int?) -> String {
            guard let theirs, let mine, theirs >= MassRegistration.smallestMeasurableBytes, mine >= MassRegistration.smallestMeasurableBytes
            else { return "\(what) not compared (too small to measure at this scale, or not measured)" }
            return "\(what) " + compared(Double(theirs) / Double(mine), "less", "more")
        }
        for theirs in figures where theirs.implementation != ours.implementation {
            var parts = ["registration " + compared(theirs.registerNanoseconds / ours.registerNanoseconds, "faster", "slower")]
            if let theirInvalidation = theirs.invalidateNanoseconds, let ourInvalidation = ours.invalidateNanoseconds {
                parts.append("invalidation " + compared(theirInvalidation / ourInvalidation, "faster", "slower"))
            } else {
                parts.append("invalidation n/a")
            }
            parts.append(memory("heap", theirs.heapBytes, ours.heapBytes))
            parts.append(memory("peak RSS", theirs.peakResidentBytes, ours.peakResidentBytes))
            let target = theirs.implementation == "NotificationCenter" ? " (target ≥ 10× faster, provisional)" : ""
            let row = "\(ours.implementation) against \(theirs.implementation): " + parts.joined(separator: ", ") + target
            lines.append(markdown ? "- \(row)" : "  \(row)")
        }
    }
    for problem in problems { lines.append(markdown ? "- \(problem)" : "  \(problem)") }
    return lines
}
