import Foundation
import KVOToolArguments
import KeyValueObserving

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Registration at scale: many objects, several observers each, registered, then invalidated, in a
/// fresh child process per implementation (so that one's peak memory is not the other's), timed with
/// `CLOCK_MONOTONIC` and weighed with `getrusage`'s maximum resident set size. Not gated: the time is
/// wall time, and the child's allocator decides the memory.
enum MassRegistration {
    static let name = "mass-registration"
    /// The hidden command that makes this executable the child of the section.
    static let command = BenchHiddenCommands.massRegistration

    struct Figure {
        let implementation: String
        let objects: Int
        let observersPerObject: Int
        /// Per observer.
        let registerNanoseconds: Double
        let invalidateNanoseconds: Double
        /// The growth of the child's maximum resident set size while the objects and their
        /// observers existed.
        let peakResidentBytes: Int
        var observers: Int { objects * observersPerObject }
    }

    /// The implementations, this package's first.
    static let implementations = ["KeyValueObserving", "NotificationCenter"]

    /// Maximum resident set size of this process so far, in bytes.
    static func maximumResidentBytes() -> Int {
        let usage = processUsage()
        #if canImport(Darwin)
        return Int(usage.ru_maxrss)  // bytes on Darwin
        #else
        return Int(usage.ru_maxrss) * 1024  // kilobytes on Linux
        #endif
    }

    /// `kvo-bench _mass-registration IMPLEMENTATION OBJECTS OBSERVERS`: makes OBJECTS objects, registers
    /// OBSERVERS observers on each, checks that a change of one object reaches its observers, then
    /// invalidates them all; prints `register NS invalidate NS peak BYTES` (per observer, per
    /// observer, in all).
    static func runChild(implementation: String, objects count: Int, observers perObject: Int) -> Never {
        let before = maximumResidentBytes()
        let objects = (0..<count).map { _ in Player() }
        let calls = Counter()
        var registered: UInt64 = 0
        var invalidated: UInt64 = 0
        switch implementation {
        case "KeyValueObserving":
            var tokens: [KeyValueObservation] = []
            tokens.reserveCapacity(count * perObject)
            let start = monotonicNanoseconds()
            for object in objects {
                for _ in 0..<perObject { tokens.append(object.observe(\.volume, options: [.new]) { _, _ in calls.record(1) }) }
            }
            registered = monotonicNanoseconds() - start
            objects[count / 2].volume = 0.75
            let end = monotonicNanoseconds()
            for token in tokens { token.invalidate() }
            invalidated = monotonicNanoseconds() - end
        case "NotificationCenter":
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
            center.post(name: name, object: objects[count / 2])
            let end = monotonicNanoseconds()
            for token in tokens { center.removeObserver(token) }
            invalidated = monotonicNanoseconds() - end
        default:
            fail("\(command): unknown implementation '\(implementation)'", status: 2)
        }
        let peak = maximumResidentBytes() - before
        guard calls.count == perObject else {
            fail("\(command): a change reached \(calls.count) observers, expected \(perObject)", status: 1)
        }
        let observers = Double(count * perObject)
        print("register \(Double(registered) / observers) invalidate \(Double(invalidated) / observers) peak \(peak)")
        withExtendedLifetime(objects) {}
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
            guard output.status == 0, fields.count == 6, let register = Double(fields[1]), let invalidate = Double(fields[3]),
                let peak = Int(fields[5])
            else {
                problems.append("\(implementation): failed (status \(output.status)): \(output.standardError)\(output.standardOutput)")
                continue
            }
            figures.append(
                Figure(
                    implementation: implementation, objects: objects, observersPerObject: perObject, registerNanoseconds: register,
                    invalidateNanoseconds: invalidate, peakResidentBytes: peak))
        }
        return (figures, problems)
    }
}

/// The mass-registration section: a heading, a line per implementation and the ratios.
func massRegistrationLines(_ figures: [MassRegistration.Figure], problems: [String], markdown: Bool) -> [String] {
    guard let first = figures.first else {
        return ["\(MassRegistration.name): " + (problems.isEmpty ? "not measured" : problems.joined(separator: "; "))]
    }
    let heading =
        "Registration at scale (\(first.objects.formatted()) objects × \(first.observersPerObject) observers, registered then "
        + "invalidated, each implementation in a fresh child process; wall time per observer, growth of getrusage's maximum RSS)"
    var lines = [markdown ? "### \(heading)\n" : heading]
    for figure in figures {
        let row =
            "\(figure.implementation): register \(Int(figure.registerNanoseconds.rounded())) ns/observer, "
            + "invalidate \(Int(figure.invalidateNanoseconds.rounded())) ns/observer, "
            + "peak RSS +\(String(format: "%.1f", Double(figure.peakResidentBytes) / 1_048_576)) MB "
            + "(\(figure.peakResidentBytes / max(figure.observers, 1)) B per observer, objects included)"
        lines.append(markdown ? "- \(row)" : "  \(row)")
    }
    if figures.count == 2 {
        let (ours, theirs) = (figures[0], figures[1])
        func compared(_ ratio: Double, _ better: String, _ worse: String) -> String {
            ratio >= 1 ? String(format: "%.1f× %@", ratio, better) : String(format: "%.1f× %@", 1 / ratio, worse)
        }
        let row =
            "\(ours.implementation) against \(theirs.implementation): registration "
            + compared(theirs.registerNanoseconds / ours.registerNanoseconds, "faster", "slower") + ", invalidation "
            + compared(theirs.invalidateNanoseconds / ours.invalidateNanoseconds, "faster", "slower") + ", "
            + compared(Double(theirs.peakResidentBytes) / Double(max(ours.peakResidentBytes, 1)), "less memory", "more memory")
            + " (target ≥ 10× faster, provisional)"
        lines.append(markdown ? "- \(row)" : "  \(row)")
    }
    for problem in problems { lines.append(markdown ? "- \(problem)" : "  \(problem)") }
    return lines
}
