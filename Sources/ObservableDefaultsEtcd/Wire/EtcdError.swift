import Foundation

/// A failed etcd request: what failed, at which endpoint(s), and why. It never contains a password or
/// an authentication token.
package struct EtcdError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    package enum Kind: Sendable, Hashable {
        /// An endpoint URL is not usable (not http or https, no host); thrown by `EtcdClient.init`.
        case invalidEndpoint
        /// No endpoint could be reached (every one refused the connection, was unknown or timed out
        /// before the request was sent); `endpoints` lists them.
        case unreachable
        /// A request that cannot have applied (a read) got no reply in time from any endpoint.
        case timeout
        /// The user name or password was refused; `user` names the user.
        case authenticationFailed
        /// The user may not do this (etcd's role permissions).
        case permissionDenied
        /// The revision asked for was compacted; `compactRevision` is the oldest one left.
        case compacted
        /// The request was sent and no reply arrived (timeout or connection lost after sending, the
        /// member stopped): it may or may not have applied.
        case replyLost
        /// etcd answered with an error (`status`, `code`, `reason` say which).
        case server
        /// The reply was not what the etcd v3 JSON gateway sends.
        case malformedReply
        /// A reply body (or a line of a watch's stream) exceeded
        /// `EtcdClientOptions.maximumReplySize`; the reason names the cap.
        case replyTooLarge
    }

    /// What went wrong.
    package var kind: Kind
    /// The endpoints concerned: the one that answered, or those tried.
    package var endpoints: [URL]
    /// For `.authenticationFailed`: the user.
    package var user: String?
    /// For `.compacted`: the compact revision, when etcd reported it.
    package var compactRevision: Int64?
    /// For `.server`: the HTTP status.
    package var status: Int?
    /// For `.server`: the gRPC code in the reply, when there was one.
    package var code: Int?
    /// What failed, in words (the request and the cause).
    package var reason: String

    package init(
        _ kind: Kind, endpoints: [URL], reason: String, user: String? = nil, compactRevision: Int64? = nil, status: Int? = nil,
        code: Int? = nil
    ) {
        self.kind = kind
        self.endpoints = endpoints
        self.reason = reason
        self.user = user
        self.compactRevision = compactRevision
        self.status = status
        self.code = code
    }

    package var description: String {
        let places = endpoints.map(\.absoluteString).joined(separator: ", ")
        var text = "etcd \(kind)"
        if let user { text += " (user \(user))" }
        if let status { text += " (HTTP \(status)\(code.map { ", code \($0)" } ?? ""))" }
        if let compactRevision { text += " (compact revision \(compactRevision))" }
        return text + (places.isEmpty ? "" : " at \(places)") + ": " + reason
    }
}
