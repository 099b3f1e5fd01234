import Foundation

extension EtcdClient {
    /// Why `endpoint` cannot name an etcd member, or nil when it can: an `http` or `https` URL with
    /// a host, no user or password, and, when it has a port, one from 1 to 65535 (`URL` accepts any
    /// digits there, and the socket layer would truncate 99999 to 34463, or silently use port 80
    /// for a port too long for an `Int`).
    ///
    /// The reason never quotes the URL (it may carry a password); callers name the endpoint.
    package static func problem(with endpoint: URL) -> String? {
        guard let host = endpoint.host, !host.isEmpty, let scheme = endpoint.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else {
            return "an etcd endpoint must be an http:// or https:// URL with a host"
        }
        guard endpoint.user == nil && endpoint.password == nil else {
            return "an etcd endpoint must not carry a user or password (pass credentials instead)"
        }
        if let port = portText(of: endpoint) {
            let number = port.count <= 5 && port.allSatisfy({ $0.isASCII && $0.isNumber }) ? Int(port) : nil
            guard let number, (1...65535).contains(number) else {
                return "an etcd endpoint's port must be a number from 1 to 65535 (got '\(port)')"
            }
        }
        return nil
    }

    /// What follows the colon after the host in `endpoint`'s authority, or nil when there is no
    /// colon (the scheme's default port).
    private static func portText(of endpoint: URL) -> Substring? {
        let text = endpoint.absoluteString
        guard let schemeEnd = text.range(of: "://") else { return nil }
        var authority = text[schemeEnd.upperBound...].prefix { !"/?#".contains($0) }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") { authority = authority[authority.index(after: close)...] }
        guard let colon = authority.lastIndex(of: ":") else { return nil }
        return authority[authority.index(after: colon)...]
    }
}
