import Foundation
import KVOFuzzTargets
import Testing

/// Every input kept in the repository, replayed through its target without the fuzzer: the seed
/// corpora (`Fuzz/corpus/TARGET/`) and every input that ever crashed, hung or over-allocated
/// (`Fuzz/regressions/TARGET/`), so that `swift test` catches a fault coming back.
@Suite("Fuzz corpus and regressions")
struct FuzzCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    static func files(under directory: URL) -> [URL] {
        guard let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey]) else {
            return []
        }
        return enumerator.compactMap { $0 as? URL }.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
            .sorted { $0.path < $1.path }
    }

    @Test("every input passes its target", arguments: FuzzTargets.all.map(\.name))
    func replay(targetName: String) throws {
        let target = try #require(FuzzTargets.named(targetName))
        let corpus = Self.files(under: Self.fuzzDirectory.appendingPathComponent("corpus/\(targetName)"))
        let regressions = Self.files(under: Self.fuzzDirectory.appendingPathComponent("regressions/\(targetName)"))
        // A target without seeds would replay nothing and pass: its corpus directory must exist.
        #expect(!corpus.isEmpty, "no seed inputs in Fuzz/corpus/\(targetName)")
        for file in corpus + regressions {
            let bytes = try [UInt8](Data(contentsOf: file))
            do {
                try target.run(bytes)
            } catch {
                Issue.record("\(file.path): \(error)")
            }
        }
    }

    /// A directory named after no target would never be replayed.
    @Test func everyInputDirectoryNamesATarget() {
        for kind in ["corpus", "regressions"] {
            let directory = Self.fuzzDirectory.appendingPathComponent(kind)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            for name in names where !name.hasPrefix(".") {
                #expect(FuzzTargets.named(name) != nil, "Fuzz/\(kind)/\(name) names no fuzz target")
            }
        }
    }
}
