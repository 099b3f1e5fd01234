import Foundation
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

// Skipped where etcd is missing, with the install command as the reason; under KVO_REQUIRE_ETCD=1 it
// runs and fails there instead.
@Suite("etcd's own phrases", .requiresEtcd)
struct PhraseTests {
    /// The installed etcd executable's bytes (Go keeps its string constants verbatim in it).
    static let etcd: Data = EtcdTestEnvironment.etcdPath.flatMap { FileManager.default.contents(atPath: $0) } ?? Data()

    @Test(arguments: EtcdServerFailure.phrases.map(\.phrase))
    func eachPhraseTheClientDependsOnIsOneTheInstalledEtcdSends(phrase: String) throws {
        try #require(EtcdTestEnvironment.etcdPath != nil, "etcd is not on PATH (Debian/Ubuntu: apt-get install -y etcd-server)")
        #expect(Self.etcd.range(of: Data(phrase.utf8)) != nil, "etcd at \(EtcdTestEnvironment.etcdPath ?? "?") never says '\(phrase)'")
    }
}
