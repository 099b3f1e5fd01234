import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite(
    "DefaultsStore on etcd: a cluster losing its leader", .tags(.processes),
    .requiresEtcd)
struct EtcdClusterTests {
    /// Puts `PREFIX`ready until the `watch` process prints it (so it watches); returns its output.
    func waitUntilWatching(_ watcher: RunningTool, _ etcd: EtcdClient, prefix: String) -> String {
        var output = ""
        var ready = 0
        #expect(
            waitUntil {
                ready += 1
                _ = try? etcd.put(key: bytes("\(prefix)ready"), value: bytes("\(ready)"))
                output += waitForText("ready: ", in: watcher.output, seconds: 0.2)
                return output.contains("ready: ")
            })
        return output
    }

    /// A writer process sets 4 keys in turn to 1 … 600 (one put each); a watcher process prints every
    /// change; the leader, where both started, is killed mid-stream. Every value reaches the watcher
    /// exactly once, in order per key.
    @Test func everyChangeIsObservedExactlyOnceInOrderWhenTheLeaderDies() throws {
        let cluster = try EtcdCluster(members: 3)
        let leader = try cluster.leaderIndex()
        // The leader first, so that both processes start on it and must fail over.
        let endpoints = (0..<3).map { cluster.endpoints[(leader + $0) % 3] }
        let urls = endpoints.map(\.absoluteString).joined(separator: ",")
        let watcher = try startTool(["watch", "--etcd", urls, "--prefix", "seq/"])
        defer {
            watcher.process.terminate()
            watcher.process.waitUntilExit()
        }
        let etcd = try client(endpoints)
        var output = waitUntilWatching(watcher, etcd, prefix: "seq/")

        let (keys, count) = (4, 600)
        let writer = try startTool(
            ["write-sequence", toolStore(endpoints, prefix: "seq/"), "\(keys)", "\(count)"], executable: testToolPath)
        output += waitForText("-> 100\n", in: watcher.output, seconds: 60)
        #expect(output.contains("-> 100\n"))
        cluster.kill(member: leader)
        #expect(waitUntil(seconds: 120) { !writer.process.isRunning })
        writer.process.waitUntilExit()
        let writerErrors = String(decoding: (try? writer.error.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
        #expect(writer.process.terminationStatus == 0, "\(writerErrors)")
        let last = "k\(count % keys): \(count - keys) -> \(count)\n"
        output += waitForText(last, in: watcher.output, seconds: 60)
        #expect(output.contains(last))

        // Per key: the values in order, each once, each change's old value the previous new one.
        var seen: [String: [String]] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("k") {
            let parts = line.split(separator: " ")
            #expect(parts.count == 4, "\(line)")
            let key = String(parts[0].dropLast())
            #expect(String(parts[1]) == (seen[key]?.last ?? "(absent)"), "\(line)")
            seen[key, default: []].append(String(parts[3]))
        }
        for key in 0..<keys {
            let expected = stride(from: key == 0 ? keys : key, through: count, by: keys).map(String.init)
            #expect(seen["k\(key)"] == expected, "k\(key): \(seen["k\(key)"] ?? [])")
        }
    }

    /// The member listed first in `--etcd` is frozen (SIGSTOP) under a running `watch`: `write`,
    /// `read` and `update` succeed on the others (each attempt gets a quarter of the timeout), and the
    /// watcher, whose stream was on the frozen member, sees both changes once (its liveness probe
    /// moves it to another member).
    @Test func commandsAndTheWatchCarryOnWhenTheFirstMemberIsFrozen() throws {
        let cluster = try EtcdCluster(members: 3)
        let urls = cluster.endpoints.map(\.absoluteString).joined(separator: ",")
        let watcher = try startTool(["watch", "--etcd", urls, "--prefix", "fz/"])
        defer {
            watcher.process.terminate()
            watcher.process.waitUntilExit()
        }
        var output = waitUntilWatching(watcher, try client(cluster.endpoints), prefix: "fz/")

        cluster.freeze(member: 0)
        let arguments = ["--etcd", urls, "--prefix", "fz/"]
        let write = try runTool(["write"] + arguments + ["host", "\"x\""])
        #expect(write.status == 0, "\(write.error)")
        let read = try runTool(["read"] + arguments + ["host"])
        #expect(read.status == 0 && read.output == "\"x\"\n", "\(read.error)")
        let update = try runTool(["update"] + arguments + ["hits", "--add", "2"])
        #expect(update.status == 0 && update.output == "2\n", "\(update.error)")
        output += waitForText("hits: (absent) -> 2\n", in: watcher.output, seconds: 60)
        let changes = output.split(separator: "\n").filter { !$0.hasPrefix("ready: ") }
        #expect(changes == ["host: (absent) -> \"x\"", "hits: (absent) -> 2"], "\(output)")
    }

    /// Four processes each add 1 to one key 100 times with `update`, on endpoints listed followers
    /// first, and the leader is killed midway: requests that were in flight at a follower (forwarded
    /// to the dead leader, never answered) are sent again to the next member within the timeout, so
    /// every process succeeds and the key ends at exactly 400.
    @Test func updatesAcrossALeaderKillAllSucceedAndEndAtExactlyTheirSum() throws {
        let cluster = try EtcdCluster(members: 3)
        let leader = try cluster.leaderIndex()
        let endpoints = [1, 2, 0].map { cluster.endpoints[(leader + $0) % 3] }
        let store = toolStore(endpoints, prefix: "up/")
        let processes = try (0..<4).map { _ in try startTool(["update-many", store, "hits", "100", "1"], executable: testToolPath) }
        let etcd = try client(endpoints)
        let count = { () -> Int in
            guard let value = try? etcd.range(key: bytes("up/hits")).keyValue?.value else { return 0 }
            return Int(String(decoding: value, as: UTF8.self)) ?? 0
        }
        #expect(waitUntil(seconds: 60) { count() >= 60 })
        cluster.kill(member: leader)
        for tool in processes {
            #expect(waitUntil(seconds: 120) { !tool.process.isRunning })
            tool.process.waitUntilExit()
            let error = String(decoding: (try? tool.error.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
            #expect(tool.process.terminationStatus == 0, "\(error)")
        }
        #expect(count() == 400)
    }
}
