#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif
import Foundation
import KVOToolArguments
import ObservableDefaults
import ObservableDefaultsEtcd

extension EtcdStoreArguments {
    /// The store, waiting up to `timeout` (default 5 s) for the cluster's first answer.
    ///
    /// - Throws: `DefaultsError` from `DefaultsStore(etcd:prefix:credentials:trustedCertificates:timeout:maximumReplySize:layers:secrets:errorHandler:)`.
    func openStore(
        timeout: Duration?, layers: [DefaultsLayer], secrets: [String], errorHandler: @escaping @Sendable (DefaultsError) -> Void
    ) throws(DefaultsError) -> DefaultsStore {
        try DefaultsStore(
            etcd: endpoints!, prefix: prefix!, credentials: credentials(),
            trustedCertificates: trustedCertificates.map { URL(fileURLWithPath: $0) }, timeout: timeout ?? .seconds(5),
            layers: layers, secrets: secrets, errorHandler: errorHandler)
    }

    /// The credentials of `--user`, with the password from `--password-file` or the environment.
    private func credentials() -> DefaultsStore.EtcdCredentials? {
        guard let user else { return nil }
        var password: String
        if let passwordFile {
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                fail("cannot read the password file \(passwordFile)")
            }
            password = String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
            if password.hasSuffix("\r") { password.removeLast() }
        } else if let fromEnvironment = ProcessInfo.processInfo.environment[Self.passwordVariable] {
            password = fromEnvironment
        } else {
            usageError("'--user \(user)' needs a password: set \(Self.passwordVariable) or use --password-file PATH")
        }
        return DefaultsStore.EtcdCredentials(user: user, password: password)
    }
}
