import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableDefaults
import ObservableDefaultsEtcd

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The etcd section: ObservableDefaults on etcd next to the file store, measured in the same run
// against an etcd this executable starts on loopback (only where `etcd` is installed).

enum EtcdBench {
    /// A single-member etcd on loopback ports, with a temporary data directory, killed when this
    /// process exits.
    final class Server {
        let url: URL
        let process: Process
        let dataDirectory: String

        init(url: URL, process: Process, dataDirectory: String) {
            self.url = url
            self.process = process
            self.dataDirectory = dataDirectory
        }

        /// A location for `openStore` and the other process: `etcd:URL#PREFIX`.
        func location(prefix: String) -> String { "etcd:\(url.absoluteString)#\(prefix)" }

        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: dataDirectory)
        }
    }

    /// The path of the `etcd` executable, or `nil`.
    static func findEtcd() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/etcd"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Starts etcd, or says why not.
    static func start() -> (Server?, String?) {
        guard let etcd = findEtcd() else {
            return (nil, "skipped: etcd is not installed (Debian/Ubuntu: apt-get install -y etcd-server; then run kvo-bench again)")
        }
        let client = freePort()
        let peer = freePort()
        let dataDirectory = NSTemporaryDirectory() + "kvo-bench-etcd-\(getpid())"
        let url = URL(string: "http://127.0.0.1:\(client)")!
        let process: Process
        do {
            process = try startProcess(
                etcd,
                [
                    "--name", "bench", "--data-dir", dataDirectory,
                    "--listen-client-urls", url.absoluteString, "--advertise-client-urls", url.absoluteString,
                    "--listen-peer-urls", "http://127.0.0.1:\(peer)", "--initial-advertise-peer-urls", "http://127.0.0.1:\(peer)",
                    "--initial-cluster", "bench=http://127.0.0.1:\(peer)",
                ])
        } catch {
            return (nil, "skipped: cannot start \(etcd): \(error)")
        }
        let server = Server(url: url, process: process, dataDirectory: dataDirectory)
        running = server
        atexit { EtcdBench.running?.stop() }
        // Ready once a store opens on it.
        let deadline = monotonicNanoseconds() + 20_000_000_000
        while monotonicNanoseconds() < deadline {
            if (try? DefaultsStore(etcd: [url], prefix: "ready/", timeout: .seconds(1))) != nil { return (server, nil) }
            guard process.isRunning else { break }
            usleep(100_000)
        }
        server.stop()
        running = nil
        return (nil, "failed: etcd did not answer on \(url.absoluteString) within 20 s")
    }

    /// The server `atexit` stops. Only set from the main thread.
    nonisolated(unsafe) static var running: Server?

    /// A free loopback TCP port (bound, read, closed).
    static func freePort() -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A store at `location`: a file path, or `etcd:URL#PREFIX`.
    static func openStore(_ location: String) throws(DefaultsError) -> DefaultsStore {
        guard location.hasPrefix("etcd:") else { return DefaultsStore(fileURL: URL(fileURLWithPath: location)) }
        let rest = location.dropFirst("etcd:".count)
        let parts = rest.split(separator: "#", maxSplits: 1)
        let url = URL(string: String(parts[0]))!
        return try DefaultsStore(etcd: [url], prefix: parts.count > 1 ? String(parts[1]) : "")
    }

    /// The hidden command that makes this executable one of the contending processes of the update
    /// throughput: `kvo-bench _update-defaults LOCATION KEY N` applies N `update(+1)` and exits.
    static let updateCommand = BenchHiddenCommands.updateDefaults

    static func runUpdates(location: String, key name: String, count: Int) -> Never {
        do {
            let store = try openStore(location)
            let key = DefaultsKey(name, default: 0)
            for _ in 0..<count { try store.update(key) { $0 += 1 } }
            try store.flush()
        } catch {
            fail("\(updateCommand): \(error)", status: 1)
        }
        exit(0)
    }

    /// Updates per second with `processes` processes each applying `perProcess` updates of one key.
    static func updateThroughput(location: String, processes: Int, perProcess: Int) -> (Double?, String?) {
        let key = "hits-\(processes)"
        let start = monotonicNanoseconds()
        var children: [Process] = []
        for _ in 0..<processes {
            do {
                children.append(try startProcess(currentExecutable(), [updateCommand, location, key, String(perProcess)]))
            } catch {
                return (nil, "cannot start \(currentExecutable()): \(error)")
            }
        }
        for child in children { child.waitUntilExit() }
        let seconds = Double(monotonicNanoseconds() - start) / 1e9
        if let failed = children.first(where: { $0.terminationStatus != 0 }) {
            return (nil, "an updating process exited with status \(failed.terminationStatus)")
        }
        // Exactly once: the key holds every increment.
        if let store = try? openStore(location), store[DefaultsKey(key, default: 0)] != processes * perProcess {
            return (nil, "\(key) holds \(store[DefaultsKey(key, default: 0)]), expected \(processes * perProcess)")
        }
        return (Double(processes * perProcess) / seconds, nil)
    }

    /// The median over rounds of the ns per cached read of an Int key, for each store, read in turn.
    static func cachedReads(_ stores: [DefaultsStore], rounds: Int, reads: Int) -> [Double] {
        let key = DefaultsKey("read", default: 0)
        for store in stores { store[key] = 7 }
        var samples = Array(repeating: [Double](), count: stores.count)
        for _ in 0..<rounds {
            for (index, store) in stores.enumerated() {
                var sum = 0
                let start = monotonicNanoseconds()
                for _ in 0..<reads { sum &+= store[key] }
                samples[index].append(Double(monotonicNanoseconds() - start) / Double(reads))
                precondition(sum == 7 &* reads, "cached read returned a wrong value")
            }
        }
        return samples.map { $0.sorted()[$0.count / 2] }
    }

    /// The etcd section's figures.
    struct Result {
        var etcdVersion: String
        var fileLatency: DefaultsLatency.Result?
        var etcdLatency: DefaultsLatency.Result?
        var throughput: [(backend: String, processes: Int, perSecond: Double)] = []
        var fileRead = 0.0
        var etcdRead = 0.0
        var problems: [String] = []
    }

    /// Measures the section, or says in one line why it did not run.
    static func measure(quick: Bool, fileLatency: DefaultsLatency.Result?) -> EtcdOutcome {
        let (started, problem) = start()
        guard let server = started else { return .unavailable(problem ?? "failed") }
        defer {
            server.stop()
            running = nil
        }
        var result = Result(etcdVersion: etcdVersion() ?? "etcd", fileLatency: fileLatency)
        let (latency, latencyProblem) = DefaultsLatency.measure(changes: quick ? 20 : 300, etcd: server)
        result.etcdLatency = latency
        if let latencyProblem { result.problems.append("latency: \(latencyProblem)") }
        let directory = BenchDirectory("etcd-section")
        let filePath = directory.url.appendingPathComponent("updates.json").path
        let perProcess = quick ? 20 : 200
        for processes in [1, 8] {
            for (backend, location) in [("file", filePath), ("etcd", server.location(prefix: "updates-\(getpid())/"))] {
                let (rate, problem) = updateThroughput(location: location, processes: processes, perProcess: perProcess)
                if let rate { result.throughput.append((backend, processes, rate)) }
                if let problem { result.problems.append("update, \(backend), \(processes) processes: \(problem)") }
            }
        }
        do {
            let fileStore = DefaultsStore(fileURL: directory.url.appendingPathComponent("reads.json"))
            let etcdStore = try openStore(server.location(prefix: "reads-\(getpid())/"))
            directory.stores.append(fileStore)
            let medians = cachedReads([fileStore, etcdStore], rounds: quick ? 5 : 21, reads: quick ? 100_000 : 1_000_000)
            result.fileRead = medians[0]
            result.etcdRead = medians[1]
            try etcdStore.flush()
        } catch {
            result.problems.append("cached read: \(error)")
        }
        return .measured(result)
    }

    static func etcdVersion() -> String? {
        guard let etcd = findEtcd() else { return nil }
        let pipe = Pipe()
        guard let process = try? startProcess(etcd, ["--version"], standardOutput: pipe) else { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").first.map {
            $0.replacingOccurrences(of: "etcd Version: ", with: "etcd ")
        }
    }
}

/// What the etcd section found.
typealias EtcdOutcome = SectionOutcome<EtcdBench.Result>

/// The etcd section: a heading and its lines, or one line saying why it did not run.
func etcdLines(_ outcome: EtcdOutcome, markdown: Bool) -> [String] {
    outcome.lines(unavailable: "etcd backend") { result in
        let heading =
            "ObservableDefaults on etcd next to the file store (\(result.etcdVersion), one member on loopback, started by this run)"
        var lines = [markdown ? "### \(heading)\n" : heading]
        func add(_ row: String) { lines.append(markdown ? "- \(row)" : "  \(row)") }
        func spans(_ sorted: [Double]) -> String {
            "p50 \(formatDuration(nanoseconds: percentile(sorted, 0.5))), p99 \(formatDuration(nanoseconds: percentile(sorted, 0.99)))"
        }
        if let file = result.fileLatency, let etcd = result.etcdLatency {
            add(
                "set → observer in another process (set + flush, whole write included): etcd \(spans(etcd.fromSet)); file \(spans(file.fromSet))"
            )
        } else if let etcd = result.etcdLatency {
            add("set → observer in another process (set + flush, whole write included): etcd \(spans(etcd.fromSet))")
        }
        for processes in [1, 8] {
            let figures = result.throughput.filter { $0.processes == processes }
            guard !figures.isEmpty else { continue }
            add(
                "update(+1) throughput, \(processes) contending process\(processes == 1 ? "" : "es"): "
                    + figures.map { "\($0.backend) \(Int($0.perSecond.rounded()))/s" }.joined(separator: ", "))
        }
        if result.fileRead > 0, result.etcdRead > 0 {
            add(
                "cached read of an Int key: etcd \(String(format: "%.1f", result.etcdRead)) ns, file \(String(format: "%.1f", result.fileRead)) ns "
                    + "(\(String(format: "%.2f", result.etcdRead / result.fileRead))×; median of rounds)")
        }
        for problem in result.problems { add("problem: \(problem)") }
        return lines
    }
}
