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

    @Test func aCertificateForAnotherNameIsRefused() throws {
        let certificates = try EtcdTestCertificates(subjectAlternativeNames: ["DNS:etcd.example"])
        let server = try EtcdServer(options: EtcdCluster.Options(tls: certificates))
        var options = EtcdClientOptions(attempts: 1)
        options.trustedCertificatesFile = certificates.authorityFile
        let error = try #require(throws: EtcdError.self) { try client(server.endpoints, options: options).range(key: bytes("k")) }
        #expect(error.kind == .unreachable)
        #expect(error.description.contains("certificate"))
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
