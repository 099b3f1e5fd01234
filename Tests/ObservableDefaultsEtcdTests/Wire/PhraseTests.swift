import Foundation
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("etcd's own phrases", .requiresEtcd)
struct PhraseTests {
    /// The installed etcd executable's bytes (Go keeps its string constants verbatim in it).
    static let etcd: Data = EtcdTestEnvironment.etcdPath.flatMap { FileManager.default.contents(atPath: $0) } ?? Data()

    @Test(arguments: EtcdServerFailure.phrases.map(\.phrase))
    func eachPhraseTheClientDependsOnIsOneTheInstalledEtcdSends(phrase: String) {
        // Under KVO_REQUIRE_ETCD=1 with no etcd installed this fails (the bytes are empty), as required.
        #expect(Self.etcd.range(of: Data(phrase.utf8)) != nil, "etcd at \(EtcdTestEnvironment.etcdPath ?? "?") never says '\(phrase)'")
    }
}
