import Foundation
import KeyValueObserving
import ObservableDefaults
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

/// A store on `endpoints` under `prefix` with its own values, client and watch (`sharesStorage:
/// false`): two of them in one test behave as two processes would. Problems are collected in
/// `errors` (if given) instead of failing the test.
func etcdStore(
    _ endpoints: [URL], prefix: String, credentials: DefaultsStore.EtcdCredentials? = nil, timeout: Duration = .seconds(5),
    errors: Locked<[DefaultsError]>? = nil
) throws -> DefaultsStore {
    try DefaultsStore(etcd: endpoints, prefix: prefix, credentials: credentials, timeout: timeout, sharesStorage: false) { error in
        if let errors { errors.append(error) } else { Issue.record("unexpected store error: \(error)") }
    }
}

/// `kvo-defaults COMMAND --etcd ENDPOINTS --prefix PREFIX ARGUMENTS…`, to completion.
func etcdTool(
    _ command: String, _ endpoints: [URL], prefix: String = "app/", _ arguments: [String] = [], environment: [String: String]? = nil
) throws -> ToolResult {
    try runTool(
        [command, "--etcd", endpoints.map(\.absoluteString).joined(separator: ","), "--prefix", prefix] + arguments,
        environment: environment)
}

/// `kvo-defaults watch --etcd ENDPOINTS --prefix PREFIX`, running; `stop()` it.
func startEtcdWatcher(_ endpoints: [URL], prefix: String = "app/") throws -> RunningTool {
    try startTool(["watch", "--etcd", endpoints.map(\.absoluteString).joined(separator: ","), "--prefix", prefix])
}

extension RunningTool {
    /// Ends the process (SIGTERM) and waits for it.
    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// The `STORE` argument of DefaultsTestTool for an etcd store: `URL[,URL…]#PREFIX`.
func toolStore(_ endpoints: [URL], prefix: String) -> String {
    endpoints.map(\.absoluteString).joined(separator: ",") + "#" + prefix
}

/// What an observer saw: key, old and new values, origin and revision.
struct SeenChange<Value: Sendable & Equatable>: Sendable, Equatable {
    let key: String
    let old: Value?
    let new: Value?
    let origin: DefaultsChangeOrigin
    let revision: Int64?

    init(_ change: DefaultsChange<Value>) {
        key = change.key
        old = change.oldValue
        new = change.newValue
        origin = change.origin
        revision = change.revision
    }
}

/// Records the changes of `key` in `store` (with old and new values) until the token goes.
func record<Value: Equatable>(_ key: DefaultsKey<Value>, in store: DefaultsStore) -> (Locked<[SeenChange<Value>]>, KeyValueObservation) {
    let seen = Locked<[SeenChange<Value>]>([])
    let token = store.observe(key, options: [.old, .new]) { _, change in seen.append(SeenChange(change)) }
    return (seen, token)
}
