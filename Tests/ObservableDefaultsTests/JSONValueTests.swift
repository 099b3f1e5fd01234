@testable import ObservableDefaults
import Testing

@Suite("JSON values")
struct JSONValueTests {
    @Test func parsingKeepsNumbersAsWrittenAndDecodesEscapes() throws {
        let value = try JSONValue.parse(
            #"{"a": [1, -2.50, 3e+2, 12345678901234567890], "s": "\u00e9\ud83d\ude00\n\/", "t": true, "n": null}"#)
        #expect(
            value
                == .object([
                    "a": .array([.number("1"), .number("-2.50"), .number("3e+2"), .number("12345678901234567890")]),
                    "s": .string("é😀\n/"),
                    "t": .bool(true),
                    "n": .null,
                ]))
    }

    @Test func parseErrorsNameLineColumnAndCause() {
        let cases: [(String, Int, Int, String)] = [
            ("{\n  \"a\": 1,\n}", 3, 1, "expected a key"),
            ("[1, 2", 1, 6, "unexpected end of file in an array, expected ',' or ']'"),
            ("[1 2]", 1, 4, "in an array, expected ',' or ']'"),
            ("{\"a\": 1", 1, 8, "unexpected end of file in an object, expected ',' or '}'"),
            ("{\"a\": 1 \"b\": 2}", 1, 9, "in an object, expected ',' or '}'"),
            ("{\"a\": 01}", 1, 8, "leading zeros"),
            ("{\"a\": \"x\ny\"}", 1, 9, "control character"),
            ("{} x", 1, 4, "after the end"),
            ("{\"a\": tru}", 1, 7, "invalid literal, expected true, false or null"),
            ("{\"a\": \"x\\qy\"}", 1, 9, "invalid escape sequence"),
            ("{\"a\": \"x\" \"y\"}", 1, 11, "unexpected character in an object, expected ',' or '}'"),
            ("{\"a\" 1}", 1, 6, "unexpected character after a key, expected ':'"),
        ]
        for (text, line, column, reason) in cases {
            do {
                _ = try JSONValue.parse(text)
                Issue.record("\(text) parsed")
            } catch {
                #expect(error.line == line, "\(text)")
                #expect(error.column == column, "\(text)")
                #expect(error.reason.contains(reason), "\(text): \(error.reason)")
            }
        }
    }

    @Test func printingIsSortedAndRoundTrips() throws {
        let value = JSONValue.object(["b": .array([]), "a": .object([:]), "c": .string("q\"\u{1}")])
        #expect(value.compactText == #"{"a":{},"b":[],"c":"q\"\u0001"}"#)
        #expect(try JSONValue.parse(value.prettyText) == value)
        #expect(try JSONValue.parse(value.compactText) == value)
    }

    @Test func codableValuesRoundTripThroughJSON() throws {
        let settings = Settings(name: "n", volume: 0.1, tags: ["a", "b"])
        #expect(try JSONValue(encoding: settings).decode(as: Settings.self) == settings)
        #expect(try JSONValue(encoding: 0.1).decode(as: Double.self) == 0.1)
        #expect(try JSONValue(encoding: Int.max).decode(as: Int.self) == Int.max)
        #expect(try JSONValue(encoding: ["k": [true]]).decode(as: [String: [Bool]].self) == ["k": [true]])
        #expect(try JSONValue(encoding: "s") == .string("s"))
    }
}
