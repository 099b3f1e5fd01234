import Foundation
import KeyValueObserving
import ObservableDefaults

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A temporary directory for one scenario's files, removed when the workload goes away.
final class BenchDirectory {
    let path: String
    /// Stores on files in the directory: flushed before it is removed, so that no batched write
    /// recreates it afterwards.
    var stores: [DefaultsStore] = []

    init(_ label: String) {
        var template = Array((NSTemporaryDirectory() + "/kvo-bench-\(label)-XXXXXX").utf8CString)
        let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(result != nil, "kvo-bench: mkdtemp failed with errno \(errno)")
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    var url: URL { URL(fileURLWithPath: path) }

    deinit {
        for store in stores { try? store.flush() }
        try? FileManager.default.removeItem(atPath: path)
    }
}

@inline(never) func setSpeed(_ store: DefaultsStore, _ key: DefaultsKey<Double>, _ value: Double) { store[key] = value }
@inline(never) func setSpeed(_ defaults: UserDefaults, _ value: Double) { defaults.set(value, forKey: "playbackSpeed") }
@inline(never) func getSpeed(_ store: DefaultsStore, _ key: DefaultsKey<Double>) -> Double { store[key] }
@inline(never) func getSpeed(_ defaults: UserDefaults, _ key: String) -> Double { defaults.double(forKey: key) }
@inline(never) func getSpeed(_ values: [String: Double], _ key: String) -> Double { values[key] ?? 0 }

/// Where a read loop reads a Double: one read per call, through the non-inlined `getSpeed`.
private protocol SpeedSource {
    func readSpeed() -> Double
}

private struct StoreSpeed: SpeedSource {
    let store: DefaultsStore
    let key: DefaultsKey<Double>
    func readSpeed() -> Double { getSpeed(store, key) }
}

private struct UserDefaultsSpeed: SpeedSource {
    let defaults: UserDefaults
    let key: String
    func readSpeed() -> Double { getSpeed(defaults, key) }
}

private struct DictionarySpeed: SpeedSource {
    let values: [String: Double]
    let key: String
    func readSpeed() -> Double { getSpeed(values, key) }
}

/// A read loop of `key` from `store`, checked against `expected`.
private func readLoop(_ store: DefaultsStore, _ key: DefaultsKey<Double>, expected: Double, retaining: [AnyObject]) -> Workload {
    readLoop(StoreSpeed(store: store, key: key), expected: expected, retaining: retaining)
}

/// A read loop of `source` (specialised for each source type: the loop is the same for all),
/// checked against `expected`.
private func readLoop(_ source: some SpeedSource, expected: Double, retaining: [AnyObject] = []) -> Workload {
    var sum = 0.0
    return .loop(retaining: retaining) { values in
        var total = 0.0
        for _ in values { total += source.readSpeed() }
        sum = total
    } check: { iterations, _ in
        sum == expected * Double(iterations) ? nil : "the reads summed to \(sum), expected \(expected * Double(iterations))"
    }
}

/// A corelibs `UserDefaults` suite whose file lives in a scratch directory: `UserDefaults(suiteName:)`
/// with an absolute path writes that plist (on Linux and macOS alike), so the user's own preferences
/// are never touched.
private func scratchUserDefaults(_ directory: BenchDirectory) -> UserDefaults {
    UserDefaults(suiteName: directory.path + "/kvo-bench")!
}

/// The number stored under `key` in the defaults file at `url`, read back from the disk.
private func storedNumber(_ key: String, in url: URL) -> NSNumber? {
    guard let data = FileManager.default.contents(atPath: url.path),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    else { return nil }
    return object[key] as? NSNumber
}

extension Scenarios {
    /// ObservableDefaults against corelibs `UserDefaults`, in the same run.
    static var defaultsScenarios: [Scenario] {
        [
            userDefaultsSets(
                "userdefaults-set", directory: "userdefaults",
                summary: "Foundation UserDefaults.set(Double, forKey:), in memory (no notification, no persistence)"
            ) { defaults, values in
                for i in values { setSpeed(defaults, Double(i)) }
            },
            Scenario(
                name: "plain-dictionary-read", group: .defaults,
                summary: "baseline: a [String: Double] lookup of a value already decoded, by its key's name (a configuration "
                    + "read without a store: the key's hash, the probe, the copy)"
            ) {
                let values = opaque(["playbackSpeed": 1.5, "volume": 0.5, "port": 8080])
                let key = opaque("playbackSpeed")
                return readLoop(DictionarySpeed(values: values, key: key), expected: 1.5)
            },
            Scenario(
                name: "userdefaults-read", group: .defaults,
                summary: "baseline: Foundation UserDefaults.double(forKey:) of a Double set in this process"
            ) {
                let directory = BenchDirectory("userdefaults-read")
                let defaults = opaque(scratchUserDefaults(directory))
                defaults.set(1.5, forKey: "playbackSpeed")
                let key = opaque("playbackSpeed")
                return readLoop(UserDefaultsSpeed(defaults: defaults, key: key), expected: 1.5, retaining: [directory, defaults])
            },
            Scenario(
                name: "defaults-read", group: .defaults,
                summary: "DefaultsStore read of a Double key set in this process (no layers)",
                baseline: "plain-dictionary-read", comparisons: ["userdefaults-read"]
            ) {
                let directory = BenchDirectory("defaults-read")
                let store = opaque(DefaultsStore(fileURL: directory.url.appendingPathComponent("bench.json")))
                directory.stores.append(store)
                let key = DefaultsKey("playbackSpeed", default: 0.0)
                store[key] = 1.5
                return readLoop(store, key, expected: 1.5, retaining: [directory, store])
            },
            Scenario(
                name: "defaults-read-from-file", group: .defaults,
                summary: "DefaultsStore read of a Double key its file held when the store was opened (never set in-process)",
                baseline: "defaults-read"
            ) {
                let directory = BenchDirectory("defaults-read-file")
                let url = directory.url.appendingPathComponent("bench.json")
                _ = FileManager.default.createFile(atPath: url.path, contents: Data("{\n  \"playbackSpeed\" : 1.5\n}\n".utf8))
                let store = opaque(DefaultsStore(fileURL: url))
                directory.stores.append(store)
                let key = DefaultsKey("playbackSpeed", default: 0.0)
                return readLoop(store, key, expected: 1.5, retaining: [directory, store])
            },
            Scenario(
                name: "defaults-read-5-layers", group: .defaults,
                summary: "the same read through arguments, environment, directory, file and registered defaults (found in the file)",
                baseline: "defaults-read", target: .ratioAtMost(1.3)
            ) {
                let directory = BenchDirectory("defaults-layers")
                let config = directory.path + "/config"
                try? FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
                // Every layer holds something, none of it this key.
                _ = FileManager.default.createFile(atPath: config + "/volume", contents: Data("0.5\n".utf8))
                let store = opaque(
                    DefaultsStore(
                        fileURL: directory.url.appendingPathComponent("bench.json"),
                        layers: [
                            .arguments(["--volume=0.5", "--verbose"]),
                            .environment(prefix: "KVOBENCH", variables: ["KVOBENCH_VOLUME": "0.5"]),
                            .directory(URL(fileURLWithPath: config)),
                        ]))
                directory.stores.append(store)
                store.register(["playbackSpeed": 1.0, "volume": 1.0])
                let key = DefaultsKey("playbackSpeed", default: 0.0)
                store[key] = 1.5
                return readLoop(store, key, expected: 1.5, retaining: [directory, store])
            },
            Scenario(
                name: "defaults-set-observed", group: .defaults,
                summary: "DefaultsStore set of a Double key with one [.new] observer (persistence batched off the thread)",
                baseline: "userdefaults-set", target: .ratioAtMost(0.1)
            ) {
                let directory = BenchDirectory("defaults")
                let store = opaque(DefaultsStore(fileURL: directory.url.appendingPathComponent("bench.json")))
                directory.stores.append(store)
                let key = DefaultsKey("playbackSpeed", default: 0.0)
                let counter = Counter()
                let token = store.observe(key, options: [.new]) { _, change in counter.record(change.newValue) }
                return .loop(retaining: [directory, store, token], resetting: counter) { values in
                    for i in values { setSpeed(store, key, Double(i)) }
                } check: { iterations, last in
                    if counter.count != iterations { return "observer ran \(counter.count) times, expected \(iterations)" }
                    if counter.last != Double(last) {
                        return "observer saw \(String(describing: counter.last)), expected \(last)"
                    }
                    return store[key] == Double(last) ? nil : "store holds \(store[key]), expected \(last)"
                }
            },
            userDefaultsSets(
                "userdefaults-set-synchronize", directory: "userdefaults-sync",
                summary: "Foundation UserDefaults.set + synchronize() (truncates the plist in place and fsyncs it: no lock, no rename)"
            ) { defaults, values in
                for i in values {
                    setSpeed(defaults, Double(i))
                    defaults.synchronize()
                }
            },
            Scenario(
                name: "defaults-durable-write", group: .defaults,
                summary: "DefaultsStore set + flush(): lock file, re-read, merge, write temp, fsync, rename, fsync dir",
                baseline: "userdefaults-set-synchronize", target: .ratioAtMost(1)
            ) {
                let directory = BenchDirectory("defaults-durable")
                let url = directory.url.appendingPathComponent("bench.json")
                let store = opaque(DefaultsStore(fileURL: url))
                directory.stores.append(store)
                let key = DefaultsKey("playbackSpeed", default: 0.0)
                return .loop(retaining: [directory, store]) { values in
                    for i in values {
                        setSpeed(store, key, Double(i))
                        try? store.flush()
                    }
                } check: { _, last in
                    guard let stored = storedNumber("playbackSpeed", in: url) else { return "\(url.path) does not hold playbackSpeed" }
                    return stored.doubleValue == Double(last) ? nil : "file holds \(stored), expected \(last)"
                }
            },
            Scenario(
                name: "userdefaults-increment-synchronize", group: .defaults,
                summary:
                    "Foundation UserDefaults read + set + synchronize() of an Int: the nearest to update (not atomic across threads or processes)"
            ) {
                let directory = BenchDirectory("userdefaults-increment")
                let defaults = opaque(scratchUserDefaults(directory))
                defaults.set(0, forKey: "hits")
                var expected = 0
                return Workload(retaining: [directory, defaults]) { iterations in
                    for _ in 0..<iterations {
                        defaults.set(defaults.integer(forKey: "hits") + 1, forKey: "hits")
                        defaults.synchronize()
                    }
                    expected += iterations
                } check: { _ in
                    let stored = defaults.integer(forKey: "hits")
                    return stored == expected ? nil : "UserDefaults holds \(stored), expected \(expected)"
                }
            },
            Scenario(
                name: "defaults-update", group: .defaults,
                summary:
                    "DefaultsStore.update(+1) of an Int: file lock, re-read, write temp, fsync, rename, fsync dir (atomic across processes)",
                baseline: "userdefaults-increment-synchronize"
            ) {
                let directory = BenchDirectory("defaults-update")
                let url = directory.url.appendingPathComponent("bench.json")
                let store = opaque(DefaultsStore(fileURL: url))
                directory.stores.append(store)
                let key = DefaultsKey("hits", default: 0)
                var expected = 0
                return Workload(retaining: [directory, store]) { iterations in
                    for _ in 0..<iterations { try? store.update(key) { $0 += 1 } }
                    expected += iterations
                } check: { _ in
                    guard let stored = storedNumber("hits", in: url) else { return "\(url.path) does not hold hits" }
                    return stored.intValue == expected ? nil : "file holds \(stored), expected \(expected)"
                }
            },
        ]
    }

    /// Sets of "playbackSpeed" on a scratch `UserDefaults` suite in a temporary `directory`, by
    /// `loop` (one set per value), checked by the value stored last.
    private static func userDefaultsSets(
        _ name: String, directory label: String, summary: String, _ loop: @escaping (UserDefaults, Range<Int>) -> Void
    ) -> Scenario {
        Scenario(name: name, group: .defaults, summary: summary) {
            let directory = BenchDirectory(label)
            let defaults = opaque(scratchUserDefaults(directory))
            return .loop(retaining: [directory, defaults]) { values in
                loop(defaults, values)
            } check: { _, last in
                let stored = defaults.double(forKey: "playbackSpeed")
                return stored == Double(last) ? nil : "UserDefaults holds \(stored), expected \(last)"
            }
        }
    }
}

// MARK: Cross-process latency

/// The cross-process notification latency of ObservableDefaults, measured outside the ns/op harness
/// (one change at a time, end to end through another process): this process writes a key (set +
/// flush) while this executable, started again as `kvo-bench _watch-defaults FILE KEY`, observes the
/// file in another process and stamps each change with `CLOCK_MONOTONIC` (one clock for every
/// process) when its observer is called.
enum DefaultsLatency {
    static let name = "defaults-cross-process-latency"

    struct Result {
        /// From the start of `set` (so including the writer's durable write) to the observer's call.
        let fromSet: [Double]
        /// From just before the rename that makes the (already fsynced) file visible to the observer's call.
        let fromReplace: [Double]
        /// From the start of `set` to `flush()`'s return: the durable write alone (file and directory
        /// fsynced), no observer in it. (It replaces "flush() return → observer call", which was
        /// negative whenever the observer, woken by the rename, ran before the writer's directory
        /// fsync returned: two events with no causal order.)
        let durableWrite: [Double]
        /// From just before the rename that replaces a directory layer's file (as a Secret's update
        /// or an operator's `mv` does) to the observer's call (file stores only).
        var fromDirectoryRename: [Double] = []
    }

    /// Measures `changes` changes; returns `nil` and a reason if the measurement cannot run.
    static func measure(changes: Int, etcd: EtcdBench.Server? = nil, timeoutSeconds: Double = 10) -> (Result?, String?) {
        let directory = BenchDirectory("latency")
        let url = directory.url.appendingPathComponent("latency.json")
        let outputPath = directory.path + "/watch.out"
        guard FileManager.default.createFile(atPath: outputPath, contents: nil),
            let output = FileHandle(forWritingAtPath: outputPath)
        else { return (nil, "skipped: cannot create \(outputPath)") }
        // The file store, or a store on the benchmark's etcd under a prefix of its own.
        let location = etcd.map { $0.location(prefix: "latency-\(getpid())/") } ?? url.path
        // A file store's watcher also reads through a directory layer.
        let layerDirectory = directory.path + "/layer"
        if etcd == nil { try? FileManager.default.createDirectory(atPath: layerDirectory, withIntermediateDirectories: true) }
        let store: DefaultsStore
        do {
            store = try EtcdBench.openStore(location)
        } catch {
            return (nil, "failed: \(error)")
        }
        directory.stores.append(store)
        let key = DefaultsKey("latency", default: -1)
        // The watcher exits when its standard input ends: with this process, however it ends.
        let lifeline = Pipe()
        let watcher: Process
        do {
            watcher = try startProcess(
                currentExecutable(), [watchCommand, location, key.name] + (etcd == nil ? [layerDirectory] : []), standardInput: lifeline,
                standardOutput: output)
        } catch {
            return (nil, "skipped: cannot start \(currentExecutable()) \(watchCommand): \(error)")
        }
        defer {
            // Ending the lifeline ends the watcher; a signal could not (a test runner's children
            // inherit it blocked). SIGKILL only if it did not exit.
            try? lifeline.fileHandleForWriting.close()
            let deadline = monotonicNanoseconds() + 5_000_000_000
            while watcher.isRunning, monotonicNanoseconds() < deadline { usleep(1_000) }
            if watcher.isRunning { kill(watcher.processIdentifier, SIGKILL) }
            watcher.waitUntilExit()
            try? output.close()
        }

        var reader = LineReader(path: outputPath)
        /// The watcher's timestamp of the line reporting `value`, waiting at most the timeout.
        func stamp(of value: Int, within seconds: Double = timeoutSeconds) -> Double? {
            let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
            let suffix = " -> \(value)"
            while monotonicNanoseconds() < deadline {
                while let line = reader.nextLine() {
                    if line.hasSuffix(suffix), let stamp = line.split(separator: " ").first.flatMap({ Double($0) }) {
                        return stamp
                    }
                }
                usleep(50)
            }
            return nil
        }

        // The watcher is ready once it reports a change: write until it does (a write made before
        // it started watching is never reported).
        var value = 0
        var ready = false
        let readyDeadline = monotonicNanoseconds() + UInt64(timeoutSeconds * 1e9)
        while !ready, monotonicNanoseconds() < readyDeadline {
            value += 1
            store[key] = value
            try? store.flush()
            ready = stamp(of: value, within: 0.05) != nil || reader.sawAny
        }
        guard ready else { return (nil, "failed: the watcher reported nothing within \(timeoutSeconds) s") }
        // Drain what the readiness loop left.
        while reader.nextLine() != nil {}

        var fromSet: [Double] = []
        var durableWrite: [Double] = []
        var fromReplace: [Double] = []
        for _ in 0..<changes {
            value += 1
            let start = Double(monotonicNanoseconds())
            store[key] = value
            do {
                try store.flush()
            } catch {
                return (nil, "failed: \(error)")
            }
            let flushed = Double(monotonicNanoseconds())
            guard let observed = stamp(of: value) else {
                return (nil, "failed: the watcher did not report change \(value) within \(timeoutSeconds) s")
            }
            fromSet.append(observed - start)
            durableWrite.append(flushed - start)
            if let replaced = store.lastReplacementTime() { fromReplace.append(observed - Double(replaced)) }
        }
        var result = Result(fromSet: fromSet.sorted(), fromReplace: fromReplace.sorted(), durableWrite: durableWrite.sorted())
        if etcd == nil {
            // The directory layer: its file of the key written aside, then renamed over.
            var fromDirectoryRename: [Double] = []
            let path = layerDirectory + "/" + key.name
            for _ in 0..<changes {
                value += 1
                let temporary = layerDirectory + "/.\(key.name).tmp"
                guard FileManager.default.createFile(atPath: temporary, contents: Data("\(value)\n".utf8)) else {
                    return (nil, "failed: cannot write \(temporary)")
                }
                let start = Double(monotonicNanoseconds())
                guard rename(temporary, path) == 0 else { return (nil, "failed: cannot rename \(temporary): errno \(errno)") }
                guard let observed = stamp(of: value) else {
                    return (nil, "failed: the watcher did not report directory change \(value) within \(timeoutSeconds) s")
                }
                fromDirectoryRename.append(observed - start)
            }
            result.fromDirectoryRename = fromDirectoryRename.sorted()
        }
        return (result, nil)
    }
}

/// Reads the lines appended to a file by another process.
private struct LineReader {
    let path: String
    var offset: UInt64 = 0
    var pending = ""
    var sawAny = false

    init(path: String) {
        self.path = path
    }

    mutating func nextLine() -> String? {
        if let newline = pending.firstIndex(of: "\n") {
            let line = String(pending[..<newline])
            pending.removeSubrange(...newline)
            return line
        }
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        try? handle.seek(toOffset: offset)
        guard let data = try? handle.readToEnd(), !data.isEmpty else { return nil }
        offset += UInt64(data.count)
        sawAny = true
        pending += String(decoding: data, as: UTF8.self)
        guard let newline = pending.firstIndex(of: "\n") else { return nil }
        let line = String(pending[..<newline])
        pending.removeSubrange(...newline)
        return line
    }
}
