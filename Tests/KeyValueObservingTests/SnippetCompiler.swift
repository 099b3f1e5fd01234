import Foundation
import KeyValueObserving
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Compiles a piece of client code against the package's modules this test binary was built with, the way a user's module would, to test what compiles, what does not, and what a whole
/// program prints.
enum SnippetCompiler {
    struct Output {
        let status: Int32
        let standardOutput: String
        let standardError: String
    }

    /// Whether snippets can be built here: the build folder is found through `/proc/self/exe` and
    /// programs link against the objects SwiftPM leaves there, as it does on Linux.
    static var isSupported: Bool {
        #if os(Linux)
        return true
        #else
        return false
        #endif
    }

    /// The package's root folder.
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The build folder holding `Modules/` and `KeyValueObserving.build/`: the test binary's folder.
    static var buildFolder: URL {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent()
    }

    /// The flags that let a client find the package's modules: the Swift modules, and the module map
    /// of the C module the `@Observed` getter reads its process-wide word from.
    static var moduleFlags: [String] {
        [
            "-I", buildFolder.appendingPathComponent("Modules").path,
            "-Xcc", "-fmodule-map-file=" + buildFolder.appendingPathComponent("_KeyValueObservingShims.build/module.modulemap").path,
        ]
    }

    /// Type-checks `source` as a client of `KeyValueObserving`.
    static func typecheck(_ source: String) throws -> Output {
        let folder = try temporaryFolder()
        let file = folder.appendingPathComponent("snippet.swift")
        try source.write(to: file, atomically: true, encoding: .utf8)
        return try run(
            "/usr/bin/env",
            [
                "swiftc", "-typecheck", "-swift-version", "6",
            ] + moduleFlags + [file.path])
    }

    /// Compiles `source` as the `main.swift` of a program linked with `modules` (the package's
    /// libraries, each with the libraries it uses), runs it with `environment` (by default this
    /// process's) and returns what it printed.
    static func compileAndRun(
        _ source: String, linking modules: [String] = ["KeyValueObserving"], environment: [String: String]? = nil
    ) throws -> Output {
        let folder = try temporaryFolder()
        let file = folder.appendingPathComponent("main.swift")
        try source.write(to: file, atomically: true, encoding: .utf8)
        let objects = try modules.flatMap { module in
            let objectFolder = buildFolder.appendingPathComponent(module + ".build")
            return try FileManager.default.contentsOfDirectory(atPath: objectFolder.path)
                .filter { $0.hasSuffix(".swift.o") }
                .map { objectFolder.appendingPathComponent($0).path }
        }
        let executable = folder.appendingPathComponent("snippet").path
        var arguments =
            [
                "swiftc", "-swift-version", "6",
            ] + moduleFlags + [file.path] + objects + ["-o", executable]
        if isSanitized(by: "__tsan_init") { arguments.append("-sanitize=thread") }
        if isSanitized(by: "__asan_init") { arguments.append("-sanitize=address") }
        let build = try run("/usr/bin/env", arguments)
        guard build.status == 0 else {
            return build
        }
        return try run(executable, [], environment: environment)
    }

    /// Whether this test binary runs under the sanitizer whose runtime defines `entryPoint` (the
    /// thread or the address sanitizer): its objects then need that runtime to link.
    private static func isSanitized(by entryPoint: String) -> Bool {
        #if os(Linux)
        return dlsym(UnsafeMutableRawPointer(bitPattern: 0), entryPoint) != nil
        #else
        return false
        #endif
    }

    private static func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("kvo-snippet-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    private static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> Output {
        // A compile on a loaded machine can take minutes: the deadline only catches a hang.
        let result = try runTool(arguments, environment: environment, seconds: 900, executable: executable)
        return Output(status: result.status, standardOutput: result.output, standardError: result.error)
    }
}
