import KeyValueObserving
import Foundation

/// What a text layer (arguments, environment, directory) holds for one key: its text as written,
/// and where it was found, to name in a report (`--playback-speed`, `PLAYER_PLAYBACK_SPEED`,
/// `/etc/player/playbackSpeed`). Never the place a value is printed from: a report names the
/// spelling and the key, not the value.
package struct LayerText: Sendable, Hashable {
    /// The value's text; `nil` for a bare command-line flag (`--verbose`).
    package let text: String?
    /// Where it was found.
    package let spelling: String
    /// For a command-line flag whose value was the next argument (`--verbose file.txt`): a `Bool`
    /// key reads the flag as bare (`true`) when that text is not a boolean.
    package let isSeparateArgument: Bool

    package init(text: String?, spelling: String, isSeparateArgument: Bool = false) {
        self.text = text
        self.spelling = spelling
        self.isSeparateArgument = isSeparateArgument
    }
}

/// A read-only source of text values (arguments, environment, directory).
package protocol TextLayerSource: AnyObject, Sendable {
    /// What the source holds for the key `name`, or `nil`.
    func text(forKey name: String) -> LayerText?
    /// Calls `onChange` with the names of the keys that may have changed, on a thread of the
    /// source's, until `stop()` (sources that never change never call it).
    func startWatching(_ onChange: @escaping @Sendable (Set<String>) -> Void)
    /// Stops watching.
    func stop()
    /// The problems the source met (an unreadable file), each a sentence naming no value.
    var problems: [String] { get }
    /// Why the source holds nothing now (a directory that does not exist), or `nil` while it is
    /// there: the layer's status (`DefaultsLayerStatus`). A change of it is told through
    /// `startWatching`'s `onChange`, with no names.
    var unavailability: String? { get }
}

extension TextLayerSource {
    /// Arguments and the environment are always there.
    package var unavailability: String? { nil }
}

/// Why a layer's value does not decode for a key's type (a sentence that names no value).
package struct LayerDecodingFailure: Error, Sendable, Hashable {
    package let reason: String
}

/// How text from a layer is read for a key's type:
///
/// - a `String` (and anything that decodes from a JSON string: `URL`, string-backed enums) reads
///   the text as it is, quotes included;
/// - a `Bool` reads `true`/`false`, `yes`/`no`, `on`/`off` and `1`/`0` (any case), and a bare flag
///   as `true`;
/// - numbers, arrays, dictionaries and other `Codable` values read the text as JSON (`1.5`,
///   `[1, 2]`, `{"width": 3}`), surrounding white space ignored.
package enum LayerTextDecoding {
    package static func decode<Value: Decodable>(_ value: LayerText, as type: Value.Type) -> Result<Value, LayerDecodingFailure> {
        guard let text = value.text else {
            if let yes = true as? Value { return .success(yes) }
            return .failure(LayerDecodingFailure(reason: "a flag without a value only sets a Bool"))
        }
        if Value.self == Bool.self || Value.self == Bool?.self {
            switch text.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "yes", "on", "1": return .success(true as! Value)
            case "false", "no", "off", "0": return .success(false as! Value)
            default:
                // `--verbose input.txt`: the next argument was not the flag's value.
                if value.isSeparateArgument { return .success(true as! Value) }
                return .failure(LayerDecodingFailure(reason: "a Bool is true, false, yes, no, on, off, 1 or 0"))
            }
        }
        if Value.self == String.self { return .success(text as! Value) }
        if Value.self == String?.self { return .success(String?.some(text) as! Value) }
        // Types that decode from a string (URL, string-backed enums), before the text is read as
        // JSON: a string "42" stays a string.
        if let value = try? JSONValue.string(text).decode(as: Value.self) { return .success(value) }
        let json: JSONValue
        do {
            json = try JSONValue.parse(text)
        } catch {
            return .failure(
                LayerDecodingFailure(
                    reason: "it is not JSON (line \(error.line), column \(error.column): \(error.reason)), "
                        + "and \(Value.self) values are read as JSON"
                ))
        }
        do {
            return .success(try json.decode(as: Value.self))
        } catch {
            return .failure(LayerDecodingFailure(reason: DefaultsStorage.describe(error)))
        }
    }
}

/// How key names map to the spellings of the text layers: words split at case changes, digits
/// kept with the word before them, and a run of capitals one word (`maxHTTPConnections` is `max`,
/// `HTTP`, `Connections`); any other character than a letter, a digit or a combining mark
/// separates words.
///
/// Spelling a spelled name again changes nothing (`kebabCase(kebabCase(name))` is
/// `kebabCase(name)`, and so for `variableName`), and the variable of a key's kebab-case spelling
/// is the key's own variable. So that this holds for any text, the words are split on Unicode
/// scalars, not characters (joining words with `-` or `_` can merge characters: a word that starts
/// with a combining mark would join the separator), and a letter counts as a capital (or a small
/// letter) only when its case mapping changes it: case-mapped text then has no case change left
/// to split at.
package enum LayerKeyNames {
    /// The words of `name`.
    package static func words(of name: String) -> [String] {
        let scalars = Array(name.unicodeScalars)
        var words: [String] = []
        var word = String.UnicodeScalarView()
        /// The kind of the last letter or digit in `word`, and whether its last letter is small.
        var previous: Kind?
        var lastLetterIsLower = false
        for (index, scalar) in scalars.enumerated() {
            let kind = Kind(scalar)
            switch kind {
            case .separator:
                if !word.isEmpty { words.append(String(word)) }
                word = String.UnicodeScalarView()
                previous = nil
                lastLetterIsLower = false
                continue
            case .mark:
                // A mark belongs to the letter before it; one that starts a word has none.
                if !word.isEmpty { word.append(scalar) }
                continue
            case .upper where !word.isEmpty:
                let next = scalars[(index + 1)...].lazy.map(Kind.init).first { $0 != .mark }
                // camelCase → camel|Case; HTTPConnections → HTTP|Connections; http2Enabled →
                // http2|Enabled; HTTP2Server → HTTP2|Server; but A2B stays one word, as its
                // small-letter spelling a2b does.
                let splits =
                    previous == .lower || (previous == .digit && lastLetterIsLower)
                    || ((previous == .upper || previous == .digit) && next == .lower)
                if splits {
                    words.append(String(word))
                    word = String.UnicodeScalarView()
                    lastLetterIsLower = false
                }
            default:
                break
            }
            word.append(scalar)
            previous = kind
            switch kind {
            case .lower: lastLetterIsLower = true
            case .upper, .letter: lastLetterIsLower = false
            default: break
            }
        }
        if !word.isEmpty { words.append(String(word)) }
        return words
    }

    /// What a scalar is to `words(of:)`.
    private enum Kind: Equatable {
        /// A letter whose small-letter mapping changes it.
        case upper
        /// A letter whose capital mapping changes it.
        case lower
        /// A letter without case (or whose case mapping leaves it as it is).
        case letter
        case digit
        /// A combining mark (Mn, Mc, Me): part of the letter before it.
        case mark
        case separator

        init(_ scalar: Unicode.Scalar) {
            let properties = scalar.properties
            switch properties.generalCategory {
            case .nonspacingMark, .spacingMark, .enclosingMark:
                self = .mark
            default:
                if properties.isAlphabetic {
                    if properties.isUppercase && properties.changesWhenLowercased {
                        self = .upper
                    } else if properties.isLowercase && properties.changesWhenUppercased {
                        self = .lower
                    } else {
                        self = .letter
                    }
                } else if properties.numericType != nil {
                    self = .digit
                } else {
                    self = .separator
                }
            }
        }
    }

    /// The kebab-case spelling: `playbackSpeed` → `playback-speed`.
    package static func kebabCase(_ name: String) -> String {
        words(of: name).map { $0.lowercased() }.joined(separator: "-")
    }

    /// The environment variable of `name` under `prefix` (`PLAYER`, `PLAYER_` or empty):
    /// `playbackSpeed` → `PLAYER_PLAYBACK_SPEED`. Its words are the kebab-case words in capitals
    /// (capitals of the small letters, so that a key and its kebab-case spelling read one
    /// variable even for a letter whose capital is not itself, `ẞ` → `ß` → `SS`).
    package static func variableName(prefix: String, key name: String) -> String {
        let body = words(of: name).map { $0.lowercased().uppercased() }.joined(separator: "_")
        guard !prefix.isEmpty else { return body }
        return prefix.hasSuffix("_") ? prefix + body : prefix + "_" + body
    }
}

/// The command-line layer: the arguments parsed once, when the store is made.
package final class ArgumentLayer: TextLayerSource {
    /// Each flag's last value, by its name as written (without `--`), with its position.
    private let values: [String: (text: LayerText, position: Int)]

    package init(_ arguments: some Sequence<String>) {
        let arguments = Array(arguments)
        var values: [String: (text: LayerText, position: Int)] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" { break }
            guard argument.hasPrefix("--"), argument.count > 2 else {
                index += 1
                continue
            }
            let body = argument.dropFirst(2)
            if let equals = body.firstIndex(of: "=") {
                let name = String(body[..<equals])
                if !name.isEmpty {
                    values[name] = (LayerText(text: String(body[body.index(after: equals)...]), spelling: "--" + name), index)
                }
                index += 1
            } else if index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") {
                values[String(body)] = (LayerText(text: arguments[index + 1], spelling: argument, isSeparateArgument: true), index)
                index += 2
            } else {
                values[String(body)] = (LayerText(text: nil, spelling: argument), index)
                index += 1
            }
        }
        self.values = values
    }

    /// `--kebab-name` or `--name` as written, whichever comes last.
    package func text(forKey name: String) -> LayerText? {
        let kebab = values[LayerKeyNames.kebabCase(name)]
        let written = values[name]
        switch (kebab, written) {
        case (let kebab?, let written?): return kebab.position > written.position ? kebab.text : written.text
        case (let kebab?, nil): return kebab.text
        case (nil, let written?): return written.text
        case (nil, nil): return nil
        }
    }

    package func startWatching(_ onChange: @escaping @Sendable (Set<String>) -> Void) {}
    package func stop() {}
    package var problems: [String] { [] }
}

/// The environment layer: the variables read once, when the store is made.
package final class EnvironmentLayer: TextLayerSource {
    let prefix: String
    private let variables: [String: String]
    /// Which key each variable read so far was read for, to report two keys that map to one.
    private let readers = Locked([String: String]())

    package init(prefix: String, variables: [String: String]?) {
        self.prefix = prefix
        self.variables = variables ?? ProcessInfo.processInfo.environment
    }

    package func text(forKey name: String) -> LayerText? {
        let variable = LayerKeyNames.variableName(prefix: prefix, key: name)
        return variables[variable].map { LayerText(text: $0, spelling: variable) }
    }

    /// Notes that the key `name` was read; returns a problem if another key maps to its variable.
    package func noteKey(_ name: String) -> String? {
        let variable = LayerKeyNames.variableName(prefix: prefix, key: name)
        let other: String? = readers.withLock { readers in
            if let other = readers[variable] { return other == name ? nil : other }
            readers[variable] = name
            return nil
        }
        guard let other else { return nil }
        return Self.collision(variable, [other, name])
    }

    /// The collisions among the keys `names`: two or more mapping to one variable.
    package static func collisions(among names: [String], prefix: String) -> [String] {
        var byVariable: [String: [String]] = [:]
        for name in names { byVariable[LayerKeyNames.variableName(prefix: prefix, key: name), default: []].append(name) }
        return byVariable.filter { $0.value.count > 1 }.sorted { $0.key < $1.key }.map { collision($0.key, $0.value) }
    }

    private static func collision(_ variable: String, _ names: [String]) -> String {
        "the keys \(names.sorted().map { "'\($0)'" }.joined(separator: " and ")) both read the variable \(variable); "
            + "rename one of them to tell them apart"
    }

    package func startWatching(_ onChange: @escaping @Sendable (Set<String>) -> Void) {}
    package func stop() {}
    package var problems: [String] { [] }
}
