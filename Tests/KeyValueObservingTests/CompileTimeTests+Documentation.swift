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

    @Test func theConfigurationLayersArticlesOverviewSnippetCompiles() throws {
        let section = try Self.section(
            of: "Sources/ObservableDefaults/ObservableDefaults.docc/ConfigurationLayersAndSecrets.md", after: "## Overview")
        let code = try #require(Self.fencedBlock("swift", in: section))
        #expect(code.contains("layers: ["))
        let output = try SnippetCompiler.typecheck(code)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(!output.standardError.contains("warning"), "\(output.standardError)")
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

    private static let trackedObservationArticle = "Sources/KeyValueObserving/KeyValueObserving.docc/TrackedObservation.md"

    /// The text after `//` on each line of `code` that has a comment, trimmed, without quotes around it.
    private static func trailingComments(in code: String) -> [String] {
        code.split(separator: "\n").compactMap { line -> String? in
            guard let range = line.range(of: "//") else { return nil }
            let comment = line[range.upperBound...].trimmingCharacters(in: .whitespaces)
            return comment.hasPrefix("\"") && comment.hasSuffix("\"") ? String(comment.dropFirst().dropLast()) : comment
        }
    }

    @Test func theTrackedObservationArticlesFirstSampleFollowsTheObjectThatReplacedTheSettings() throws {
        let section = try Self.section(of: Self.trackedObservationArticle, after: "## Overview")
        let code = try #require(Self.fencedBlock("swift", in: section))
        #expect(code.contains("$0.settings.username"))
        let expected = ["- → anna", "anna → ben", "ben → dora"]
        // The sentence after the sample states what it prints.
        #expect(section.contains("It prints `- → anna`, `anna → ben` and `ben → dora`."))
        let output = try SnippetCompiler.compileAndRun(code)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput == expected.map { $0 + "\n" }.joined())
    }

    @Test func theTrackedObservationArticlesArraySamplePrintsWhatItsCommentsSay() throws {
        let section = try Self.section(of: Self.trackedObservationArticle, after: "An array of observable objects works the same way")
        var code = try #require(Self.fencedBlock("swift", in: section))
        #expect(code.contains("$0.people.map(\\.name)"))
        // `.new` only: no call at registration, then one per commented line, printing the comment.
        let expected = Self.trailingComments(in: code)
        #expect(expected == [#"["Ada Lovelace", "Grace"]"#, #"["Ada Lovelace", "Grace", "Edsger"]"#, #"["Grace", "Edsger"]"#])
        if !code.contains("import KeyValueObserving") { code = "import KeyValueObserving\n\n" + code }
        let output = try SnippetCompiler.compileAndRun(code)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput == expected.map { $0 + "\n" }.joined())
    }

    @Test func theTrackedObservationArticlesRootlessSampleCombinesProgressAndDefaults() throws {
        let section = try Self.section(of: Self.trackedObservationArticle, after: "takes no\nroot")
        let code = try #require(Self.fencedBlock("swift", in: section))
        #expect(code.contains("KeyValueObservation.tracking("))
        // The `.initial` call, then one per commented line, printing the comment.
        let expected = ["backup: 0%"] + Self.trailingComments(in: code)
        #expect(expected == ["backup: 0%", "backup: 50%", "archive: 50%"])
        #expect(section.contains("It prints `backup: 0%` (`.initial`), `backup: 50%` and `archive: 50%`."))
        // The suite's file goes to a folder of its own, which does not exist yet.
        let configuration = FileManager.default.temporaryDirectory.appendingPathComponent("kvo-tracked-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: configuration) }
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CONFIG_HOME"] = configuration.path
        let output = try SnippetCompiler.compileAndRun(
            code, linking: ["KeyValueObserving", "ObservableProgress", "ObservableDefaults"], environment: environment)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput == expected.map { $0 + "\n" }.joined())
    }
}
