import Foundation
import ObservableDefaults

/// The JSON parser's targets (`Sources/ObservableDefaults/Values/JSONValue+Parsing.swift`).
///
/// Input format (both targets): the bytes are the JSON text, as a file holds it.
enum JSONTargets {
    /// `json`: parsing never traps; a value that parses prints (compactly and prettily) to text
    /// that parses to the same value; the duplicate-finding parse agrees with the plain one.
    @Sendable static func roundTrip(_ bytes: [UInt8]) throws(FuzzFailure) {
        let parsed = Result { () throws(JSONParseError) in try JSONValue.parse(bytes) }
        let withDuplicates = Result { () throws(JSONParseError) in try JSONValue.parseFindingDuplicateKeys(bytes).0 }
        try require(parsed == withDuplicates, "parse and parseFindingDuplicateKeys differ: \(parsed) and \(withDuplicates)")
        let value: JSONValue
        switch parsed {
        case .failure(let error):
            try require(error.offset >= 0 && error.offset <= bytes.count, "error offset \(error.offset) outside 0...\(bytes.count)")
            try require(error.line >= 1 && error.column >= 1, "error at line \(error.line), column \(error.column)")
            return
        case .success(let parsedValue):
            value = parsedValue
        }
        for (name, text) in [("compactText", value.compactText), ("prettyText", value.prettyText)] {
            switch Result(catching: { () throws(JSONParseError) in try JSONValue.parse(text) }) {
            case .success(let again):
                try require(again == value, "\(name) parses to a different value: \(text)")
            case .failure(let error):
                throw FuzzFailure("\(name) does not parse (\(error.reason), offset \(error.offset)): \(text)")
            }
        }
    }

    /// `json-foundation`: the parser and Foundation's `JSONSerialization` (`.fragmentsAllowed`,
    /// since the parser takes any value at the top level) accept and reject the same texts, and
    /// give equal values, except for the differences listed, each with its example, in
    /// `Fuzz/allowed-differences.md` (and implemented, exactly, by `AllowedDifference`).
    ///
    /// How values compare: null, booleans, strings (Swift `String` equality: canonical
    /// equivalence), arrays element by element, objects key by key. A number is kept here as its
    /// literal text and Foundation gives an `NSNumber`: an integer one (`objCType` not `d`/`f`)
    /// equals a literal of the same integer, an `NSDecimalNumber` equals the literal's `Decimal`,
    /// and a `Double` one equals the literal read as a `Double`. A Foundation boolean is the
    /// `NSNumber` of `objCType` `c`; it never equals a number.
    @Sendable static func foundationDifferential(_ input: [UInt8]) throws(FuzzFailure) {
        // An allowed difference may give a rewritten text to compare instead (without a BOM, without
        // a trailing comma, ...): a loop rather than a recursion, so that a text with hundreds of
        // trailing commas does not keep hundreds of parsed values alive at once.
        var bytes = input
        while let rewritten = try compareWithFoundation(bytes) { bytes = rewritten }
    }

    /// Compares one text; returns the text to compare instead when an allowed difference says so.
    static func compareWithFoundation(_ bytes: [UInt8]) throws(FuzzFailure) -> [UInt8]? {
        let ours = Result { () throws(JSONParseError) in try JSONValue.parse(bytes) }
        let theirs: Any?
        do {
            theirs = try JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed)
        } catch {
            theirs = nil
        }
        switch (ours, theirs) {
        case (.failure, nil):
            return nil
        case (.success(let value), _) where AllowedDifference.rawFEFF(in: bytes):
            let escaped = AllowedDifference.escapingFEFF(bytes)
            let again = Result { () throws(JSONParseError) in try JSONValue.parse(escaped) }
            try require(again == .success(value), "U+FEFF as itself and as \\ufeff parse differently: \(again)")
            return escaped
        case (.success(let value), let foundation?):
            if let difference = firstDifference(value, foundation, path: "$") {
                throw FuzzFailure("both accept, values differ at \(difference)")
            }
            return nil
        case (.success(let value), nil):
            if AllowedDifference.foundationRejectsHugeNumber(value) { return nil }
            throw FuzzFailure("the parser accepts, Foundation rejects")
        case (.failure(let error), let foundation?):
            if AllowedDifference.foundationReadsUTF16Or32(bytes) { return nil }
            if let rest = AllowedDifference.withoutUTF8ByteOrderMark(bytes) { return rest }
            if let withoutComma = AllowedDifference.withoutTrailingComma(bytes, error: error) { return withoutComma }
            throw FuzzFailure("the parser rejects (\(error.reason) at offset \(error.offset)), Foundation accepts \(foundation)")
        }
    }

    /// Where `value` and Foundation's `foundation` differ (a path and the two values), or `nil`.
    static func firstDifference(_ value: JSONValue, _ foundation: Any, path: String) -> String? {
        let differs = "\(path): \(value.compactText) and Foundation's \(foundation)"
        switch value {
        case .null:
            return foundation is NSNull ? nil : differs
        case .bool(let bool):
            guard let number = foundation as? NSNumber, number.isBoolean else { return differs }
            return number.boolValue == bool ? nil : differs
        case .number(let text):
            guard let number = foundation as? NSNumber, !number.isBoolean else { return differs }
            return numberEquals(text, number) ? nil : differs
        case .string(let string):
            return (foundation as? String) == string ? nil : differs
        case .array(let elements):
            guard let array = foundation as? [Any], array.count == elements.count else { return differs }
            for (index, element) in elements.enumerated() {
                if let difference = firstDifference(element, array[index], path: "\(path)[\(index)]") { return difference }
            }
            return nil
        case .object(let members):
            guard let dictionary = foundation as? [String: Any], dictionary.count == members.count else { return differs }
            for (key, member) in members {
                guard let other = dictionary[key] else { return "\(path): key \(key.debugDescription) missing in Foundation's" }
                if let difference = firstDifference(member, other, path: "\(path)[\(key.debugDescription)]") { return difference }
            }
            return nil
        }
    }

    /// Whether the literal `text` and Foundation's `number` are the same number (see
    /// `foundationDifferential`).
    static func numberEquals(_ text: String, _ number: NSNumber) -> Bool {
        if let decimal = number as? NSDecimalNumber {
            return Decimal(string: text) == decimal.decimalValue
        }
        switch String(cString: number.objCType) {
        case "d", "f":
            return Double(text) == number.doubleValue
        default:
            let isInteger = !text.contains { $0 == "." || $0 == "e" || $0 == "E" }
            guard isInteger else { return false }
            let canonical = text == "-0" ? "0" : text
            return number.stringValue == canonical
        }
    }
}

extension NSNumber {
    /// Foundation's booleans are the `NSNumber`s of type `c` (a JSON number is never one).
    var isBoolean: Bool { String(cString: objCType) == "c" }
}

/// The differences between the parser and `JSONSerialization` that are not faults, each listed with
/// an example in `Fuzz/allowed-differences.md`; nothing else is allowed.
enum AllowedDifference {
    /// 1. A number too large for a `Double` (`1e400`): Foundation rejects the text ("not
    ///    representable in Swift"); the parser keeps the literal (its reader reports the overflow
    ///    when it decodes the key's type).
    static func foundationRejectsHugeNumber(_ value: JSONValue) -> Bool {
        switch value {
        case .number(let text): Double(text).map { $0.isInfinite } ?? true
        case .array(let elements): elements.contains(where: foundationRejectsHugeNumber)
        case .object(let members): members.values.contains(where: foundationRejectsHugeNumber)
        default: false
        }
    }

    /// 2. UTF-16 and UTF-32 (a byte-order mark `FE FF`/`FF FE`, or a NUL among the first four
    ///    bytes): Foundation detects and reads them; the parser reads UTF-8 only (RFC 8259 §8.1), and
    ///    no UTF-8 JSON text starts with those bytes.
    static func foundationReadsUTF16Or32(_ bytes: [UInt8]) -> Bool {
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) { return true }
        return bytes.prefix(4).contains(0)
    }

    /// 3. A UTF-8 byte-order mark (`EF BB BF`) before the text: Foundation skips it, the parser
    ///    rejects it (RFC 8259 §8.1: implementations may ignore it, must not add it). The rest of the
    ///    text is then compared as any other input.
    static func withoutUTF8ByteOrderMark(_ bytes: [UInt8]) -> [UInt8]? {
        bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : nil
    }

    /// 4. A trailing comma before `]` or `}` (`[1,]`, `{"a":1,}`): Foundation accepts it, the
    ///    parser rejects it (RFC 8259 has none). Where the parser stopped at such a bracket, the
    ///    text without that comma is compared as any other input.
    static func withoutTrailingComma(_ bytes: [UInt8], error: JSONParseError) -> [UInt8]? {
        guard error.offset < bytes.count, bytes[error.offset] == UInt8(ascii: "]") || bytes[error.offset] == UInt8(ascii: "}") else {
            return nil
        }
        var comma = error.offset - 1
        while comma >= 0, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[comma]) { comma -= 1 }
        guard comma >= 0, bytes[comma] == UInt8(ascii: ",") else { return nil }
        var rest = bytes
        rest.remove(at: comma)
        return rest
    }

    /// 5. U+FEFF written as itself (`EF BB BF` in UTF-8, not the escape `\ufeff`) at the start of a
    ///    string or right after an escape sequence in it (`"\u{FEFF}a"`, `"\\\u{FEFF}a"`):
    ///    Foundation drops it, as if it were a byte-order mark of each run of plain bytes, and an
    ///    object's keys that differ only by it become one; the parser keeps it (a character of the
    ///    string). Where the parser accepts a text holding U+FEFF as itself, the text with each one
    ///    written `\ufeff` instead (which Foundation keeps) must give the parser the same value, and
    ///    is compared in its place.
    static func rawFEFF(in bytes: [UInt8]) -> Bool {
        bytes.indices.contains { bytes[$0...].starts(with: [0xEF, 0xBB, 0xBF]) }
    }

    /// `bytes` with each `EF BB BF` written `\ufeff`.
    static func escapingFEFF(_ bytes: [UInt8]) -> [UInt8] {
        var escaped: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index...].starts(with: [0xEF, 0xBB, 0xBF]) {
                escaped += Array(#"\ufeff"#.utf8)
                index += 3
            } else {
                escaped.append(bytes[index])
                index += 1
            }
        }
        return escaped
    }
}
