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
    let result = try runTool(["-c", script], executable: "/bin/sh")
    #expect(result.status == 0, "sh -c \(script) failed: \(result.error)")
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

/// What `body` returns, or `nil` if it takes longer than `seconds`: a sequence that stops yielding
/// (or never finishes) fails the test instead of hanging it.
func withDeadline<Result: Sendable>(seconds: Double = 10, _ body: @escaping @Sendable () async -> Result) async -> Result? {
    await withTaskGroup(of: Result?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: .seconds(seconds))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
