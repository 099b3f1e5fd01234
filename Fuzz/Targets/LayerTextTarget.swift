import Foundation
import ObservableDefaults

/// `layer-text`: a text layer's value (a command-line argument, an environment variable, a file of
/// a directory layer) read as each key type by `LayerTextDecoding.decode`
/// (`Sources/ObservableDefaults/Layers/LayerText.swift`).
///
/// Input format: the first byte holds flags: bit 0 set, a bare command-line flag (`--verbose`, no
/// text; the rest is ignored); bit 1 set, the text was the argument after the flag
/// (`--verbose input.txt`). The other bytes are the text, read as UTF-8 (an invalid sequence reads
/// as U+FFFD, as `String(decoding:as:)` reads a file). An empty input is a text-less flag.
///
/// Checked: decoding as `Bool`, `Int`, `Double`, `String`, `[Int]`, `[String: Int]`, `URL`, a
/// `Codable` struct and `Int?` never traps; a `String` is the text itself; a `Bool` is read from
/// exactly the spellings documented; and a value that decodes, spelled again as a user would write
/// it (`42`, `[1,2]`, `{"width":3}`), decodes to itself.
enum LayerTextTarget {
    struct Size: Codable, Hashable {
        var width: Int
        var label: String?
    }

    @Sendable static func run(_ bytes: [UInt8]) throws(FuzzFailure) {
        let flags = bytes.first ?? 1
        let text: String? = flags & 1 == 0 ? String(decoding: bytes.dropFirst(), as: UTF8.self) : nil
        let value = LayerText(text: text, spelling: "--fuzzed", isSeparateArgument: flags & 2 != 0)

        let string = decode(value, as: String.self)
        try require(text == nil ? string == nil : string == text, "a String is not the text itself: \(String(describing: string))")

        let bool = decode(value, as: Bool.self)
        if let text {
            let spelling = text.trimmingCharacters(in: .whitespaces).lowercased()
            let expected: Bool? =
                ["true", "yes", "on", "1"].contains(spelling)
                ? true
                : ["false", "no", "off", "0"].contains(spelling) ? false : value.isSeparateArgument ? true : nil
            try require(bool == expected, "a Bool read \(String(describing: bool)), expected \(String(describing: expected))")
        } else {
            try require(bool == true, "a bare flag is not true as a Bool")
        }

        try roundTrip(value, as: Int.self) { "\($0)" }
        try roundTrip(value, as: Int?.self) { $0.map { "\($0)" } ?? "null" }
        try roundTrip(value, as: Double.self) { "\($0)" }
        try roundTrip(value, as: [Int].self) { json($0) }
        try roundTrip(value, as: [String: Int].self) { json($0) }
        try roundTrip(value, as: Size.self) { json($0) }
        try roundTrip(value, as: URL.self) { $0.absoluteString }
    }

    static func decode<Value: Decodable>(_ value: LayerText, as type: Value.Type) -> Value? {
        try? LayerTextDecoding.decode(value, as: Value.self).get()
    }

    /// Decodes `value` as `Value`; when it decodes, checks that `spell`ing the result as a user
    /// would gives text that decodes to the same value.
    static func roundTrip<Value: Decodable & Equatable>(
        _ value: LayerText, as type: Value.Type, spell: (Value) -> String
    ) throws(FuzzFailure) {
        guard let decoded = decode(value, as: Value.self) else { return }
        let spelled = spell(decoded)
        let again = decode(LayerText(text: spelled, spelling: "--fuzzed"), as: Value.self)
        try require(again == decoded, "\(Value.self) \(decoded) spelled \(spelled.debugDescription) reads \(String(describing: again))")
    }

    static func json(_ value: some Encodable) -> String {
        (try? JSONValue(encoding: value).compactText) ?? "not encodable"
    }
}
