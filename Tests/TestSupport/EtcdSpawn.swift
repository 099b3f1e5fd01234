import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The process plumbing of the etcd harness: spawning with only the descriptors a child needs, a
// lifeline that kills the child when the test process dies, bounded waits, free loopback ports and
// a tiny HTTP probe (the harness must not depend on the client it tests).

/// Why the etcd harness could not do what a test asked (its message says what to do).
package struct EtcdHarnessError: Error, CustomStringConvertible {
    package let description: String

    package init(_ description: String) {
        self.description = description
    }
}

/// A child process started by `spawnChild`.
struct ChildProcess {
    let pid: pid_t
    /// The write end of the child's lifeline pipe (or -1): closing it, or this process's death,
    /// makes the child's watchdog kill it.
    let lifeline: Int32

    /// Kills the child (SIGKILL) and reaps it. Safe to call once per child.
    func kill() {
        if lifeline >= 0 { close(lifeline) }
        #if canImport(Glibc)
        _ = Glibc.kill(pid, SIGKILL)
        #else
        _ = Darwin.kill(pid, SIGKILL)
        #endif
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// Whether the child has exited (reaping it if so); `status` is its wait status then.
    func hasExited() -> (exited: Bool, status: Int32) {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        return (result == pid || (result < 0 && errno == ECHILD), status)
    }
}

/// `posix_spawn_file_actions_addclosefrom_np` and `pipe2` exist in glibc ≥ 2.34 but Swift's Glibc
/// module does not declare them (they need `_GNU_SOURCE`): looked up at run time.
private let closeFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()

private let pipeWithFlags: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32)? = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "pipe2") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)
}()

/// A pipe whose two ends are close-on-exec (so no other child inherits them).
private func closeOnExecPipe() throws -> (read: Int32, write: Int32) {
    var ends: [Int32] = [-1, -1]
    let result = ends.withUnsafeMutableBufferPointer { buffer in
        if let pipeWithFlags { return pipeWithFlags(buffer.baseAddress!, O_CLOEXEC) }
        let result = pipe(buffer.baseAddress!)
        if result == 0 {
            _ = fcntl(buffer[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(buffer[1], F_SETFD, FD_CLOEXEC)
        }
        return result
    }
    guard result == 0 else { throw EtcdHarnessError("pipe failed: errno \(errno)") }
    return (ends[0], ends[1])
}

/// The shell script that runs a command with a lifeline: a background watchdog reads the pipe on
/// descriptor 3 and SIGKILLs the command (which replaced the shell, so it has the shell's pid, `$$`)
/// at end of file, which comes when the harness closes the write end or the test process dies,
/// however it dies (a crash, SIGKILL, an interrupted `swift test`).
private let lifelineScript = """
    exec 3<&0
    ( cat <&3 > /dev/null; kill -9 $$ 2> /dev/null ) 0< /dev/null &
    exec "$@" 0< /dev/null 3<&-
    """

/// Starts `executable` with `arguments`, its output and errors appended to the file at `outputPath`,
/// no other descriptor of this process inherited. With `lifeline`, the child dies with this process.
func spawnChild(executable: String, arguments: [String], environment: [String: String] = [:], outputPath: String, lifeline: Bool)
    throws -> ChildProcess
{
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    var lifelineEnds: (read: Int32, write: Int32) = (-1, -1)
    if lifeline {
        lifelineEnds = try closeOnExecPipe()
        posix_spawn_file_actions_adddup2(&actions, lifelineEnds.read, 0)
    } else {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    }
    posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    _ = closeFrom?(&actions, 3)

    let command = lifeline ? ["/bin/sh", "-c", lifelineScript, "etcd-lifeline", executable] + arguments : [executable] + arguments
    var merged = ProcessInfo.processInfo.environment
    for (name, value) in environment { merged[name] = value }
    let argv = command.map { strdup($0) } + [nil]
    let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, command[0], &actions, nil, argv, envp)
    if lifeline { close(lifelineEnds.read) }
    guard result == 0 else {
        if lifeline { close(lifelineEnds.write) }
        throw EtcdHarnessError("cannot start \(command[0]): \(String(cString: strerror(result)))")
    }
    return ChildProcess(pid: pid, lifeline: lifelineEnds.write)
}

/// Runs `executable` to completion (at most `seconds`, then it is killed) and returns its exit status
/// and output (standard output and error together).
func runChild(executable: String, arguments: [String], environment: [String: String] = [:], seconds: Double = 30) throws -> (
    status: Int32, output: String
) {
    let outputPath = NSTemporaryDirectory() + "/kvo-etcdctl-\(UUID().uuidString).log"
    defer { unlink(outputPath) }
    let child = try spawnChild(
        executable: executable, arguments: arguments, environment: environment, outputPath: outputPath, lifeline: false)
    let deadline = Date().addingTimeInterval(seconds)
    while true {
        let (exited, status) = child.hasExited()
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        if exited { return ((status >> 8) & 0xFF, output) }
        if Date() > deadline {
            child.kill()
            throw EtcdHarnessError("\(executable) \(arguments.first ?? "") did not finish in \(seconds) s; output: \(output)")
        }
        usleep(5_000)
    }
}

/// `count` distinct TCP ports on 127.0.0.1 that were free a moment ago (bound with port 0, all held
/// until every one is chosen, then released). Another program may take one meanwhile: the harness
/// retries a start that fails.
func freeLoopbackPorts(_ count: Int) throws -> [Int] {
    var sockets: [Int32] = []
    defer { sockets.forEach { close($0) } }
    var ports: [Int] = []
    for _ in 0..<count {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw EtcdHarnessError("socket failed: errno \(errno)") }
        sockets.append(descriptor)
        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw EtcdHarnessError("bind failed: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        ports.append(Int(UInt16(bigEndian: address.sin_port)))
    }
    return ports
}

/// An http URL on 127.0.0.1 where nothing listens (a port that was free a moment ago): connecting is
/// refused.
package func unusedLoopbackEndpoint() throws -> URL {
    URL(string: "http://127.0.0.1:\(try freeLoopbackPorts(1)[0])")!
}

/// The IPv4 address 127.0.0.1:`port`.
func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return address
}

/// One HTTP/1.0 request to 127.0.0.1:`port` (2 s timeouts): the reply's status and body, or nil when
/// nothing answered. HTTP/1.0, so the server closes the connection after the body (no chunking).
func probeHTTP(port: Int, method: String = "GET", path: String, body: String = "", headers: [String: String] = [:]) -> (
    status: Int, body: String
)? {
    #if canImport(Glibc)
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    #else
    let descriptor = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var timeout = timeval(tv_sec: 2, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return nil }
    var request = "\(method) \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: \(body.utf8.count)\r\n"
    for (name, value) in headers { request += "\(name): \(value)\r\n" }
    let bytes = Array((request + "\r\n" + body).utf8)
    guard send(descriptor, bytes, bytes.count, 0) == bytes.count else { return nil }
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = recv(descriptor, &buffer, buffer.count, 0)
        if count <= 0 { break }
        reply += buffer[..<count]
    }
    let text = String(decoding: reply, as: UTF8.self)
    guard let statusLine = text.split(separator: "\r\n").first,
        let status = statusLine.split(separator: " ").dropFirst().first.flatMap({ Int($0) }),
        let separator = text.range(of: "\r\n\r\n")
    else { return nil }
    return (status, String(text[separator.upperBound...]))
}
