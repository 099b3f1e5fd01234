import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

@Suite("DefaultsStore on etcd: size caps", .tags(.processes), .requiresEtcd)
struct EtcdCapTests {
    /// A watch line over the cap stops the watch (it would meet the same line again). The store
    /// reports it once, reads its prefix again and watches after it: it does not go deaf to other
    /// writers for the rest of the process.
    @Test func aWatchLineOverTheCapIsReportedOnceAndOtherWritersAreStillSeen() throws {
        let server = try EtcdServer()
        let errors = Locked<[DefaultsError]>([])
        let store = try DefaultsStore(
            etcd: server.endpoints, prefix: "app/", maximumReplySize: 4096, sharesStorage: false,
            errorHandler: { error in errors.withLock { $0.append(error) } })
        let etcd = try client(server.endpoints)
        let huge = "\"" + String(repeating: "a", count: 8192) + "\""
        _ = try etcd.put(key: bytes("app/huge"), value: bytes(huge))
        #expect(waitUntil { errors.current.contains { $0.description.contains("maximumReplySize") } }, "\(errors.current)")
        // Until the huge value is gone the prefix read is over the cap too: the store retries it.
        _ = try etcd.delete(key: bytes("app/huge"))
        let after = DefaultsKey("after", default: 0)
        _ = try etcd.put(key: bytes("app/after"), value: bytes("7"))
        #expect(waitUntil { store[after] == 7 })
        #expect(errors.current.filter { $0.description.contains("maximumReplySize") }.count == 1, "\(errors.current)")
        #expect(waitUntil { if case .connected = store.backendStatus { true } else { false } })
    }
}
