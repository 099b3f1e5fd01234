import Foundation
import KeyValueObserving
import ObservableDefaults

/// The options that build a store's layers as a program would (`--arg`, `--env-prefix`,
/// `--directory`), and those about secrets (`--secret`, `--reveal`) and `read --explain`. The tool
/// cannot see another process's arguments or environment: `--arg` gives the arguments, and the
/// environment is the tool's own.
struct LayerOptions {
    var arguments: [String] = []
    var environmentPrefix: String?
    var directory: String?
    var secrets: [String] = []
    var reveals = false
    var explains = false

    /// Takes `argument` (and its value from `rest`) if it is one of these options; returns whether
    /// it was.
    mutating func parse(_ argument: String, _ rest: inout ArraySlice<String>) -> Bool {
        let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
        switch name {
        case "--reveal":
            reveals = true
            return true
        case "--explain":
            explains = true
            return true
        case "--arg", "--env-prefix", "--directory", "--secret":
            break
        default:
            return false
        }
        let inline = argument.contains("=") ? String(argument.dropFirst(name.count + 1)) : nil
        guard let value = inline ?? rest.popFirst() else { usageError("'\(name)' needs a value") }
        switch name {
        case "--arg": arguments.append(value)
        case "--env-prefix": environmentPrefix = value
        case "--directory":
            if value.isEmpty { usageError("'--directory' needs a path") }
            directory = value
        default:
            guard !value.isEmpty, DefaultsKey<Int>.isValidName(value) else { usageError("'--secret' needs a key name") }
            secrets.append(value)
        }
        return true
    }

    /// The layers, in the order a program would read them: arguments, environment, directory.
    var layers: [DefaultsLayer] {
        var layers: [DefaultsLayer] = []
        if !arguments.isEmpty { layers.append(.arguments(arguments)) }
        if let environmentPrefix { layers.append(.environment(prefix: environmentPrefix)) }
        if let directory { layers.append(.directory(URL(fileURLWithPath: directory), watching: .automatic)) }
        return layers
    }

    /// Whether the value of `key` from `layer` is printed as `<redacted>`: a secret key's, and
    /// every value from a directory (where secrets are mounted), unless `--reveal`.
    func redacts(_ key: String, from layer: DefaultsLayerKind? = nil) -> Bool {
        !reveals && (DefaultsKeyNames.isSecret(key) || layer == .directory)
    }
}

/// Any JSON value, as a key's type for a store whose keys the tool does not know: a text layer's
/// value reads as JSON when it is JSON, else as a string (as `write` takes values).
struct ToolValue: Codable, Sendable {
    let json: JSONValue

    init(_ json: JSONValue) {
        self.json = json
    }

    init(from decoder: any Decoder) throws {
        if let container = try? decoder.singleValueContainer() {
            if container.decodeNil() {
                json = .null
            } else if let bool = try? container.decode(Bool.self) {
                json = .bool(bool)
            } else if let integer = try? container.decode(Int64.self) {
                json = .number(String(integer))
            } else if let number = try? container.decode(Double.self) {
                json = .number(String(number))
            } else if let text = try? container.decode(String.self) {
                // A text layer hands its text over as a string: JSON if it parses as JSON.
                json = (try? JSONValue.parse(text)) ?? .string(text)
            } else if let array = try? container.decode([ToolValue].self) {
                json = .array(array.map(\.json))
            } else {
                json = .object(try container.decode([String: ToolValue].self).mapValues(\.json))
            }
        } else {
            json = .object(try [String: ToolValue](from: decoder).mapValues(\.json))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch json {
        case .null: try container.encodeNil()
        case .bool(let bool): try container.encode(bool)
        case .number(let text):
            if let integer = Int64(text) { try container.encode(integer) } else { try container.encode(Double(text) ?? 0) }
        case .string(let text): try container.encode(text)
        case .array(let values): try container.encode(values.map(ToolValue.init))
        case .object(let values): try container.encode(values.mapValues(ToolValue.init))
        }
    }
}

/// The key of `name` for a layered read: absent reads as `nil`.
func layeredKey(_ name: String) -> DefaultsKey<ToolValue?> {
    DefaultsKey(name, default: nil)
}

/// The lines `read --explain KEY` prints: which layer answers, then what each holds (not the
/// registered defaults: a program registers them, the tool cannot see them). The tool does not
/// know the program's types: every value reads as JSON, or as a string.
func explanation(of name: String, in store: DefaultsStore, options: LayerOptions) -> [String] {
    let source = store._source(of: layeredKey(name), revealingSecrets: options.reveals)
    func shown(_ layer: DefaultsValueSource.Layer) -> String {
        guard let value = layer.value else { return "nothing" }
        return options.redacts(name, from: layer.kind) ? DefaultsKeyNames.redacted : value
    }
    let answer = source.answering
    var lines = [
        answer.kind == .defaultValue
            ? "\(name): no layer holds a value (it reads as the program's default)"
            : "\(name): \(shown(answer)) from the \(answer.kind) layer (\(answer.spelling ?? answer.place))"
    ]
    for (index, layer) in source.layers.enumerated() where layer.kind != .defaultValue && layer.kind != .registered {
        let mark = index == source.answeringIndex ? "->" : "  "
        let spelling = layer.spelling.map { " as \($0)" } ?? ""
        let problem = layer.problem.map { "; skipped: \($0)" } ?? ""
        let shadowed = index > source.answeringIndex && layer.value != nil && layer.problem == nil ? " (shadowed)" : ""
        lines.append("  \(mark) \(layer.kind) (\(layer.place)): \(shown(layer))\(spelling)\(problem)\(shadowed)")
    }
    return lines
}

/// What `write` says of a key a layer above the store shadows: the store holds the new value, and
/// the program reads another.
func shadowingNotice(of name: String, in store: DefaultsStore, options: LayerOptions) -> String? {
    let source = store._source(of: layeredKey(name), revealingSecrets: options.reveals)
    guard source.isShadowed else { return nil }
    let answer = source.answering
    let value = options.redacts(name, from: answer.kind) ? DefaultsKeyNames.redacted : answer.value ?? "?"
    return "\(name) is written to \(store.location), but shadowed by the \(answer.kind) layer (\(answer.spelling ?? answer.place)), "
        + "which holds \(value): a program with that layer reads its value"
}
