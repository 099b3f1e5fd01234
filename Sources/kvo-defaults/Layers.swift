import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableDefaults

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
