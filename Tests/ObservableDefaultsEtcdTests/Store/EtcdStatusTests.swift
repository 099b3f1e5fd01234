import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

/// An outage has an end: reported once when it starts, and its end seen in the store's
/// `backendStatus`, with the revision the watch resumed from.
@Suite(
    "DefaultsStore on etcd: connection state", .tags(.processes), .requiresEtcd)
struct EtcdStatusTests {
    static let other = DefaultsKey("other", default: 0)

    @Test func anOutageIsReportedOnceAndItsEndIsAStatusChangeAtTheRevisionTheWatchResumedAfter() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let opened = try etcd.put(key: bytes("app/speed"), value: bytes("1"))
        let errors = Locked<[DefaultsError]>([])
        let store = try etcdStore(server.endpoints, prefix: "app/", timeout: .seconds(1), errors: errors)
        #expect(store.backendStatus == .connected(revision: opened))
        let seen = Locked<[DefaultsBackendStatus]>([])
        let token = store.observeBackendStatus { _, change in seen.append(change.newValue!) }
        defer { withExtendedLifetime(token) {} }
        let last = try etcd.put(key: bytes("app/other"), value: bytes("1"))
        #expect(waitUntil { store[Self.other] == 1 })

        server.kill()
        #expect(waitUntil(seconds: 30) { !seen.current.isEmpty })
        try server.restart()
        #expect(waitUntil(seconds: 60) { seen.current.count >= 2 })
        guard case .unreachable(_, let error)? = seen.current.first else {
            Issue.record("not an outage: \(seen.current)")
            return
        }
        #expect(error.kind == .unreachable)
        #expect(seen.current.dropFirst() == [.connected(revision: last)])
        #expect(store.backendStatus == .connected(revision: last))
        // The watch resumed: a change after the restart arrives, and the outage was reported once.
        _ = try etcd.put(key: bytes("app/other"), value: bytes("2"))
        #expect(waitUntil { store[Self.other] == 2 })
        #expect(errors.current.map(\.kind) == [.unreachable])
        #expect(seen.current.count == 2)
    }

    @Test func watchPrintsALineWhenEtcdIsBackWithTheRevisionItResumedFrom() throws {
        let server = try EtcdServer()
        let watcher = try startEtcdWatcher(server.endpoints)
        defer { watcher.stop() }
        let etcd = try client(server.endpoints)
        // The watcher prints nothing until it watches: write until it shows.
        var (output, ready, last) = ("", 0, Int64(0))
        #expect(
            waitUntil {
                ready += 1
                last = (try? etcd.put(key: bytes("app/ready"), value: bytes("\(ready)"))) ?? last
                output += waitForText("ready: ", in: watcher.output, seconds: 0.2)
                return output.contains("ready: ")
            })
        output += waitForText("-> \(ready)\n", in: watcher.output)

        server.kill()
        var errors = waitForText("unreachable", in: watcher.error, seconds: 30)
        #expect(errors.contains("unreachable"))
        try server.restart()
        errors += waitForText("resumed from revision", in: watcher.error, seconds: 60)
        errors += waitForText("\n", in: watcher.error)
        #expect(errors.contains("reachable again; the watch resumed from revision \(last + 1)\n"), "\(errors)")
        _ = try etcd.put(key: bytes("app/speed"), value: bytes("2"))
        output += waitForText("speed: (absent) -> 2\n", in: watcher.output)
        #expect(output.contains("speed: (absent) -> 2\n"))
    }
}
