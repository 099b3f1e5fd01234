import Foundation

extension JSONValue {
    /// The JSON encoding of `value` (`JSONEncoder`'s default strategies), as a `JSONValue`.
    package init<Value: Encodable>(encoding value: Value) throws {
        let data = try JSONEncoder().encode(value)
        self = try JSONValue.parse(data)
    }

    /// Decodes this JSON as a `Value` (`JSONDecoder`'s default strategies).
    package func decode<Value: Decodable>(as type: Value.Type) throws -> Value {
        try JSONDecoder().decode(Value.self, from: Data(compactText.utf8))
    }
}
