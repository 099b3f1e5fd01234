import Foundation

/// Where a `DefaultsStore` keeps its values: a file on this machine, or a prefix of an etcd cluster.
///
/// ```swift
/// switch store.location {
/// case .file(let path): print("values in", path)
/// case .etcd(let endpoints, let prefix): print("values under", prefix, "at", endpoints)
/// }
/// ```
public enum DefaultsLocation: Sendable, Hashable, CustomStringConvertible {
    /// The JSON file at `path` (absolute; a symbolic link's target is written through the link).
    case file(path: String)
    /// The keys starting with `prefix` in the etcd cluster reached through `endpoints` (one etcd
    /// key per defaults key: `prefix` followed by the key's name).
    case etcd(endpoints: [URL], prefix: String)

    /// The file's path, or `etcd ENDPOINT,… prefix 'PREFIX'`.
    public var description: String {
        switch self {
        case .file(let path):
            path
        case .etcd(let endpoints, let prefix):
            "etcd \(endpoints.map(\.absoluteString).joined(separator: ",")) prefix '\(prefix)'"
        }
    }
}
