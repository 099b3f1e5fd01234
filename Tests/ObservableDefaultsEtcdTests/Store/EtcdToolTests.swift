import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("kvo-defaults --etcd", .tags(.processes), .requiresEtcd)
struct EtcdToolTests {
    /// `kvo-defaults COMMAND --etcd ENDPOINTS --prefix PREFIX ARGUMENTS…`.
    func tool(
        _ command: String, _ server: EtcdServer, prefix: String = "app/", _ arguments: [String] = [], environment: [String: String]? = nil
    )
        throws -> ToolResult
    {
        try etcdTool(command, server.endpoints, prefix: prefix, arguments, environment: environment)
    }

    @Test func writeReadUpdateAndDeleteWorkOnEtcd() throws {
        let server = try EtcdServer()
        #expect(try tool("write", server, ["speed", "1.5", "name", "ada"]).status == 0)
        let etcd = try client(server.endpoints)
        #expect(try etcd.range(key: bytes("app/speed")).keyValue?.value == bytes("1.5"))
        #expect(try etcd.range(key: bytes("app/name")).keyValue?.value == bytes("\"ada\""))
        #expect(try tool("read", server, ["speed"]).output == "1.5\n")
        #expect(try tool("read", server).output == "{\n  \"name\": \"ada\",\n  \"speed\": 1.5\n}\n")
        let update = try tool("update", server, ["hits", "--add", "2"])
        #expect(update.status == 0 && update.output == "2\n")
        #expect(try tool("update", server, ["hits", "--add", "3"]).output == "5\n")
        #expect(try tool("delete", server, ["speed"]).status == 0)
        #expect(try etcd.range(key: bytes("app/speed")).keyValue == nil)
        let missing = try tool("read", server, ["speed"])
        #expect(missing.status == 1)
        #expect(missing.error.contains("key 'speed' not found in etcd \(server.endpoint.absoluteString) prefix 'app/'"))
    }

    @Test func aWriteInAnotherProcessReachesThisProcessWithOldAndNewValuesAsOneChange() throws {
        let server = try EtcdServer()
        let store = try etcdStore(server.endpoints, prefix: "app/")
        store[DefaultsKey("speed", default: 1.0)] = 1.25
        try store.flush()
        let (seen, token) = record(DefaultsKey("speed", default: 1.0), in: store)
        let changes = Locked<[DefaultsStoreChange]>([])
        let storeToken = store.observeChanges { _, change in changes.append(change) }
        defer { withExtendedLifetime((token, storeToken)) {} }

        #expect(try tool("write", server, ["speed", "2.5", "volume", "0.5"]).status == 0)
        #expect(waitUntil { seen.current.count == 1 })
        let revision = try #require(try client(server.endpoints).range(key: bytes("app/speed")).keyValue?.modRevision)
        #expect(seen.current == [SeenChange(key: "speed", old: 1.25, new: 2.5, origin: .anotherProcess, revision: revision)])
        #expect(changes.current.count == 1)
        #expect(changes.current.first?.keys == ["speed", "volume"])
        #expect(changes.current.first?.revision == revision)
    }

    @Test func watchPrintsEveryChangeOfAnotherProcess() throws {
        let server = try EtcdServer()
        let watcher = try startEtcdWatcher(server.endpoints)
        defer { watcher.stop() }
        let store = try etcdStore(server.endpoints, prefix: "app/")
        let speed = DefaultsKey("speed", default: 1.0)
        // The watcher prints nothing until it has read the prefix and watches it: write until it shows.
        var output = ""
        #expect(
            waitUntil {
                store[DefaultsKey("ready", default: 0)] += 1
                try? store.flush()
                output += waitForText("ready: ", in: watcher.output, seconds: 0.2)
                return output.contains("ready: ")
            })
        store[speed] = 2
        store.removeValue(for: speed)
        try store.flush()
        output += waitForText("speed: 2 -> (absent)", in: watcher.output)
        #expect(output.contains("speed: (absent) -> 2\nspeed: 2 -> (absent)\n"))
    }

    @Test func thePasswordComesFromTheEnvironmentOrAFileNeverFromTheCommandLine() throws {
        let server = try EtcdServer()
        try server.enableAuth(user: "alice", password: "s3cret")
        let directory = NSTemporaryDirectory() + "kvo-etcd-password-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try "s3cret\n".write(toFile: directory, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let fromFile = try tool("write", server, ["--user", "alice", "--password-file", directory, "speed", "2"])
        #expect(fromFile.status == 0, "\(fromFile.error)")
        var environment = ProcessInfo.processInfo.environment
        environment["KVO_ETCD_PASSWORD"] = "s3cret"
        let fromEnvironment = try tool("read", server, ["--user", "alice", "speed"], environment: environment)
        #expect(fromEnvironment.output == "2\n", "\(fromEnvironment.error)")

        let onCommandLine = try tool("read", server, ["--user", "alice", "--password", "s3cret"])
        #expect(onCommandLine.status == 2)
        #expect(onCommandLine.error.contains("KVO_ETCD_PASSWORD"))
        environment["KVO_ETCD_PASSWORD"] = "wrong"
        let wrong = try tool("read", server, ["--user", "alice"], environment: environment)
        #expect(wrong.status == 1)
        #expect(wrong.error.contains("alice") && !wrong.error.contains("wrong") && !wrong.error.contains("s3cret"))
        var noPassword = ProcessInfo.processInfo.environment
        noPassword["KVO_ETCD_PASSWORD"] = nil
        let missing = try tool("read", server, ["--user", "alice"], environment: noPassword)
        #expect(missing.status == 2)
        #expect(missing.error.contains("needs a password"))
    }

    @Test(.requiresEtcdAndOpenSSL) func anHttpsClusterWithAPrivateAuthorityWorksForTheStoreAndTheToolWhenTheAuthorityIsGiven() throws {
        let certificates = try EtcdTestCertificates()
        let server = try EtcdServer(options: EtcdCluster.Options(tls: certificates))
        let authority = URL(fileURLWithPath: certificates.authorityFile)
        let store = try DefaultsStore(etcd: server.endpoints, prefix: "app/", trustedCertificates: authority, sharesStorage: false)
        store[DefaultsKey("speed", default: 1.0)] = 2.5
        try store.flush()
        let read = try tool("read", server, ["--cacert", certificates.authorityFile, "speed"])
        #expect(read.output == "2.5\n", "\(read.error)")

        // A refused certificate ends the call at once; the timeout is long enough that a TLS
        // handshake on a loaded machine is not cut short by the attempt's deadline (a quarter of it)
        // first, which would report a timeout instead.
        let untrusted = try #require(throws: DefaultsError.self) {
            try DefaultsStore(etcd: server.endpoints, prefix: "app/", timeout: .seconds(12), sharesStorage: false)
        }
        #expect(untrusted.kind == .unreachable)
        #expect(untrusted.description.contains("certificate"))
        let refused = try tool("read", server, ["--timeout", "12", "speed"])
        #expect(refused.status == 1)
        #expect(refused.error.contains("certificate"))
    }

    @Test func anEndpointWithAPortOutsideOneTo65535IsAUsageErrorNamingIt() throws {
        for endpoint in [
            "http://127.0.0.1:99999", "http://127.0.0.1:0", "http://127.0.0.1:abc", "http://127.0.0.1:2379,https://[::1]:65536",
        ] {
            let result = try runTool(["read", "--etcd", endpoint, "--prefix", "app/"])
            #expect(result.status == 2, "\(endpoint): \(result.error)")
            let named = endpoint.split(separator: ",").last.map(String.init) ?? endpoint
            #expect(result.error.contains("'--etcd'") && result.error.contains(named), "\(result.error)")
        }
    }

    @Test func aClusterThatDoesNotAnswerFailsWithAClearMessage() throws {
        let server = try EtcdServer()
        server.stop()
        let result = try tool("read", server, ["--timeout", "1"])
        #expect(result.status == 1)
        #expect(result.error.contains("etcd \(server.endpoint.absoluteString)"))
        #expect(result.error.contains("answer") || result.error.contains("unreachable") || result.error.contains("refused"))
    }
}
