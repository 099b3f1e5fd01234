/// A user name and password for an etcd cluster with authentication enabled.
///
/// The password is sent only to `/v3/auth/authenticate`; it never appears in an error, a log or a
/// `description` (which shows the user only).
package struct EtcdCredentials: Sendable, CustomStringConvertible {
    /// The etcd user.
    package var user: String
    /// The user's password.
    package var password: String

    package init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    package var description: String { "EtcdCredentials(user: \(user), password: <redacted>)" }
}
