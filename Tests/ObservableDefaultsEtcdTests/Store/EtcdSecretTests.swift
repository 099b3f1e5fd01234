import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

/// Secrets declared when a store on etcd is made (`secrets:`): redacted before any key of their
/// name exists, and a value of one that is not JSON is reported without a character of it.
@Suite("DefaultsStore on etcd: secrets", .tags(.processes), .requiresEtcd)
struct EtcdSecretTests {
    /// A name no other test declares secret (secrecy is process-wide).
    func name(_ base: String) -> String { base + String(UInt32.random(in: 0...UInt32.max), radix: 36) }

    @Test func secretsDeclaredAtCreationAreRedactedAndAValueThatIsNotJSONIsReportedWithoutIt() throws {
        let server = try EtcdServer()
        let etcd = try client(server.endpoints)
        let (tokenName, brokenName) = (name("etcdToken"), name("etcdBroken"))
        let (token, broken, later) = (randomSecret(), randomSecret(), randomSecret())
        _ = try etcd.put(key: bytes("app/" + tokenName), value: bytes("\"\(token)\""))
        // Not JSON: a value pasted where a key belongs, which a parser quoting where it stopped
        // would quote whole.
        _ = try etcd.put(key: bytes("app/" + brokenName), value: bytes(#"{"a": "x", "\#(broken)"}"#))
        _ = try etcd.put(key: bytes("app/port"), value: bytes("7000"))
        let errors = Locked<[DefaultsError]>([])
        let store = try DefaultsStore(etcd: server.endpoints, prefix: "app/", secrets: [tokenName, brokenName]) { error in
            errors.append(error)
        }
        // No typed key of either name exists yet.
        let snapshot = everythingPrinted(store.snapshot())
        #expect(snapshot.contains("\(tokenName): <redacted>") && snapshot.contains("port: 7000"), "\(snapshot)")
        let error = try #require(errors.current.first { $0.key == brokenName })
        #expect(error.kind == .corruptFile && error.description.contains("not valid JSON"), "\(error)")
        // A change arriving through the watch, and a value of the broken key again.
        let seen = Locked<[String]>([])
        let tokenKey = DefaultsKey(tokenName, default: "")
        let changes = store.observe(tokenKey, options: [.old, .new]) { _, change in seen.append(everythingPrinted(change)) }
        defer { withExtendedLifetime(changes) {} }
        _ = try etcd.put(key: bytes("app/" + tokenName), value: bytes("\"\(later)\""))
        _ = try etcd.put(key: bytes("app/" + brokenName), value: bytes(#"{"b": "\#(later)"x"#))
        #expect(waitUntil { store[tokenKey] == later && errors.current.count >= 2 })
        #expect(seen.current.count == 1 && seen.current.allSatisfy { $0.contains("<redacted>") }, "\(seen.current)")
        var printed = snapshot + everythingPrinted(store.snapshot()) + everythingPrinted(store) + seen.current.joined()
        for error in errors.current { printed += everythingPrinted(error) + error.reason }
        if let thrown = #expect(throws: DefaultsError.self, performing: { try store.jsonValue(forKey: brokenName) }) {
            printed += everythingPrinted(thrown)
        }
        for value in [token, broken, later] { #expect(leak(of: value, in: printed) == nil, "\(printed)") }
    }
}
