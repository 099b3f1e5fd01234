import Foundation

/// A private certificate authority and a server certificate it signed, made with the `openssl`
/// command in a temporary directory (removed when the value is deallocated), for https tests.
package final class EtcdTestCertificates: Sendable {
    /// The authority's certificate (PEM): what a client must trust.
    package let authorityFile: String
    /// The server's certificate (PEM).
    package let certificateFile: String
    /// The server's private key (PEM).
    package let keyFile: String
    private let directory: String

    /// Makes the authority and a server certificate for `subjectAlternativeNames` (OpenSSL syntax:
    /// `IP:127.0.0.1`, `DNS:localhost`).
    ///
    /// - Throws: `EtcdHarnessError` when `openssl` is missing or fails.
    package init(subjectAlternativeNames: [String] = ["IP:127.0.0.1", "DNS:localhost"]) throws {
        directory = NSTemporaryDirectory() + "/kvo-etcd-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        authorityFile = "\(directory)/ca.crt"
        certificateFile = "\(directory)/server.crt"
        keyFile = "\(directory)/server.key"
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let candidates = path.split(separator: ":").map { "\($0)/openssl" }
        guard let openssl = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw EtcdHarnessError("the https tests need the openssl command (Debian/Ubuntu: apt-get install -y openssl)")
        }
        try "subjectAltName=\(subjectAlternativeNames.joined(separator: ","))\n".write(
            toFile: "\(directory)/san.cnf", atomically: true, encoding: .utf8)
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let steps: [[String]] = [
            ["req", "-x509"] + key + ["-keyout", "\(directory)/ca.key", "-out", authorityFile, "-days", "2", "-subj", "/CN=kvo test CA"],
            ["req"] + key + ["-keyout", keyFile, "-out", "\(directory)/server.csr", "-subj", "/CN=kvo test etcd"],
            [
                "x509", "-req", "-in", "\(directory)/server.csr", "-CA", authorityFile, "-CAkey", "\(directory)/ca.key", "-CAcreateserial",
                "-out", certificateFile, "-days", "2", "-extfile", "\(directory)/san.cnf",
            ],
        ]
        for step in steps {
            let result = try runChild(executable: openssl, arguments: step)
            guard result.status == 0 else { throw EtcdHarnessError("openssl \(step[0]) failed: \(result.output)") }
        }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }
}
