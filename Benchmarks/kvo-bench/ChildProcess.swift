import Dispatch
import Foundation

// The one way kvo-bench starts another process: valgrind for instruction counts, `swift --version`,
// and itself as the watcher of the cross-process latency section.

/// This executable's path (valgrind and the latency section run it again).
func currentExecutable() -> String {
    #if os(Linux)
    if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
    #endif
    return URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
}

/// Starts `executable` with `arguments`; each of `standardInput`, `standardOutput` and
/// `standardError` is a `Pipe`, a `FileHandle`, or `nil` for /dev/null.
func startProcess(
    _ executable: String,
    _ arguments: [String],
    standardInput: Any? = nil,
    standardOutput: Any? = nil,
    standardError: Any? = nil,
    terminationHandler: (@Sendable (Process) -> Void)? = nil
) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardInput = standardInput ?? FileHandle.nullDevice
    process.standardOutput = standardOutput ?? FileHandle.nullDevice
    process.standardError = standardError ?? FileHandle.nullDevice
    process.terminationHandler = terminationHandler
    try process.run()
    return process
}

struct ProcessOutput {
    let status: Int32
    let standardOutput: String
    let standardError: String
    let timedOut: Bool
}

/// Runs `executable` with `arguments` to its end, collecting its output; kills it after `timeoutSeconds`.
func runProcess(_ executable: String, _ arguments: [String], timeoutSeconds: Int) throws -> ProcessOutput {
    let out = Pipe(), err = Pipe()
    let exited = DispatchSemaphore(value: 0)
    let process = try startProcess(executable, arguments, standardOutput: out, standardError: err) { _ in exited.signal() }
    // Read both pipes on their own threads so a chatty child cannot block on a full pipe.
    let errorData = PipeReader(err), outputData = PipeReader(out)
    let timedOut = exited.wait(timeout: .now() + .seconds(timeoutSeconds)) == .timedOut
    if timedOut {
        process.terminate()
        exited.wait()
    }
    return ProcessOutput(
        status: process.terminationStatus,
        standardOutput: String(decoding: outputData.finish(), as: UTF8.self),
        standardError: String(decoding: errorData.finish(), as: UTF8.self),
        timedOut: timedOut
    )
}

/// Reads a pipe to its end on a thread of its own.
///
/// `@unchecked Sendable`: `data` is written by the reading thread before it signals `done`, and read
/// by `finish()` only after waiting for `done`.
final class PipeReader: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        Thread { [self] in
            self.data = handle.readDataToEndOfFile()
            self.done.signal()
        }.start()
    }

    func finish() -> Data {
        done.wait()
        return data
    }
}
