/// One property of a configuration type that failed to decode (`DefaultsStore.decode(_:strictly:)`):
/// a value that is missing, or a value in one of the store's layers that does not decode as the
/// property's type. It names the key, the layer and where the layer holds the value, never the
/// value of a secret (a key declared secret, or a value of a secret layer).
public struct DefaultsConfigurationProblem: Sendable, Hashable, CustomStringConvertible {
    /// The property's key (`maxConnections`).
    public let key: String
    /// The layer holding the value that does not decode: one of the store's layers, `.store` (its
    /// file or etcd) or `.registered`; `nil` for a value that is missing.
    public let layer: DefaultsLayerKind?
    /// Where the layer holds the value (`--max-connections`, `PREFIX_MAX_CONNECTIONS`, a file's path),
    /// or `nil` (the back end, the registered defaults, a missing value).
    public let spelling: String?
    /// What is wrong, in words (`does not decode as Int: it is not JSON …`, `missing: …`).
    public let problem: String

    /// `maxConnections: the arguments layer's value (--max-connections) does not decode as Int: …`.
    public var description: String {
        guard let layer else { return "\(key): \(problem)" }
        let place = spelling.map { " (\($0))" } ?? ""
        let source =
            switch layer {
            case .store: "the store's value"
            case .registered: "the registered default"
            default: "the \(layer) layer's value"
            }
        return "\(key): \(source)\(place) \(problem)"
    }
}
