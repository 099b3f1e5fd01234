import Foundation

extension JSONValue {
    /// The JSON encoding of `value` (`JSONEncoder`'s default strategies), as a `JSONValue`.
    package init<Value: Encodable>(encoding value: Value) throws {
        let data = try JSONEncoder().encode(value)
        self = try JSONValue.parse(data)
    }

    /// Decodes this JSON as a `Value` (`JSONDecoder`'s default strategies).
    ///
    /// - Throws: `JSONDecoder`'s error, except that a number that does not fit (which it reports as
    ///   "not valid JSON", although this JSON is valid) is named: "1.5 is not an Int", "1e400
    ///   overflows Int".
    package func decode<Value: Decodable>(as type: Value.Type) throws -> Value {
        do {
            return try JSONDecoder().decode(Value.self, from: Data(compactText.utf8))
        } catch DecodingError.dataCorrupted(let context) where context.debugDescription.contains("not valid JSON") {
            let reason =
                numberMismatch(as: Value.self)
                ?? "a number in it does not fit the type of its property (not a whole number, or out of range)"
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: context.codingPath, debugDescription: reason, underlyingError: context.underlyingError))
        }
    }

    /// Why this number does not decode as `Value`, a number type; `nil` if it is not a number.
    private func numberMismatch<Value>(as type: Value.Type) -> String? {
        guard case .number(let text) = self else { return nil }
        let name = "\(Value.self)"
        let isWhole =
            !text.contains { $0 == "." || $0 == "e" || $0 == "E" } || Double(text).map { $0.isInfinite || $0.rounded() == $0 } == true
        if Value.self is any BinaryInteger.Type, !isWhole {
            return "\(text) is not \(name.hasPrefix("I") ? "an" : "a") \(name)"
        }
        return "\(text) overflows \(name)"
    }
}
