/// Whether one of a store's layers, or its back end, can be read now
/// (`DefaultsStore.layerStatuses`): a directory layer whose directory was removed, or a file that
/// does not parse, holds nothing a read can use until it is back.
public struct DefaultsLayerStatus: Sendable, Hashable, CustomStringConvertible {
    /// The layer's kind; `.store` for the back end.
    public let kind: DefaultsLayerKind
    /// Where it reads: a directory's path, `prefix PLAYER`, `the arguments given`, the store's file or
    /// etcd prefix.
    public let place: String
    /// Why it cannot be read now, or `nil` while it can.
    public let problem: String?

    /// Whether the layer can be read now.
    public var isAvailable: Bool { problem == nil }

    /// `directory /run/secrets: available`, or `directory /run/secrets: unavailable: …`.
    public var description: String {
        "\(kind) \(place): " + (problem.map { "unavailable: \($0)" } ?? "available")
    }
}
