import Foundation

/// A value of a type to go on decoding a configuration with after one of its properties failed, so
/// that the error lists every failing property rather than the first. It is never returned to the
/// caller: a configuration with a problem throws.
///
/// Made by the type's own `init(from:)` over a decoder that answers zero, `false`, the empty
/// string, empty arrays and dictionaries and absent optionals (numbers, strings, booleans, arrays
/// and dictionaries of them, `Date`, `Data`, structs of these), with `URL`, `Duration` and
/// `CaseIterable` types (an enum's first case) given directly, and an enum with raw values whose
/// raw value 0 (or "") is not a case given its first case (`firstCase(ofRawValueEnum:)`). Past a
/// type of which none of these makes a value (a type that checks its values in `init(from:)`, a
/// raw-value enum of one case or of more than 256), the decoding stops.
///
/// A placeholder cannot be taken from the values the store holds for the key: it is needed only
/// when none of them decodes as the type (one that does answers), and a raw-value enum decodes
/// exactly the raw values its `init(rawValue:)` accepts.
enum ConfigurationPlaceholder {
    static func make<Value: Decodable>(_: Value.Type) -> Value? {
        if Value.self == URL.self { return URL(fileURLWithPath: "/") as? Value }
        if Value.self == Duration.self { return Duration.zero as? Value }
        if let cases = Value.self as? any CaseIterable.Type, let first = firstCase(of: cases) as? Value { return first }
        if let value = try? Value(from: PlaceholderDecoder()) { return value }
        if let rawRepresentable = Value.self as? any RawRepresentable.Type {
            return firstCase(ofRawValueEnum: rawRepresentable) as? Value
        }
        return nil
    }

    private static func firstCase<Cases: CaseIterable>(of _: Cases.Type) -> Cases? {
        Cases.allCases.first
    }

    /// The first declared case of an enum with raw values (`enum Level: String { case low, high }`,
    /// whose cases nothing outside it can name), or `nil`.
    ///
    /// The one place that relies on Swift's type layout (docs/ABI/TypeLayout.rst, "C-Like Enums"):
    /// an enum whose cases carry no values, as every enum with raw values is, is stored as a tag
    /// numbered from 0 in declaration order, in one byte for 2 to 256 cases. So a 0 byte read as
    /// such a type is its first case. Only an enum is read so: another type of one byte (a struct
    /// whose `rawValue` is computed, say) would have its code run on a value its initialiser never
    /// made, so the reflection of the value read must say it is an enum (and the type must not
    /// reflect itself, which would run its code too). The value is used only for its `rawValue`,
    /// and the placeholder is made by the type's own `init(rawValue:)`, which must accept it. A type
    /// of no bytes is not read so: an enum with no cases is one, and reading one traps. So an enum
    /// of one case (no bytes), or of more than 256 (two), has no placeholder here.
    private static func firstCase<Enum: RawRepresentable>(ofRawValueEnum _: Enum.Type) -> Enum? {
        guard MemoryLayout<Enum>.size == 1, !(Enum.self is any CustomReflectable.Type) else { return nil }
        let tagZero = withUnsafeBytes(of: UInt8(0)) { $0.load(as: Enum.self) }
        guard Mirror(reflecting: tagZero).displayStyle == .enum else { return nil }
        return Enum(rawValue: tagZero.rawValue)
    }
}

/// The decoder behind `ConfigurationPlaceholder`: every container is empty, every value zero.
private struct PlaceholderDecoder: Decoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(Keyed<Key>())
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { Unkeyed() }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single() }

    static func exhausted(_ type: Any.Type) -> DecodingError {
        DecodingError.valueNotFound(type, DecodingError.Context(codingPath: [], debugDescription: "no placeholder"))
    }

    /// A value of `Value`: a zero for a number, else one made by the type (recursively).
    static func value<Value: Decodable>(_: Value.Type) throws -> Value {
        if let zero = zero(of: Value.self) { return zero }
        guard let value = ConfigurationPlaceholder.make(Value.self) else { throw exhausted(Value.self) }
        return value
    }

    private static func zero<Value>(of _: Value.Type) -> Value? {
        switch Value.self {
        case is Bool.Type: false as? Value
        case is String.Type: "" as? Value
        case let numeric as any (Numeric & Decodable).Type: zero(numeric) as? Value
        default: nil
        }
    }

    private static func zero<Number: Numeric>(_: Number.Type) -> Number { .zero }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { [] }
        func contains(_ key: Key) -> Bool { false }
        func decodeNil(forKey key: Key) throws -> Bool { true }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try PlaceholderDecoder.value(T.self) }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { nil }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<
            NestedKey
        > {
            KeyedDecodingContainer(Keyed<NestedKey>())
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { Unkeyed() }
        func superDecoder() throws -> any Decoder { PlaceholderDecoder() }
        func superDecoder(forKey key: Key) throws -> any Decoder { PlaceholderDecoder() }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        var codingPath: [any CodingKey] { [] }
        var count: Int? { 0 }
        var isAtEnd: Bool { true }
        var currentIndex: Int { 0 }
        mutating func decodeNil() throws -> Bool { throw PlaceholderDecoder.exhausted(Never.self) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { throw PlaceholderDecoder.exhausted(T.self) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            throw PlaceholderDecoder.exhausted(NestedKey.self)
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw PlaceholderDecoder.exhausted(Never.self) }
        mutating func superDecoder() throws -> any Decoder { throw PlaceholderDecoder.exhausted(Never.self) }
    }

    struct Single: SingleValueDecodingContainer {
        var codingPath: [any CodingKey] { [] }
        func decodeNil() -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try PlaceholderDecoder.value(T.self) }
    }
}
