import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing

@Suite("Defaults store: the back end's connection state")
struct BackendStatusTests {
    let directory = TemporaryDirectory()

    @Test func aFileStoreIsAlwaysConnectedAndItsStatusSequenceStartsWithIt() async {
        let store = DefaultsStore(fileURL: directory.file("status.json"))
        #expect(store.backendStatus == .connected(revision: nil))
        #expect(store.backendStatus.isConnected)
        let seen = Locked<[KeyValueObservedChange<DefaultsBackendStatus>]>([])
        let token = store.observeBackendStatus(options: [.initial, .old, .new]) { _, change in seen.append(change) }
        store[DefaultsKey("speed", default: 1.0)] = 2
        try? store.flush()
        #expect(seen.current == [KeyValueObservedChange(kind: .setting, newValue: .connected(revision: nil), oldValue: nil)])
        token.invalidate()
        var statuses = store.backendStatusValues().makeAsyncIterator()
        #expect(await statuses.next() == .connected(revision: nil))
    }

    /// The form whose handler gets the status itself still works, deprecated: a closure that reads
    /// a change record picks the new form, one that reads a status the old one.
    @available(*, deprecated)
    @Test func theDeprecatedFormGetsTheStatusItself() {
        let store = DefaultsStore(fileURL: directory.file("status.json"))
        let seen = Locked<[DefaultsBackendStatus]>([])
        let token = store.observeBackendStatus(options: [.initial]) { _, status in seen.append(status) }
        #expect(seen.current == [.connected(revision: nil)])
        token.invalidate()
    }
}
