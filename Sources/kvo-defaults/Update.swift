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
