import Foundation
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite(
    "etcd's own phrases", .enabled(if: EtcdTestEnvironment.testsEnabled, "KVO_SKIP_ETCD_TESTS=1"),
    .enabled(if: EtcdTestEnvironment.etcdPath != nil, "etcd is not installed"))
struct PhraseTests {
    /// The installed etcd executable's bytes (Go keeps its string constants verbatim in it).
    static let etcd: Data = EtcdTestEnvironment.etcdPath.flatMap { FileManager.default.contents(atPath: $0) } ?? Data()

    @Test(arguments: EtcdServerFailure.phrases.map(\.phrase))
    func eachPhraseTheClientDependsOnIsOneTheInstalledEtcdSends(phrase: String) {
        #expect(Self.etcd.range(of: Data(phrase.utf8)) != nil, "etcd at \(EtcdTestEnvironment.etcdPath ?? "?") never says '\(phrase)'")
    }
}
