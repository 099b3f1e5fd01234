import Dispatch
import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

// How kvo-bench starts another process: `startProcess` (Foundation's `Process`) for valgrind for
// instruction counts, `swift --version`, and itself as the watcher of the cross-process latency
// section; `spawnChild` (`posix_spawn`) for the stress's writer processes, since the stress runs under
// valgrind too.

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

    convenience init(_ pipe: Pipe) {
        self.init(reading: pipe.fileHandleForReading)
    }

    init(reading handle: FileHandle) {
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

/// A child process started by `spawnChild`, with pipes to its standard input, output and error.
final class SpawnedChild {
    let pid: pid_t
    /// The child's standard input: closing it ends the child's input.
    let input: FileHandle
    let output: PipeReader
    let error: PipeReader

    init(pid: pid_t, input: FileHandle, output: PipeReader, error: PipeReader) {
        self.pid = pid
        self.input = input
        self.output = output
        self.error = error
    }

    /// Waits for the child's end: its exit status, or 128 plus the signal that ended it.
    func waitForExit() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

struct SpawnError: Error, CustomStringConvertible {
    let description: String
}

/// Starts `executable` with `arguments` and this process's environment through `posix_spawn`, its
/// standard input, output and error connected to pipes.
///
/// Not Foundation's `Process`, which asks `posix_spawn` to close each descriptor open in this
/// process: under valgrind those include valgrind's own, above the descriptor limit it reports, and
/// the spawn fails with EBADF. No descriptor is closed here: the pipes are made close-on-exec, as is
/// every descriptor the libraries of this package open.
func spawnChild(_ executable: String, _ arguments: [String]) throws(SpawnError) -> SpawnedChild {
    var ends: [Int32] = Array(repeating: -1, count: 6)
    for pipeIndex in 0..<3 {
        // pipe, then close-on-exec (macOS has no pipe2): this process starts no other child meanwhile.
        let made = ends.withUnsafeMutableBufferPointer { pipe($0.baseAddress! + 2 * pipeIndex) }
        guard made == 0, fcntl(ends[2 * pipeIndex], F_SETFD, FD_CLOEXEC) == 0, fcntl(ends[2 * pipeIndex + 1], F_SETFD, FD_CLOEXEC) == 0
        else {
            let cause = String(cString: strerror(errno))
            for end in ends where end >= 0 { close(end) }
            throw SpawnError(description: "cannot make a pipe: \(cause)")
        }
    }
    // The child's ends: the read end of its input, the write ends of its output and error.
    let childEnds = [ends[0], ends[3], ends[5]]
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for (target, end) in childEnds.enumerated() { posix_spawn_file_actions_adddup2(&actions, end, Int32(target)) }
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let environment = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for pointer in argv + environment { free(pointer) } }
    var pid: pid_t = 0
    let status = posix_spawn(&pid, executable, &actions, nil, argv, environment)
    for end in childEnds { close(end) }
    guard status == 0 else {
        for end in [ends[1], ends[2], ends[4]] { close(end) }
        throw SpawnError(description: "cannot start \(executable): \(String(cString: strerror(status)))")
    }
    return SpawnedChild(
        pid: pid, input: FileHandle(fileDescriptor: ends[1], closeOnDealloc: true),
        output: PipeReader(reading: FileHandle(fileDescriptor: ends[2], closeOnDealloc: true)),
        error: PipeReader(reading: FileHandle(fileDescriptor: ends[4], closeOnDealloc: true)))
}
