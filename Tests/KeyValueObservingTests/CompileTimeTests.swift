import Foundation
import Testing

/// What the compiler accepts and rejects in client code, and the README's quick start, compiled as a
/// real client of the module and run.
@Suite("Client code: compile errors, README quick start, standard error", .enabled(if: SnippetCompiler.isSupported), .tags(.processes))
struct CompileTimeTests {
    private static let model = """
        import KeyValueObserving

        final class Model: KeyValueObservable {
            @Observed var count = 0
        }

        @MainActor final class Screen {
            var label = ""
        }

        """

    @Test func aSendableHandlerCompiles() throws {
        let output = try SnippetCompiler.typecheck(
            Self.model + """
                @MainActor func bind(_ model: Model, to screen: Screen) -> KeyValueObservation {
                    model.observe(\\.count, options: [.new]) { _, change in
                        let text = "\\(change.newValue!)"
                        Task { @MainActor in screen.label = text }
                    }
                }
                """)
        #expect(output.status == 0, "\(output.standardError)")
    }

    @Test func aMainActorHandlerIsACompileError() throws {
        // KVO and Combine accept this and trap at run time when the property is set off the main
        // thread; here the handler must be @Sendable and the conversion loses the global actor.
        let output = try SnippetCompiler.typecheck(
            Self.model + """
                @MainActor func bind(_ model: Model, to screen: Screen) -> KeyValueObservation {
                    model.observe(\\.count, options: [.new]) { @MainActor _, change in
                        screen.label = "\\(change.newValue!)"
                    }
                }
                """)
        #expect(output.status != 0)
        #expect(output.standardError.contains("loses global actor 'MainActor'"), "\(output.standardError)")
    }

    @Test func touchingMainActorStateFromAnImplicitlyIsolatedHandlerIsACompileError() throws {
        let output = try SnippetCompiler.typecheck(
            Self.model + """
                @MainActor func bind(_ model: Model, to screen: Screen) -> KeyValueObservation {
                    model.observe(\\.count, options: [.new]) { _, change in
                        screen.label = "\\(change.newValue!)"
                    }
                }
                """)
        #expect(output.status != 0)
        #expect(output.standardError.contains("error: main actor-isolated property 'label' can not be mutated"), "\(output.standardError)")
    }

    @Test func droppingTheTokenIsACompilerWarning() throws {
        let output = try SnippetCompiler.typecheck(
            Self.model + """
                func start(_ model: Model) {
                    model.observe(\\.count) { _, _ in }
                }
                """)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardError.contains("result of call to 'observe"), "\(output.standardError)")
    }

    @Test func observedOutsideAKeyValueObservableIsACompileError() throws {
        let output = try SnippetCompiler.typecheck(
            """
            import KeyValueObserving
            final class NotObservable {
                @Observed var count = 0
            }
            """)
        #expect(output.status != 0)
        #expect(output.standardError.contains("requires that 'NotObservable' inherit from 'KeyValueObservable'"), "\(output.standardError)")
    }

    @Test func theReadmeQuickStartCompilesRunsAndPrintsWhatTheReadmeSays() throws {
        let readme = try String(contentsOf: SnippetCompiler.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## Quick start").dropFirst().first)
        let code = try #require(Self.fencedBlock("swift", in: section))
        let expected = try #require(Self.fencedBlock("text", in: section))
        let output = try SnippetCompiler.compileAndRun(code)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput == expected)
    }

    @Test func theReadmeSharingExampleCompilesAndRunsOnTheActor() throws {
        let readme = try String(contentsOf: SnippetCompiler.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## Sharing a model across tasks").dropFirst().first)
        let code = try #require(Self.fencedBlock("swift", in: section))
        let output = try SnippetCompiler.compileAndRun(code)
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput == "completed 1\ncompleted 2\ncompleted 3\n")
    }

    @Test func theReadmeProgressExampleCompiles() throws {
        let readme = try String(contentsOf: SnippetCompiler.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## ObservableProgress").dropFirst().first)
        let code = try #require(Self.fencedBlock("swift", in: section))
        let output = try SnippetCompiler.typecheck(code)
        #expect(output.status == 0, "\(output.standardError)")
    }

    @Test func byDefaultEachUnobservableKeyIsReportedOnceOnStandardError() throws {
        let output = try SnippetCompiler.compileAndRun(
            """
            import KeyValueObserving
            final class Player: KeyValueObservable {
                @Observed var volume = 0.5
                var balance = 0.0
                var pan = 0
            }
            let player = Player()
            var tokens: [KeyValueObservation] = []
            for _ in 0..<3 {
                tokens.append(player.observe(\\.balance) { _, _ in })
            }
            tokens.append(player.observe(\\.balance) { _, _ in })
            tokens.append(player.observe(\\.pan) { _, _ in })
            tokens.append(player.observe(\\.volume) { _, _ in })
            print("registered", tokens.count)
            """)
        #expect(output.status == 0)
        #expect(output.standardOutput == "registered 6\n")
        let lines = output.standardError.split(separator: "\n")
        #expect(lines.count == 2, "\(output.standardError)")
        #expect(lines.first?.contains("`balance` on Player") == true)
        #expect(lines.first?.contains("main.swift:10") == true)
        #expect(lines.first?.contains("Fix: declare the property @Observed") == true)
        #expect(lines.last?.contains("`pan` on Player") == true)
    }

    /// The contents of the first fenced block of `language` in `text`, with its final newline.
    static func fencedBlock(_ language: String, in text: String) -> String? {
        guard let start = text.range(of: "```\(language)\n"),
            let end = text.range(of: "\n```", range: start.upperBound..<text.endIndex)
        else { return nil }
        return String(text[start.upperBound..<end.lowerBound]) + "\n"
    }
}
