/// Why a JSON text could not be parsed, and where.
package struct JSONParseError: Error, Sendable, Hashable {
    /// Byte offset of the problem from the start of the text (0-based).
    package let offset: Int
    /// Line of the problem (1-based).
    package let line: Int
    /// Column of the problem, in bytes from the start of its line (1-based).
    package let column: Int
    /// What is wrong, and what was expected there. A syntax error's reason quotes no character of
    /// the text (it is one of the parser's fixed sentences): the text may hold a secret, and the
    /// place is given by `line` and `column`. Only a key found twice
    /// (`parseFindingDuplicateKeys`) is named, a key the parse accepted as one.
    package let reason: String
}

extension JSONValue {
    /// Parses a complete JSON text (RFC 8259; any value at the top level, surrounded by whitespace).
    ///
    /// Written here rather than taken from `JSONSerialization` so that errors carry an exact line and
    /// column and numbers keep their literal text.
    ///
    /// - Complexity: O(*n*) in the length of `bytes`.
    package static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: Array(bytes))
        return try parser.parseDocument()
    }

    /// Parses a complete JSON text, and returns with it the first key found twice in one object (the
    /// parse keeps the last value, as most JSON parsers do), as a position and a reason.
    ///
    /// - Complexity: O(*n*) in the length of `bytes`.
    package static func parseFindingDuplicateKeys(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> (
        JSONValue, duplicate: JSONParseError?
    ) {
        var parser = JSONParser(bytes: Array(bytes))
        let value = try parser.parseDocument()
        return (value, parser.firstDuplicate)
    }

    /// Parses a JSON text given as a string.
    package static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0
    /// The first key found twice in one object.
    var firstDuplicate: JSONParseError?

    /// The deepest nesting read (named in the error's sentence, a `StaticString`).
    static let maximumDepth = 512

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if index < bytes.count {
            throw error("unexpected character after the end of the JSON value, expected only white space")
        }
        return value
    }

    /// A syntax error at `offset` (by default the current index). The reason is a `StaticString`, so
    /// that nothing read from the text can be put in it: the text may hold a secret.
    func error(_ reason: StaticString, at offset: Int? = nil) -> JSONParseError {
        place(reason.description, at: offset)
    }

    func place(_ reason: String, at offset: Int? = nil) -> JSONParseError {
        let offset = min(offset ?? index, bytes.count)
        var line = 1
        var lineStart = 0
        for position in 0..<offset where bytes[position] == UInt8(ascii: "\n") {
            line += 1
            lineStart = position + 1
        }
        return JSONParseError(offset: offset, line: line, column: offset - lineStart + 1, reason: reason)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of file, expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default:
            throw error("unexpected character, expected a value (a string is written in double quotes)")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let start = index
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for byte in expected {
            guard index < bytes.count, bytes[index] == byte else {
                throw error("invalid literal, expected true, false or null", at: start)
            }
            index += 1
        }
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > Self.maximumDepth { throw error("nesting deeper than 512 levels") }
    }

    /// Steps into a container at its opening bracket (one level deeper) and over the white space
    /// after it; returns true, past `closing`, when the container is empty.
    mutating func enterContainer(closing: UInt8) throws(JSONParseError) -> Bool {
        try enter()
        index += 1
        skipWhitespace()
        guard index < bytes.count, bytes[index] == closing else { return false }
        index += 1
        return true
    }

    /// After a member of an object or an array (whose closing bracket is `closing`): steps over the
    /// ',' before the next member (returns false) or over `closing` (returns true).
    mutating func passSeparator(closing: UInt8) throws(JSONParseError) -> Bool {
        let isObject = closing == UInt8(ascii: "}")
        skipWhitespace()
        guard index < bytes.count else {
            throw isObject
                ? error("unexpected end of file in an object, expected ',' or '}'")
                : error("unexpected end of file in an array, expected ',' or ']'")
        }
        switch bytes[index] {
        case UInt8(ascii: ","):
            index += 1
            return false
        case closing:
            index += 1
            return true
        default:
            throw isObject
                ? error("unexpected character in an object, expected ',' or '}'")
                : error("unexpected character in an array, expected ',' or ']'")
        }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        var members: [String: JSONValue] = [:]
        let isEmpty = try enterContainer(closing: UInt8(ascii: "}"))
        defer { depth -= 1 }
        if isEmpty { return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of file in an object, expected a key") }
            guard bytes[index] == UInt8(ascii: "\"") else {
                throw error("unexpected character in an object, expected a key in double quotes")
            }
            let keyStart = index
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                // Not named: a string where a key belongs may be a value (a secret) whose key is
                // missing.
                throw index < bytes.count
                    ? error("unexpected character after a key, expected ':'")
                    : error("unexpected end of file after a key, expected ':'")
            }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            if members.updateValue(value, forKey: key) != nil, firstDuplicate == nil {
                // The text parsed: this string is a key, and a key's name is no secret.
                firstDuplicate = place("the key \"\(key)\" appears more than once in one object; its last value is used", at: keyStart)
            }
            if try passSeparator(closing: UInt8(ascii: "}")) { return .object(members) }
        }
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        var elements: [JSONValue] = []
        let isEmpty = try enterContainer(closing: UInt8(ascii: "]"))
        defer { depth -= 1 }
        if isEmpty { return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            if try passSeparator(closing: UInt8(ascii: "]")) { return .array(elements) }
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        func digits(_ parser: inout JSONParser) -> Int {
            let first = parser.index
            while parser.index < parser.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(parser.bytes[parser.index]) {
                parser.index += 1
            }
            return parser.index - first
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
            throw error("invalid number, expected a digit")
        }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                throw error("invalid number, leading zeros are not allowed")
            }
        } else {
            _ = digits(&self)
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            if digits(&self) == 0 { throw error("invalid number, expected a digit after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            if digits(&self) == 0 { throw error("invalid number, expected a digit in the exponent") }
        }
        return .number(String(decoding: bytes[start..<index], as: UTF8.self))
    }

    mutating func parseString() throws(JSONParseError) -> String {
        let start = index
        index += 1
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flushRun(_ parser: JSONParser, to end: Int, into scalars: inout String.UnicodeScalarView) throws(JSONParseError) {
            guard runStart < end else { return }
            guard let text = String(validating: parser.bytes[runStart..<end], as: UTF8.self) else {
                throw parser.error("invalid UTF-8 in a string", at: runStart)
            }
            scalars.append(contentsOf: text.unicodeScalars)
        }
        while true {
            guard index < bytes.count else { throw error("unterminated string", at: start) }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                try flushRun(self, to: index, into: &scalars)
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                try flushRun(self, to: index, into: &scalars)
                scalars.append(try parseEscape())
                runStart = index
            case 0..<0x20:
                throw error("unescaped control character in a string (write a line break as \\n, a tab as \\t)")
            default:
                index += 1
            }
        }
    }

    mutating func parseEscape() throws(JSONParseError) -> Unicode.Scalar {
        let start = index
        index += 1
        guard index < bytes.count else { throw error("unterminated escape sequence", at: start) }
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let high = try parseHex4(escapeStart: start)
            if (0xD800..<0xDC00).contains(high) {
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw error("unpaired high surrogate in a \\u escape", at: start)
                }
                index += 2
                let low = try parseHex4(escapeStart: start)
                guard (0xDC00..<0xE000).contains(low) else { throw error("invalid low surrogate in a \\u escape", at: start) }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
            }
            guard let scalar = Unicode.Scalar(high) else { throw error("unpaired low surrogate in a \\u escape", at: start) }
            return scalar
        default:
            throw error("invalid escape sequence, expected \\\", \\\\, \\/, \\b, \\f, \\n, \\r, \\t or \\uXXXX", at: start)
        }
    }

    mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < bytes.count, let digit = hexValue(bytes[index]) else {
                throw error("invalid \\u escape, expected 4 hexadecimal digits", at: escapeStart)
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}
