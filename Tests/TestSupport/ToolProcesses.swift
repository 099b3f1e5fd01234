import Foundation
import KeyValueObserving
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The command-line tools as the other process of the defaults tests (file and etcd alike).

/// Waits until `condition` holds, checking every few milliseconds, for at most `seconds` (a deadline,
/// not a sleep).
func waitForCondition(seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(2_000)
    }
    return condition()
}

/// The directory of the executables SwiftPM built next to this test bundle (the test target depends
/// on them).
package let buildDirectory: URL = {
    #if os(Linux)
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    return executable.deletingLastPathComponent()
    #else
    let bundle = Bundle.allBundles.first { $0.bundlePath.hasSuffix(".xctest") } ?? Bundle.main
    return bundle.bundleURL.deletingLastPathComponent()
    #endif
}()

/// The `kvo-defaults` executable.
package let toolPath = buildDirectory.appendingPathComponent("kvo-defaults").path

/// The `DefaultsTestTool` executable: the loads `kvo-defaults` does not offer (`write-many`,
/// `update-many`, `resources`).
package let testToolPath = buildDirectory.appendingPathComponent("DefaultsTestTool").path

package struct ToolResult {
    package let status: Int32
    package let output: String
    package let error: String
}

/// Runs `kvo-defaults` (or the executable at `executable`) with `arguments` to completion (at most
/// `seconds`): the one runner of child processes of the test targets (the tools, the compiler of
/// the snippet tests, kvo-bench).
///
/// Both pipes are read while the process runs, so that a chatty process cannot fill one and block.
@discardableResult
package func runTool(
    _ arguments: [String], environment: [String: String]? = nil, currentDirectory: URL? = nil, seconds: Double = 60,
    executable: String = toolPath
) throws -> ToolResult {
    let process = try startTool(arguments, environment: environment, currentDirectory: currentDirectory, executable: executable)
    let output = Locked(Data())
    let error = Locked(Data())
    let readers = [
        TestThread { output.withLock { $0 = process.output.fileHandleForReading.readDataToEndOfFile() } },
        TestThread { error.withLock { $0 = process.error.fileHandleForReading.readDataToEndOfFile() } },
    ]
    let finished = waitForCondition(seconds: seconds) { !process.process.isRunning }
    if !finished {
        process.process.terminate()
        Issue.record("\(executable) \(arguments) did not finish in \(seconds) s")
    }
    process.process.waitUntilExit()
    for reader in readers { reader.join() }
    return ToolResult(
        status: process.process.terminationStatus,
        output: String(decoding: output.current, as: UTF8.self),
        error: String(decoding: error.current, as: UTF8.self)
    )
}

package struct RunningTool {
    package let process: Process
    package let output: Pipe
    package let error: Pipe
}

/// Starts `kvo-defaults` (or the executable at `executable`) with `arguments`.
package func startTool(
    _ arguments: [String], environment: [String: String]? = nil, currentDirectory: URL? = nil, executable: String = toolPath
) throws -> RunningTool {
    #expect(FileManager.default.isExecutableFile(atPath: executable), "\(executable) not found")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    if let currentDirectory { process.currentDirectoryURL = currentDirectory }
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    try process.run()
    return RunningTool(process: process, output: output, error: error)
}

/// Reads what a running tool wrote to `pipe` so far, without blocking, until it contains `text` (at
/// most `seconds`); returns what was read (the rest can be read at the end with `readToEnd`).
package func waitForText(_ text: String, in pipe: Pipe, seconds: Double = 10) -> String {
    let descriptor = pipe.fileHandleForReading.fileDescriptor
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    var bytes: [UInt8] = []
    _ = waitForCondition(seconds: seconds) {
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
