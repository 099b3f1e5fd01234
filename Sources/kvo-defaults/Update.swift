import Foundation
import ObservableDefaults

/// A runtime error of a command, printed as it is (exit status 1).
struct CommandError: Error {
    let message: String
}

/// What `update KEY --add N` stores: `current` (absent counts as 0) plus `amount`, both JSON numbers.
/// Integers add exactly (an overflow is an error); any other numbers add as doubles. The errors
/// quote the current value unless it is `secret`.
func adding(_ amount: String, to current: JSONValue?, key: String, secret: Bool) throws(CommandError) -> JSONValue {
    let currentText: String
    switch current {
    case nil:
        currentText = "0"
    case .number(let text)?:
        currentText = text
    case let other?:
        let shown = secret ? "not a number" : "\(other.compactText), not a number"
        throw CommandError(message: "the value of '\(key)' is \(shown); it is left as it is")
    }
    let sum = (secret ? DefaultsKeyNames.redacted : currentText) + " + \(amount)"
    if let left = Int(currentText), let right = Int(amount) {
        let (result, overflow) = left.addingReportingOverflow(right)
        if overflow { throw CommandError(message: "\(sum) overflows a 64-bit integer; '\(key)' is left as it is") }
        return .number(String(result))
    }
    guard let left = Double(currentText), let right = Double(amount), (left + right).isFinite else {
        throw CommandError(message: "\(sum) is not a finite number; '\(key)' is left as it is")
    }
    return .number(String(describing: left + right))
}
