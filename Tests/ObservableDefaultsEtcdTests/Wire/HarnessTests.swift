import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("etcd test harness", .tags(.processes), .requiresEtcd)
struct HarnessTests {
    @Test func aServerAnswersAndItsProcessIsGoneAfterStop() throws {
        let server = try EtcdServer()
        try server.etcdctl(["put", "k", "v"])
        #expect(try server.etcdctl(["get", "k", "--print-value-only"]).contains("v"))
        let dataDirectories = try #require(dataDirectoriesOfRunningEtcd(port: server.endpoint.port!))
        #expect(dataDirectories.count == 1)
        server.stop()
        #expect(dataDirectoriesOfRunningEtcd(port: server.endpoint.port!)?.isEmpty == true)
        #expect(!FileManager.default.fileExists(atPath: dataDirectories[0]))
    }

    @Test func aKilledMemberRestartsOnItsDataAndKeepsIt() throws {
        let server = try EtcdServer()
        try server.etcdctl(["put", "k", "kept"])
        server.kill()
        #expect(dataDirectoriesOfRunningEtcd(port: server.endpoint.port!)?.isEmpty == true)
        try server.restart()
        #expect(try server.etcdctl(["get", "k", "--print-value-only"]).contains("kept"))
    }

    @Test func aClusterElectsANewLeaderWhenTheLeaderIsKilled() throws {
        let cluster = try EtcdCluster(members: 3)
        let leader = try cluster.leaderIndex()
        cluster.kill(member: leader)
        let next = try cluster.leaderIndex()
        #expect(next != leader)
        try cluster.restart(member: leader)
        try cluster.etcdctl(["put", "k", "v"])
    }

    @Test func aFrozenMemberIsStoppedUntilThawedAndStopKillsIt() throws {
        let server = try EtcdServer()
        let port = server.endpoint.port!
        server.cluster.freeze(member: 0)
        // A signal is delivered asynchronously: every thread of the member stops soon after kill(2).
        #expect(waitUntil { runningEtcd(port: port)?.map(\.state) == ["T"] })  // stopped by SIGSTOP
        server.cluster.thaw(member: 0)
        #expect(waitUntil { runningEtcd(port: port)?.map(\.state).allSatisfy { $0 != "T" } == true })
        try server.etcdctl(["put", "k", "v"])
        server.cluster.freeze(member: 0)
        server.stop()
        #expect(runningEtcd(port: port)?.isEmpty == true)
    }

    @Test func etcdDiesWithTheTestProcess() throws {
        // The kernel closes the lifeline's write end when the test process dies, however it dies;
        // closing it here does the same.
        let server = try EtcdServer()
        #expect(server.cluster.cutLifeline(member: 0))
        #expect(dataDirectoriesOfRunningEtcd(port: server.endpoint.port!)?.isEmpty == true)
    }
}

/// The data directories (`--data-dir`) of the etcd processes that listen on client `port`, read from
/// /proc (nil where /proc is not available).
func dataDirectoriesOfRunningEtcd(port: Int) -> [String]? {
    runningEtcd(port: port)?.map(\.dataDirectory)
}

/// The etcd processes that listen on client `port`, with their data directory (`--data-dir`) and
/// state (the third field of /proc/PID/stat: "T" when stopped), read from /proc (nil where /proc is
/// not available).
func runningEtcd(port: Int) -> [(dataDirectory: String, state: String)]? {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
    var found: [(dataDirectory: String, state: String)] = []
    for entry in entries where Int(entry) != nil {
        guard let raw = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
        let arguments = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        guard arguments.first?.hasSuffix("etcd") == true, arguments.contains("http://127.0.0.1:\(port)"),
            let index = arguments.firstIndex(of: "--data-dir"), index + 1 < arguments.count
        else { continue }
        // A zombie (killed, not reaped) has an empty cmdline and is skipped above.
        let stat = (try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8)) ?? ""
        // "PID (COMMAND) STATE …": the state follows the last parenthesis.
        let state = stat.range(of: ") ", options: .backwards).map { String(stat[$0.upperBound...].prefix(1)) } ?? "?"
        found.append((arguments[index + 1], state))
    }
    return found
}
