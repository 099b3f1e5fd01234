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
import ObservableDefaults
import ObservableDefaultsEtcd

/// The options that name a store on etcd: `--etcd URL[,URL…] --prefix PREFIX [--user USER]
/// [--password-file PATH] [--cacert PATH]`. The password never comes from the command line (other users can read a
/// process's arguments): it comes from `KVO_ETCD_PASSWORD` or the first line of `--password-file`.
struct EtcdArguments {
    var endpoints: [URL]?
    var prefix: String?
    var user: String?
    var passwordFile: String?
    var trustedCertificates: String?

    /// The environment variable the password is read from.
    static let passwordVariable = "KVO_ETCD_PASSWORD"

    /// Takes `argument` (and its value from `arguments`) if it is one of the etcd options; returns
    /// whether it was.
    mutating func parse(_ argument: String, _ arguments: inout ArraySlice<String>) -> Bool {
        let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
        guard ["--etcd", "--prefix", "--user", "--password-file", "--password", "--cacert"].contains(name) else { return false }
        if name == "--password" {
            usageError(
                "the password is not taken from the command line (other users can read it): set \(Self.passwordVariable) or use --password-file"
            )
        }
        let inline = argument.contains("=") ? String(argument.dropFirst(name.count + 1)) : nil
        guard let value = inline ?? arguments.popFirst() else { usageError("'\(name)' needs a value") }
        switch name {
        case "--etcd":
            var urls: [URL] = []
            for text in value.split(separator: ",", omittingEmptySubsequences: false) {
                guard let url = URL(string: String(text)), url.scheme == "http" || url.scheme == "https", url.host?.isEmpty == false else {
                    usageError("'--etcd' needs http or https URLs separated by commas ('\(text)' is not one)")
                }
                if let problem = EtcdClient.problem(with: url) {
                    // The URL is the operator's own argument: quoting it back is safe.
                    usageError("'--etcd' \(text): \(problem)")
                }
                urls.append(url)
            }
            endpoints = urls
        case "--prefix": prefix = value
        case "--user": user = value
        case "--cacert":
            guard !value.isEmpty else { usageError("'--cacert' needs a path") }
            trustedCertificates = value
        default:
            guard !value.isEmpty else { usageError("'--password-file' needs a path") }
            passwordFile = value
        }
        return true
    }

    /// Checks that the options go together (called when `--etcd` is given; without it, none of the
    /// others may be).
    func check() {
        if prefix == nil { usageError("'--etcd' needs '--prefix PREFIX' (the key prefix of the store, such as myapp/)") }
        if passwordFile != nil, user == nil { usageError("'--password-file' needs '--user USER'") }
    }

    /// Whether an etcd option other than `--etcd` was given (an error without `--etcd`).
    var hasOptionsWithoutEndpoints: Bool {
        endpoints == nil && (prefix != nil || user != nil || passwordFile != nil || trustedCertificates != nil)
    }

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
