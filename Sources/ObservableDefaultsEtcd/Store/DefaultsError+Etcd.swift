import ObservableDefaults

extension DefaultsError {
    /// The store's error for a failed etcd request: `.unreachable` (no member answered, or a reply
    /// was lost), `.authenticationFailed`, `.permissionDenied`, `.invalidEndpoint`, or
    /// `.remoteFailed` (etcd answered with an error, with something that is not etcd's reply, or
    /// with a reply larger than the client's cap).
    /// The reason is the client's, which names the endpoints and the user, never a password.
    init(_ error: EtcdError, location: DefaultsLocation, key: String? = nil) {
        let kind: Kind =
            switch error.kind {
            case .unreachable, .timeout, .replyLost: .unreachable
            case .authenticationFailed: .authenticationFailed
            case .permissionDenied: .permissionDenied
            case .invalidEndpoint: .invalidEndpoint
            case .compacted, .server, .malformedReply, .replyTooLarge: .remoteFailed
            }
        self.init(kind, location: location, key: key, reason: error.description)
    }
}
