import Foundation
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("etcd client: https", .tags(.processes), .requiresEtcdAndOpenSSL)
struct TLSTests {
    @Test func anHttpsClusterSignedByAPrivateAuthorityWorksWhenTheAuthorityIsTrusted() throws {
        let certificates = try EtcdTestCertificates()
        let server = try EtcdServer(options: EtcdCluster.Options(tls: certificates))
        #expect(server.endpoint.scheme == "https")
        var options = testOptions
        options.trustedCertificatesFile = certificates.authorityFile
        let etcd = try client(server.endpoints, options: options)
        let start = try etcd.range(prefix: bytes("s/")).revision
        let recorder = NoticeRecorder()
        let watch = etcd.watch(prefix: bytes("s/"), startRevision: start + 1, handler: recorder.handler)
        defer { watch.cancel() }
        for value in 1...3 { _ = try etcd.put(key: bytes("s/k"), value: bytes("\(value)")) }
        #expect(try etcd.range(key: bytes("s/k")).keyValue?.value == bytes("3"))
        #expect(recorder.waitForEvents(3))
        #expect(recorder.summary == ["1", "2", "3"])
    }

    @Test func aCertificateFromAnUntrustedAuthorityIsRefusedNamingTheEndpoint() throws {
        let certificates = try EtcdTestCertificates()
        let server = try EtcdServer(options: EtcdCluster.Options(tls: certificates))
        let etcd = try client(server.endpoints, options: EtcdClientOptions(attempts: 1))
        let error = try #require(throws: EtcdError.self) { try etcd.put(key: bytes("k"), value: bytes("v")) }
        #expect(error.kind == .unreachable)
        #expect(error.description.contains(server.endpoint.absoluteString))
        #expect(error.description.contains("certificate"))
    }

    @Test func aCertificateForAnotherAddressIsRefusedNamingTheAddressConnectedTo() throws {
        let certificates = try EtcdTestCertificates(subjectAlternativeNames: ["IP:127.0.0.2", "DNS:etcd.example"])
        let server = try EtcdServer(options: EtcdCluster.Options(tls: certificates))
        var options = EtcdClientOptions(attempts: 1)
        options.trustedCertificatesFile = certificates.authorityFile
        let error = try #require(throws: EtcdError.self) { try client(server.endpoints, options: options).range(key: bytes("k")) }
        #expect(error.kind == .unreachable)
        #expect(error.description.contains("certificate was refused for 127.0.0.1: IP address mismatch"), "\(error)")
    }

    @Test func theNameInTheURLIsVerifiedNotTheAddressItResolvesTo() throws {
        // Issued for the address only: https://localhost reaches that address and is refused.
        let certificates = try EtcdTestCertificates(subjectAlternativeNames: ["IP:127.0.0.1"])
        let server = try EtcdServer(options: EtcdCluster.Options(tls: certificates))
        var options = EtcdClientOptions(attempts: 1)
        options.trustedCertificatesFile = certificates.authorityFile
        let port = try #require(server.endpoint.port)
        let byName = try #require(URL(string: "https://localhost:\(port)"))
        let error = try #require(throws: EtcdError.self) { try client([byName], options: options).range(key: bytes("k")) }
        #expect(error.kind == .unreachable)
        #expect(error.description.contains("certificate was refused for localhost: hostname mismatch"), "\(error)")
        #expect(throws: Never.self) { try client(server.endpoints, options: options).range(key: bytes("k")) }
    }

    @Test func eachCheckedCallOfTheContextThatFailsRefusesTheContextNamingTheCall() throws {
        let certificates = try EtcdTestCertificates()
        for call in EtcdTLS.Call.allCases where call.isContextCall {
            let error = try #require(throws: EtcdSocketFailure.self) {
                try EtcdTLS(trustedCertificatesFile: certificates.authorityFile, failing: [call])
            }
            #expect(error.reason.contains(call.rawValue), "\(error.reason)")
        }
        #expect(throws: Never.self) { try EtcdTLS(trustedCertificatesFile: certificates.authorityFile) }
    }

    @Test func eachCheckedCallOfAConnectionThatFailsRefusesTheConnectionNamingTheCall() throws {
        let certificates = try EtcdTestCertificates()
        let server = try EtcdServer(options: EtcdCluster.Options(tls: certificates))
        let port = try #require(server.endpoint.port)
        func connect(_ host: String, failing: Set<EtcdTLS.Call>) throws {
            let tls = try EtcdTLS(trustedCertificatesFile: certificates.authorityFile, failing: failing)
            try EtcdSocket.connect(host: host, port: port, tls: tls, deadline: .now + .seconds(10)).close()
        }
        for call in EtcdTLS.Call.allCases where !call.isContextCall {
            // The name calls are made for a name, the address call for an address; the others for both.
            let hosts =
                switch call {
                case .setServerName, .setHost: ["localhost"]
                case .setAddress: ["127.0.0.1"]
                default: ["localhost", "127.0.0.1"]
                }
            for host in hosts {
                let error = try #require(throws: EtcdSocketFailure.self) { try connect(host, failing: [call]) }
                #expect(error.reason.contains(call.rawValue), "\(host): \(error.reason)")
            }
        }
        for host in ["localhost", "127.0.0.1"] { #expect(throws: Never.self) { try connect(host, failing: []) } }
    }

    @Test func aMissingAuthorityFileIsRefusedWhenTheClientIsMade() throws {
        var options = EtcdClientOptions()
        options.trustedCertificatesFile = "/nonexistent/ca.pem"
        let error = try #require(throws: EtcdError.self) {
            try EtcdClient(endpoints: [URL(string: "https://127.0.0.1:2379")!], credentials: nil, options: options)
        }
        #expect(error.kind == .invalidEndpoint)
        #expect(error.description.contains("/nonexistent/ca.pem"))
    }
}
