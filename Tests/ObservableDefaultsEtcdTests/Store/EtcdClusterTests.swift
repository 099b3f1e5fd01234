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
        var output = ""
        var ready = 0
        #expect(
            waitUntil {
                ready += 1
                _ = try? etcd.put(key: bytes("seq/ready"), value: bytes("\(ready)"))
                output += waitForText("ready: ", in: watcher.output, seconds: 0.2)
                return output.contains("ready: ")
            })

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
}
