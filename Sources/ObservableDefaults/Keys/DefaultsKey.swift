/// A typed defaults key: its name in the file and its default value, declared once.
///
/// ```swift
/// extension DefaultsKey where Value == Double {
///     static var playbackSpeed: Self { DefaultsKey("playbackSpeed", default: 1.0) }
/// }
/// store[.playbackSpeed] = 1.5
/// ```
///
/// The value is stored in the file as its JSON encoding (`JSONEncoder`'s default strategies), so
/// numbers, strings, booleans, arrays, dictionaries with string keys and `Codable` structs are
/// written as people would write them by hand. Reads return `defaultValue` while the key is absent,
/// or when the file holds a value that does not decode as `Value` (the store's error handler is told).
public struct DefaultsKey<Value: Codable & Sendable>: Sendable {
    /// The key's name in the file.
    public let name: String
    /// The value read while the key is absent from the file.
    public let defaultValue: Value

    /// Creates a key named `name` whose value is `defaultValue` until one is set.
    public init(_ name: String, default defaultValue: Value) {
        self.name = name
        self.defaultValue = defaultValue
    }
}
