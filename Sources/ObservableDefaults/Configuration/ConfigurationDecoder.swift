import Foundation

/// Decodes a configuration type from a `DefaultsSnapshot`: each stored property is a key, read
/// through the snapshot's layers, its back end's values and its registered defaults, first first,
/// as a `DefaultsKey` of the property's type reads (a property of a nested type is one key holding
/// JSON). Strictly, a value that does not decode in any of them is a problem, even where another
/// answers; a missing non-optional property always is.
///
/// To list every failing property rather than the first, a property that fails is given a value
/// to go on with: the value that answers (another layer's), else a placeholder
/// (`ConfigurationPlaceholder`). Where no placeholder can be made, decoding stops there.
final class ConfigurationDecoding {
    let snapshot: DefaultsSnapshot
    let strictly: Bool
    /// The problems met, in the order the type asked for its keys.
    var problems: [DefaultsConfigurationProblem] = []
    /// The keys the type asked for.
    var requestedKeys: [String] = []
    /// Whether a value that answered is secret (a key declared secret, or a secret layer's value).
    var holdsSecret: Bool { !secretKeys.isEmpty }
    /// The keys whose value that answered is secret, or that a secret layer holds.
    var secretKeys: Set<String> = []
    /// The key after which decoding stopped, for want of a value to go on with.
    var stoppedAt: String?

    init(snapshot: DefaultsSnapshot, strictly: Bool) {
        self.snapshot = snapshot
        self.strictly = strictly
    }

    /// Thrown by a container to stop decoding: the problems say why.
    struct Stop: Error {}

    /// Decodes `type`; the problems met are in `problems` (the value is `nil` when there are some).
    func decode<Configuration: Decodable>(_ type: Configuration.Type) -> Configuration? {
        do {
            let value = try Configuration(from: ConfigurationDecoder(decoding: self))
            return problems.isEmpty ? value : nil
        } catch is Stop {
            return nil
        } catch {
            // The type's own `init(from:)` threw (a check of its own, or a shape this decoder does
            // not offer): the first problem, unless a property's problem caused it.
            if problems.isEmpty {
                let key = (error as? DecodingError).flatMap(Self.codingPath(of:))?.first?.stringValue ?? ""
                // Its message may quote a value: not one that is secret, nor any when it names no key.
                let isSecret = key.isEmpty ? holdsSecret : secretKeys.contains(key) || DefaultsKeyNames.isSecret(key)
                problems.append(
                    DefaultsConfigurationProblem(
                        key: key, layer: nil, spelling: nil,
                        problem: isSecret ? "does not decode as \(Configuration.self)" : DefaultsStorage.describe(error)))
            }
            return nil
        }
    }

    /// The `.invalidConfiguration` error of `problems`, about the store at `location`.
    func error<Configuration>(_: Configuration.Type, location: DefaultsLocation) -> DefaultsError {
        let count = problems.count == 1 ? "1 problem" : "\(problems.count) problems"
        let stopped = stoppedAt.map { "; the properties after '\($0)' were not checked (no value of its type could be made to go on with)" }
        var error = DefaultsError(
            .invalidConfiguration, location: location, reason: "\(Configuration.self) does not decode, \(count)\(stopped ?? "")")
        error.configurationProblems = problems
        return error
    }

    private static func codingPath(of error: DecodingError) -> [any CodingKey]? {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): context.codingPath
        case .keyNotFound(let key, let context): context.codingPath + [key]
        @unknown default: nil
        }
    }

    /// Whether any source holds a value of `key` (a key the type asks about, as one it decodes).
    func holds(_ key: String) -> Bool {
        requestedKeys.append(key)
        return snapshot.entries[key] != nil || snapshot.registered[key] != nil
            || snapshot.layers?.holdings[key]?.contains { $0 != nil } == true
    }

    /// The value of `key` as a `Value`: the first source's that decodes. A source whose value does
    /// not decode is a problem strictly, or (for a non-optional) where no source answers; no value
    /// at all is one unless `isOptional` (then `nil`).
    func value<Value: Decodable>(of _: Value.Type, forKey key: String, isOptional: Bool) throws -> Value? {
        requestedKeys.append(key)
        _ = DefaultsKeyNames.offset(of: key, readAs: Value.self)
        let isSecretKey = DefaultsKeyNames.isSecret(key)
        var answer: Value?
        var refusals: [DefaultsConfigurationProblem] = []
        /// Notes that the value of `layer` (at `spelling`) does not decode: with its reason only if
        /// nothing of it is secret (a reason can quote the value).
        func refused(_ layer: DefaultsLayerKind, _ spelling: String?, reason: String, isSecret: Bool) {
            let problem = "does not decode as \(Value.self)" + (isSecret ? "" : ": \(reason)")
            refusals.append(DefaultsConfigurationProblem(key: key, layer: layer, spelling: spelling, problem: problem))
        }
        if let layers = snapshot.layers, let holdings = layers.holdings[key] {
            for (index, holding) in holdings.enumerated() {
                guard let holding else { continue }
                switch DefaultsLayerStack.decode(holding, as: Value.self) {
                case .success(let value):
                    if answer == nil {
                        answer = value
                        if layers.secretLayers[index] { secretKeys.insert(key) }
                    }
                case .failure(let failure):
                    let spelling: String? =
                        switch holding {
                        case .text(let text): text.spelling
                        case .memory: nil
                        }
                    refused(layers.kinds[index], spelling, reason: failure.reason, isSecret: isSecretKey || layers.secretLayers[index])
                }
            }
        }
        for (entry, layer) in [(snapshot.entries[key], DefaultsLayerKind.store), (snapshot.registered[key], .registered)] {
            guard let entry else { continue }
            switch Self.decode(entry, as: Value.self) {
            case .success(let value): if answer == nil { answer = value }
            case .failure(let failure): refused(layer, nil, reason: failure.reason, isSecret: isSecretKey)
            }
        }
        if let answer {
            if strictly { problems += refusals }
            if isSecretKey { secretKeys.insert(key) }
            return answer
        }
        // Not strictly, a value that does not decode is skipped: an optional is then absent.
        if isOptional, refusals.isEmpty || !strictly { return nil }
        problems +=
            refusals.isEmpty
            ? [
                DefaultsConfigurationProblem(
                    key: key, layer: nil, spelling: nil,
                    problem: "missing: no layer, the store nor the registered defaults hold a value, and its type has no default")
            ] : refusals
        guard let placeholder = ConfigurationPlaceholder.make(Value.self) else {
            stoppedAt = key
            throw Stop()
        }
        return placeholder
    }

    /// `entry` as a `Value`, or why it does not decode.
    private static func decode<Value: Decodable>(_ entry: DefaultsStorage.Entry, as _: Value.Type) -> Result<Value, LayerDecodingFailure> {
        if let typed = entry.typed.flatMap({ $0 as? Value }) { return .success(typed) }
        guard let json = DefaultsStorage.json(of: entry) else { return .failure(LayerDecodingFailure(reason: "it cannot be read as JSON")) }
        do {
            return .success(try json.decode(as: Value.self))
        } catch {
            return .failure(LayerDecodingFailure(reason: DefaultsStorage.describe(error)))
        }
    }
}

/// The decoder a configuration type's `init(from:)` gets: one keyed container over the snapshot.
struct ConfigurationDecoder: Decoder {
    let decoding: ConfigurationDecoding
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ConfigurationContainer<Key>(decoding: decoding))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw Self.notKeyed
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw Self.notKeyed
    }

    static var notKeyed: DecodingError {
        DecodingError.typeMismatch(
            [String: Any].self,
            DecodingError.Context(
                codingPath: [],
                debugDescription: "a configuration type decodes its properties by name (a struct or a class with properties)"))
    }
}

/// The container of a configuration's properties: each key read through the snapshot's sources.
struct ConfigurationContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoding: ConfigurationDecoding
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { decoding.snapshot.keys.sorted().compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { decoding.holds(key.stringValue) }

    func decodeNil(forKey key: Key) throws -> Bool { !decoding.holds(key.stringValue) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoding.value(of: T.self, forKey: key.stringValue, isOptional: false)!
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try decoding.value(of: T.self, forKey: key.stringValue, isOptional: true)
    }

    // The protocol's own forms for these types test `contains` and `decodeNil`, then decode as if
    // the property were not optional: an optional property's value that does not decode, not
    // strictly, would then fail rather than be absent.
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try optional(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try optional(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try optional(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try optional(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try optional(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try optional(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try optional(type, key) }

    private func optional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        try decoding.value(of: T.self, forKey: key.stringValue, isOptional: true)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw Self.notNested(key)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw Self.notNested(key)
    }

    func superDecoder() throws -> any Decoder { throw Self.notNested(nil) }

    func superDecoder(forKey key: Key) throws -> any Decoder { throw Self.notNested(key) }

    private static func notNested(_ key: Key?) -> DecodingError {
        DecodingError.typeMismatch(
            [String: Any].self,
            DecodingError.Context(
                codingPath: key.map { [$0] } ?? [],
                debugDescription:
                    "a configuration's property is one key: give it a Decodable type of its own rather than a nested container"))
    }
}
