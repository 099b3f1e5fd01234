import Foundation
import KeyValueObserving

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the etcd tests find etcd, and whether they run.
///
/// On a machine with only the Swift toolchain, `swift test` passes: the suites that need etcd (and
/// the https tests, which also need `openssl`) are skipped, and Swift Testing prints the reason with
/// the install command. CI sets `KVO_REQUIRE_ETCD=1`: then a missing `etcd`, `etcdctl` or `openssl`
/// fails those suites instead (starting a server throws the install hint). `KVO_SKIP_ETCD_TESTS=1`
/// skips them knowingly, whatever is installed.
package enum EtcdTestEnvironment {
    private static let environment = ProcessInfo.processInfo.environment
    /// `KVO_SKIP_ETCD_TESTS=1`: skip the etcd tests even where etcd is installed.
    package static let isSkipRequested = environment["KVO_SKIP_ETCD_TESTS"] == "1"
    /// `KVO_REQUIRE_ETCD=1` (CI): a missing etcd, etcdctl or openssl fails the tests that need it.
    package static let isRequired = environment["KVO_REQUIRE_ETCD"] == "1"
    /// The `etcd` executable on `PATH`, if any.
    package static let etcdPath = executable(named: "etcd")
    /// The `etcdctl` executable on `PATH`, if any.
    package static let etcdctlPath = executable(named: "etcdctl")
    /// The `openssl` executable on `PATH`, if any (the https tests make their certificates with it).
    package static let opensslPath = executable(named: "openssl")
    /// Whether `etcd` and `etcdctl` are installed.
    package static var isAvailable: Bool { etcdPath != nil && etcdctlPath != nil }

    /// Whether the tests that need etcd run: it is installed or required, and no skip was asked for.
    package static let testsEnabled = !isSkipRequested && (isAvailable || isRequired)
    /// Whether the tests that need etcd and `openssl` (https) run. Never on Darwin, where the
    /// client refuses `https` endpoints (no OpenSSL may be loaded there).
    #if canImport(Darwin)
    package static let tlsTestsEnabled = false
    #else
    package static let tlsTestsEnabled = testsEnabled && (opensslPath != nil || isRequired)
    #endif

    /// Why the etcd tests are skipped, for Swift Testing's report.
    package static var skipReason: String {
        isSkipRequested
            ? "KVO_SKIP_ETCD_TESTS=1"
            : "etcd or etcdctl is not installed (Debian/Ubuntu: apt-get install -y etcd-server etcd-client; "
                + "KVO_REQUIRE_ETCD=1 makes this a failure)"
    }

    /// Why the https tests are skipped, for Swift Testing's report.
    package static var tlsSkipReason: String {
        #if canImport(Darwin)
        return "https endpoints are refused on this platform (the client loads no OpenSSL on Darwin)"
        #else
        return testsEnabled
            ? "openssl is not installed (Debian/Ubuntu: apt-get install -y openssl; KVO_REQUIRE_ETCD=1 makes this a failure)"
            : skipReason
        #endif
    }

    static let installHint =
        "etcd and etcdctl are needed by the etcd tests and are not on PATH: install them (Debian/Ubuntu: "
        + "apt-get install -y etcd-server etcd-client), or set KVO_SKIP_ETCD_TESTS=1 to skip these tests knowingly"

    private static func executable(named name: String) -> String? {
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }
}

/// etcd processes for tests: `members` members of one cluster on free loopback ports, each with a
/// temporary data directory, started and awaited (health polled, no fixed sleeps) by `init`.
///
/// Nothing outlives the test run: `stop()` (also run by deinit) kills every member and removes the
/// data; each member also carries a lifeline pipe, so it is killed when the test process dies, however
/// it dies. Members use short Raft timers (heartbeat 50 ms, election 500 ms), so a new leader is
/// elected within about a second of the leader's loss.
package final class EtcdCluster: @unchecked Sendable {
    // Invariant: `processes`, `frozen` and `rootPassword` are accessed only with `lock` held; the
    // rest is immutable after init.
    /// Settings of the members.
    package struct Options: Sendable {
        /// `--auth-token-ttl`: seconds an idle simple token stays valid (etcd's default is 300).
        package var authTokenTTL: Int?
        /// `--heartbeat-interval` in milliseconds.
        package var heartbeatMilliseconds = 50
        /// `--election-timeout` in milliseconds.
        package var electionTimeoutMilliseconds = 500
        /// Serve clients over https with these certificates (the health is polled over http on the
        /// metrics port either way).
        package var tls: EtcdTestCertificates?

        package init(authTokenTTL: Int? = nil, tls: EtcdTestCertificates? = nil) {
            self.authTokenTTL = authTokenTTL
            self.tls = tls
        }
    }

    struct Member {
        let name: String
        let clientPort: Int
        let peerPort: Int
        let metricsPort: Int
        let dataDirectory: String
        let logPath: String
    }

    private(set) var members: [Member]
    private let options: Options
    private let root: String
    private let token = UUID().uuidString
    private let lock = Lock()
    private var processes: [ChildProcess?]
    /// Members stopped with SIGSTOP (`freeze(member:)`): running, but answering nothing.
    private var frozen: Set<Int> = []
    private var rootPassword: String?

    /// The client URLs of the members, in member order (https with `Options.tls`).
    package var endpoints: [URL] {
        members.map { URL(string: "\(scheme)://127.0.0.1:\($0.clientPort)")! }
    }

    private var scheme: String { options.tls == nil ? "http" : "https" }

    /// Starts `members` members and waits until every one is healthy (at most `seconds`).
    ///
    /// - Throws: `EtcdHarnessError` when etcd is not installed (saying how to install it) or does not
    ///   become healthy (with the end of its log).
    package init(members count: Int = 3, options: Options = .init(), seconds: Double = 30) throws {
        guard EtcdTestEnvironment.isAvailable else { throw EtcdHarnessError(EtcdTestEnvironment.installHint) }
        var template = Array((NSTemporaryDirectory() + "/kvo-etcd-XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw EtcdHarnessError("mkdtemp failed: errno \(errno)")
        }
        let root = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        self.root = root
        EtcdCluster.removeAbandonedDirectories()
        try? "\(getpid())".write(toFile: "\(root)/owner.pid", atomically: true, encoding: .utf8)
        self.options = options
        // The ports are free when chosen, not when etcd binds them: another test's process (or an
        // outgoing connection) can take one in between. Such a start is tried again on new ports.
        var attempt = 0
        while true {
            let ports = try freeLoopbackPorts(3 * count)
            members = (0..<count).map { index in
                Member(
                    name: "m\(index)", clientPort: ports[3 * index], peerPort: ports[3 * index + 1], metricsPort: ports[3 * index + 2],
                    dataDirectory: "\(root)/a\(attempt)-m\(index).data", logPath: "\(root)/a\(attempt)-m\(index).log")
            }
            processes = Array(repeating: nil, count: count)
            do {
                for index in members.indices { try launch(index) }
                for index in members.indices { try waitUntilHealthy(index, seconds: seconds) }
                return
            } catch {
                let portTaken = members.contains { member in
                    (try? String(contentsOfFile: member.logPath, encoding: .utf8))?.contains("address already in use") == true
                }
                guard portTaken, attempt < 3 else {
                    stop()
                    throw error
                }
                attempt += 1
                let running = lock.withLock {
                    defer { processes = processes.map { _ in nil } }
                    return processes
                }
                for process in running { process?.kill() }
            }
        }
    }

    deinit {
        stop()
    }

    /// Removes the directories of clusters whose test process died without stopping them (a crash):
    /// their members died with it (the lifeline), their data stayed.
    private static func removeAbandonedDirectories() {
        let temporary = NSTemporaryDirectory()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
        for name in names where name.hasPrefix("kvo-etcd-") {
            let directory = "\(temporary)/\(name)"
            guard let text = try? String(contentsOfFile: "\(directory)/owner.pid", encoding: .utf8), let owner = pid_t(text),
                owner != getpid(), !processExists(owner)
            else { continue }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Kills every member (a frozen one too: SIGKILL ends a stopped process) and removes the data
    /// directories. Idempotent.
    package func stop() {
        let running = lock.withLock {
            defer {
                processes = processes.map { _ in nil }
                frozen = []
            }
            return processes
        }
        for process in running { process?.kill() }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Kills member `index` with SIGKILL (a crash: nothing is flushed beyond what etcd already synced).
    package func kill(member index: Int) {
        let process = lock.withLock {
            defer {
                processes[index] = nil
                frozen.remove(index)
            }
            return processes[index]
        }
        process?.kill()
    }

    /// Freezes member `index` with SIGSTOP, as a hung process or a stalled machine would be: its
    /// sockets stay open and the kernel still accepts connections, but nothing is answered (and it
    /// takes no part in Raft) until `thaw(member:)`. `stop()` (and deinit) kill a frozen member too.
    /// Returns once the kernel shows the member stopped (Linux): `kill` only queues the signal, and a
    /// member still running on another CPU could otherwise take a request sent right after.
    package func freeze(member index: Int) {
        signal(member: index, SIGSTOP, frozen: true)
        #if os(Linux)
        guard let pid = lock.withLock({ processes[index]?.pid }) else { return }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            // The state is the first field after the command's closing parenthesis: T when stopped.
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { return }
            if stat[stat.index(after: end)...].trimmingCharacters(in: .whitespaces).hasPrefix("T") { return }
            usleep(1_000)
        }
        #endif
    }

    /// Continues member `index` after `freeze(member:)` (SIGCONT).
    package func thaw(member index: Int) {
        signal(member: index, SIGCONT, frozen: false)
    }

    private func signal(member index: Int, _ number: Int32, frozen isFrozen: Bool) {
        lock.withLock {
            guard let process = processes[index] else { preconditionFailure("EtcdCluster: member \(index) does not run") }
            #if canImport(Glibc)
            _ = Glibc.kill(process.pid, number)
            #else
            _ = Darwin.kill(process.pid, number)
            #endif
            if isFrozen { frozen.insert(index) } else { frozen.remove(index) }
        }
    }

    /// Closes member `index`'s end of its lifeline, as the death of the test process would, and
    /// returns whether the member then exited by itself within `seconds` (it is reaped either way).
    package func cutLifeline(member index: Int, seconds: Double = 10) -> Bool {
        guard let process = lock.withLock({ processes[index] }) else { return false }
        close(process.lifeline)
        lock.withLock { processes[index] = nil }
        let deadline = Date().addingTimeInterval(seconds)
        var exited = false
        while !exited && Date() < deadline {
            exited = process.hasExited().exited
            if !exited { usleep(10_000) }
        }
        if !exited { ChildProcess(pid: process.pid, lifeline: -1).kill() }
        return exited
    }

    /// Starts member `index` again on its data directory and ports and waits until it is healthy.
    package func restart(member index: Int, seconds: Double = 30) throws {
        try launch(index)
        try waitUntilHealthy(index, seconds: seconds)
    }

    /// Whether member `index` runs.
    package func isRunning(member index: Int) -> Bool {
        lock.withLock { processes[index] != nil }
    }

    /// Whether member `index` runs and is not frozen. Call with `lock` held.
    private func isAnswering(_ index: Int) -> Bool {
        processes[index] != nil && !frozen.contains(index)
    }

    /// The index of the member the running members (frozen ones left out) agree is the leader
    /// (http clusters), waiting for an election if there is none (at most `seconds`).
    package func leaderIndex(seconds: Double = 30) throws -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let leader = currentLeader() { return leader }
            usleep(20_000)
        }
        throw EtcdHarnessError("no etcd leader elected within \(seconds) s; logs:\n\(logTails())")
    }

    /// Enables authentication with `etcdctl`: creates `root` and `user` (both with `password`; `user`
    /// with read-write permission on every key), then `auth enable`.
    package func enableAuth(user: String, password: String) throws {
        try etcdctl(["user", "add", "root", "--new-user-password=\(password)", "--interactive=false"])
        if user != "root" {
            try etcdctl(["user", "add", user, "--new-user-password=\(password)", "--interactive=false"])
            try etcdctl(["role", "add", "readwrite"])
            try etcdctl(["role", "grant-permission", "readwrite", "readwrite", "--prefix=true", ""])
            try etcdctl(["user", "grant-role", user, "readwrite"])
        }
        try etcdctl(["auth", "enable"])
        lock.withLock { rootPassword = password }
    }

    /// Runs `etcdctl` (API 3, explicitly) against the running members, as root once auth is enabled;
    /// returns its output.
    @discardableResult
    package func etcdctl(_ arguments: [String]) throws -> String {
        let (running, password) = lock.withLock { (processes.indices.filter { isAnswering($0) }, rootPassword) }
        let urls = running.map { endpoints[$0].absoluteString }.joined(separator: ",")
        var all = ["--endpoints=\(urls)", "--dial-timeout=5s", "--command-timeout=10s"]
        if let password { all.append("--user=root:\(password)") }
        if let tls = options.tls { all.append("--cacert=\(tls.authorityFile)") }
        let result = try runChild(
            executable: EtcdTestEnvironment.etcdctlPath!, arguments: all + arguments, environment: ["ETCDCTL_API": "3"])
        guard result.status == 0 else {
            throw EtcdHarnessError("etcdctl \(arguments.first ?? "") failed (status \(result.status)): \(result.output)")
        }
        return result.output
    }

    /// The last lines of every member's log, for a failure message.
    package func logTails(lines: Int = 15) -> String {
        members.map { member in
            let text = (try? String(contentsOfFile: member.logPath, encoding: .utf8)) ?? ""
            return "[\(member.name)]\n" + text.split(separator: "\n").suffix(lines).joined(separator: "\n")
        }.joined(separator: "\n")
    }

    private func launch(_ index: Int) throws {
        let member = members[index]
        let peers = members.map { "\($0.name)=http://127.0.0.1:\($0.peerPort)" }.joined(separator: ",")
        var arguments = [
            "--name", member.name, "--data-dir", member.dataDirectory,
            "--listen-client-urls", "\(scheme)://127.0.0.1:\(member.clientPort)",
            "--advertise-client-urls", "\(scheme)://127.0.0.1:\(member.clientPort)",
            "--listen-metrics-urls", "http://127.0.0.1:\(member.metricsPort)",
            "--listen-peer-urls", "http://127.0.0.1:\(member.peerPort)",
            "--initial-advertise-peer-urls", "http://127.0.0.1:\(member.peerPort)",
            "--initial-cluster", peers, "--initial-cluster-state", "new", "--initial-cluster-token", token,
            "--heartbeat-interval", "\(options.heartbeatMilliseconds)", "--election-timeout", "\(options.electionTimeoutMilliseconds)",
        ]
        if let ttl = options.authTokenTTL { arguments += ["--auth-token-ttl", "\(ttl)"] }
        if let tls = options.tls { arguments += ["--cert-file", tls.certificateFile, "--key-file", tls.keyFile] }
        let process = try spawnChild(
            executable: EtcdTestEnvironment.etcdPath!, arguments: arguments, outputPath: member.logPath, lifeline: true)
        let previous = lock.withLock {
            defer { processes[index] = process }
            return processes[index]
        }
        precondition(previous == nil, "EtcdCluster.restart(member: \(index)): the member runs; kill it first")
    }

    private func waitUntilHealthy(_ index: Int, seconds: Double) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let reply = probeHTTP(port: members[index].metricsPort, path: "/health"), reply.status == 200,
                reply.body.contains("\"health\":\"true\"")
            {
                return
            }
            guard let process = lock.withLock({ processes[index] }) else { throw EtcdHarnessError("member \(index) was killed") }
            let (exited, status) = process.hasExited()
            if exited {
                lock.withLock { processes[index] = nil }
                throw EtcdHarnessError("etcd member \(index) exited (status \(status)) while starting; log:\n\(logTails())")
            }
            usleep(20_000)
        }
        throw EtcdHarnessError("etcd member \(index) not healthy within \(seconds) s; logs:\n\(logTails())")
    }

    private func currentLeader() -> Int? {
        var leaders: Set<String> = []
        var ids: [String: Int] = [:]
        for index in members.indices where lock.withLock({ isAnswering(index) }) {
            guard let reply = probeHTTP(port: members[index].clientPort, method: "POST", path: "/v3/maintenance/status", body: "{}"),
                reply.status == 200,
                let object = try? JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [String: Any],
                let header = object["header"] as? [String: Any], let id = header["member_id"] as? String
            else { continue }
            ids[id] = index
            if let leader = object["leader"] as? String, leader != "0" { leaders.insert(leader) }
        }
        guard leaders.count == 1, let leader = leaders.first else { return nil }
        return ids[leader]
    }
}

/// Whether a process with this id exists.
private func processExists(_ pid: pid_t) -> Bool {
    #if canImport(Glibc)
    return Glibc.kill(pid, 0) == 0 || errno != ESRCH
    #else
    return Darwin.kill(pid, 0) == 0 || errno != ESRCH
    #endif
}

/// A single-member etcd for tests (an `EtcdCluster` of one member).
package final class EtcdServer: Sendable {
    /// The cluster of one.
    package let cluster: EtcdCluster

    /// Starts etcd and waits until it is healthy. See `EtcdCluster.init(members:options:seconds:)`.
    package init(options: EtcdCluster.Options = .init()) throws {
        cluster = try EtcdCluster(members: 1, options: options)
    }

    /// The client URL.
    package var endpoint: URL { cluster.endpoints[0] }
    /// The client URL, as a list.
    package var endpoints: [URL] { cluster.endpoints }

    /// Kills etcd and removes its data.
    package func stop() { cluster.stop() }
    /// Kills etcd (SIGKILL), keeping its data for `restart()`.
    package func kill() { cluster.kill(member: 0) }
    /// Starts etcd again on the same data directory and port, and waits until it is healthy.
    package func restart() throws { try cluster.restart(member: 0) }
    /// See `EtcdCluster.enableAuth(user:password:)`.
    package func enableAuth(user: String, password: String) throws { try cluster.enableAuth(user: user, password: password) }
    /// See `EtcdCluster.etcdctl(_:)`.
    @discardableResult
    package func etcdctl(_ arguments: [String]) throws -> String { try cluster.etcdctl(arguments) }
}
