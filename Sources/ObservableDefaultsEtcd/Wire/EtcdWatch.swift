/// A running watch (`EtcdClient.watch(prefix:startRevision:handler:)`). Keep it: `cancel()` or its
/// deinit stops the watch.
package final class EtcdWatch: Sendable {
    init() {}

    /// Stops the watch. After it returns no handler call starts (one that is running may finish).
    package func cancel() {}
}
