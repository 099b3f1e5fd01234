import Foundation
import Testing

/// The snippets of the README and the DocC articles that users copy, compiled as real clients of
/// the package's modules; those that need no etcd are run and their output compared.
extension CompileTimeTests {
    /// The text of the file at `path` (from the package's root) after `marker`.
    private static func section(of path: String, after marker: String) throws -> String {
        let text = try String(contentsOf: SnippetCompiler.packageRoot.appendingPathComponent(path), encoding: .utf8)
        return try #require(text.components(separatedBy: marker).dropFirst().first, "\(marker) not found in \(path)")
    }

    @Test func theReadmeDefaultsExampleCompilesRunsAndPrintsWhatTheReadmeSays() throws {
        let section = try Self.section(of: "README.md", after: "## ObservableDefaults")
        let code = try #require(Self.fencedBlock("swift", in: section))
        let expected = try #require(Self.fencedBlock("text", in: section))
        // A first run: the suite's file does not exist yet.
        let configuration = FileManager.default.temporaryDirectory.appendingPathComponent("kvo-readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: configuration) }
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CONFIG_HOME"] = configuration.path
        let output = try SnippetCompiler.compileAndRun(
            code, linking: ["ObservableDefaults", "KeyValueObserving"], environment: environment)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput == expected)
        #expect(!output.standardOutput.contains("Optional("))
    }

    @Test func theUsingDefaultsStoreArticlesCreatingAStoreSnippetCompiles() throws {
        let section = try Self.section(
            of: "Sources/ObservableDefaults/ObservableDefaults.docc/UsingDefaultsStore.md", after: "## Creating a store")
        let code = try #require(Self.fencedBlock("swift", in: section))
        #expect(code.contains("DefaultsStore(\n    fileURL:"))
        #expect(code.contains("watching:") && code.contains("errorHandler:"))
        let output = try SnippetCompiler.typecheck(code)
        #expect(output.status == 0, "\(output.standardError)")
    }

    /// Type-checked only: running it needs the etcd cluster it names.
    @Test func theUsingEtcdOverviewSnippetCompiles() throws {
        let section = try Self.section(of: "Sources/ObservableDefaultsEtcd/ObservableDefaultsEtcd.docc/UsingEtcd.md", after: "## Overview")
        let code = try #require(Self.fencedBlock("swift", in: section))
        let output = try SnippetCompiler.typecheck(code)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(!output.standardError.contains("warning"), "\(output.standardError)")
    }

    @Test func theSequencesArticleShowsThatValuesYieldsTheCurrentValueFirst() throws {
        let section = try Self.section(
            of: "Sources/KeyValueObserving/KeyValueObserving.docc/Sequences.md", after: "yields the **current value first**")
        let code = try #require(Self.fencedBlock("swift", in: section))
        let output = try SnippetCompiler.compileAndRun(code)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput == "0.5\n0.7\n")
    }
}
