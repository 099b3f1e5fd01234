import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh directory under the system's temporary directory, removed when the value is deallocated.
final class TemporaryDirectory: Sendable {
    let path: String

    init() {
        var template = Array((NSTemporaryDirectory() + "/kvo-defaults-tests-XXXXXX").utf8CString)
        let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(result != nil, "mkdtemp failed: \(errno)")
        path = URL(fileURLWithPath: template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }).standardizedFileURL.path
    }

    var url: URL { URL(fileURLWithPath: path) }

    func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    deinit {
        // A store's batched write would otherwise recreate the directory after its removal; and a
        // removal fails if a file appears in the directory meanwhile: try again a few times.
        for _ in 0..<50 {
            DefaultsStorageRegistry.flush(under: path)
            try? FileManager.default.removeItem(atPath: path)
            if !FileManager.default.fileExists(atPath: path) { return }
            usleep(2_000)
        }
    }
}

/// Waits until `condition` holds, checking every few milliseconds, for at most `seconds`.
/// Returns whether it held (a deadline, not a sleep: the test goes on as soon as it holds).
func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(2_000)
    }
    return condition()
}

/// Runs `body` on another thread and waits for it at most `seconds`: code that blocks (opening a
/// FIFO waits for a writer; a write waits for a lock) fails the test instead of hanging the run.
func finishes(within seconds: Double = 10, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = Locked(false)
    Thread {
        body()
        done.withLock { $0 = true }
    }.start()
    return waitUntil(seconds: seconds) { done.current }
}

/// The text of the file at `url`, or `nil`.
func contents(of url: URL) -> String? {
    try? String(contentsOf: url, encoding: .utf8)
}

/// The parsed JSON object in the file at `url`, or `nil`.
func jsonObject(at url: URL) -> [String: JSONValue]? {
    guard let text = contents(of: url), case .object(let values)? = try? JSONValue.parse(text) else { return nil }
    return values
}

// MARK: Processes

/// The directory of the executables SwiftPM built next to this test bundle (the test target depends
/// on them).
let buildDirectory: URL = {
    #if os(Linux)
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    return executable.deletingLastPathComponent()
    #else
    let bundle = Bundle.allBundles.first { $0.bundlePath.hasSuffix(".xctest") } ?? Bundle.main
    return bundle.bundleURL.deletingLastPathComponent()
    #endif
}()

/// The `kvo-defaults` executable.
let toolPath = buildDirectory.appendingPathComponent("kvo-defaults").path

/// The `DefaultsTestTool` executable: the loads `kvo-defaults` does not offer (`write-many`,
/// `update-many`, `resources`).
let testToolPath = buildDirectory.appendingPathComponent("DefaultsTestTool").path

struct ToolResult {
    let status: Int32
    let output: String
    let error: String
}

/// Runs `kvo-defaults` (or the executable at `executable`) with `arguments` to completion (at most
/// `seconds`).
@discardableResult
func runTool(
    _ arguments: [String], environment: [String: String]? = nil, seconds: Double = 60, executable: String = toolPath
) throws -> ToolResult {
    let process = try startTool(arguments, environment: environment, executable: executable)
    let finished = waitUntil(seconds: seconds) { !process.process.isRunning }
    if !finished {
        process.process.terminate()
        Issue.record("\(executable) \(arguments) did not finish in \(seconds) s")
    }
    process.process.waitUntilExit()
    return ToolResult(
        status: process.process.terminationStatus,
        output: String(decoding: (try? process.output.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self),
        error: String(decoding: (try? process.error.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
    )
}

struct RunningTool {
    let process: Process
    let output: Pipe
    let error: Pipe
}

/// Starts `kvo-defaults` (or the executable at `executable`) with `arguments`.
func startTool(_ arguments: [String], environment: [String: String]? = nil, executable: String = toolPath) throws -> RunningTool {
    #expect(FileManager.default.isExecutableFile(atPath: executable), "\(executable) not found")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    try process.run()
    return RunningTool(process: process, output: output, error: error)
}

/// Reads what a running tool wrote to `pipe` so far, without blocking, until it contains `text` (at
/// most `seconds`); returns what was read (the rest can be read at the end with `readToEnd`).
func waitForText(_ text: String, in pipe: Pipe, seconds: Double = 10) -> String {
    let descriptor = pipe.fileHandleForReading.fileDescriptor
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    var bytes: [UInt8] = []
    _ = waitUntil(seconds: seconds) {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self).contains(text)
    }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    return String(decoding: bytes, as: UTF8.self)
}

/// Holds the lock file of the defaults file at `path` (as another process would: a separate open
/// file description conflicts with this process's own stores too) until `release()`.
final class HeldLock {
    let descriptor: Int32

    init(_ path: String) throws {
        let slash = path.lastIndex(of: "/")!
        let lockPath = String(path[..<slash]) + "/." + String(path[path.index(after: slash)...]) + ".lock"
        descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(descriptor >= 0)
        try #require(flock(descriptor, LOCK_EX) == 0)
    }

    func release() {
        flock(descriptor, LOCK_UN)
    }

    deinit {
        close(descriptor)
    }
}

/// Runs `/bin/sh -c script` (another program editing the file) to completion.
func runShell(_ script: String) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script]
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "sh -c \(script) failed")
}

/// Rewrites the file at `path` in place, as some editors and programs do: truncate, then write
/// (same inode, no lock, no rename).
func rewriteInPlace(_ path: String, _ text: String) {
    let descriptor = open(path, O_WRONLY | O_TRUNC)
    precondition(descriptor >= 0, "cannot open \(path): \(errno)")
    let bytes = Array(text.utf8)
    precondition(write(descriptor, bytes, bytes.count) == bytes.count)
    close(descriptor)
}

/// Quotes `text` for the shell.
func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

extension DefaultsStore {
    /// The store's file back end (the tests' stores are all on files).
    var file: FileBackend { storage.fileBackend! }
}
