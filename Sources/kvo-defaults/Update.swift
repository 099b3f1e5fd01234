import Dispatch
import Foundation
import ObservableDefaults

/// A runtime error of a command, printed as it is (exit status 1).
struct CommandError: Error {
    let message: String
}

/// What `update KEY --add N` stores: `current` (absent counts as 0) plus `amount`, both JSON numbers.
/// Integers add exactly (an overflow is an error); any other numbers add as doubles.
func adding(_ amount: String, to current: JSONValue?, key: String) throws(CommandError) -> JSONValue {
    let currentText: String
    switch current {
    case nil:
        currentText = "0"
    case .number(let text)?:
        currentText = text
    case let other?:
        throw CommandError(message: "the value of '\(key)' is \(other.compactText), not a number; it is left as it is")
    }
    if let left = Int(currentText), let right = Int(amount) {
        let (sum, overflow) = left.addingReportingOverflow(right)
        if overflow { throw CommandError(message: "\(currentText) + \(amount) overflows a 64-bit integer; '\(key)' is left as it is") }
        return .number(String(sum))
    }
    guard let left = Double(currentText), let right = Double(amount), (left + right).isFinite else {
        throw CommandError(message: "\(currentText) + \(amount) is not a finite number; '\(key)' is left as it is")
    }
    return .number(String(describing: left + right))
}

/// `update-many`: `threads` threads, each adding 1 to `key` `count` times with `update` (for the
/// tests and the stress run of atomic updates).
func incrementConcurrently(_ store: DefaultsStore, key: String, count: Int, threads: Int) throws {
    let outcomes = (0..<threads).map { _ in ThreadOutcome() }
    let group = DispatchGroup()
    for outcome in outcomes {
        group.enter()
        Thread {
            defer { group.leave() }
            do {
                for _ in 0..<count {
                    _ = try store.updateJSONValue(forKey: key) { current throws(CommandError) in try adding("1", to: current, key: key) }
                }
            } catch {
                outcome.error = error
            }
        }.start()
    }
    group.wait()
    if let error = outcomes.lazy.compactMap(\.error).first { throw error }
}

/// What one thread of `incrementConcurrently` met.
final class ThreadOutcome: @unchecked Sendable {
    // Invariant: written only by its thread, before it leaves the group; read only after the
    // group's wait() returned, which orders the two.
    var error: (any Error)?
}
