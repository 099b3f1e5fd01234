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
        let seen = Locked<[DefaultsBackendStatus]>([])
        let token = store.observeBackendStatus(options: [.initial]) { _, status in seen.append(status) }
        store[DefaultsKey("speed", default: 1.0)] = 2
        try? store.flush()
        #expect(seen.current == [.connected(revision: nil)])
        token.invalidate()
        var statuses = store.backendStatusValues().makeAsyncIterator()
        #expect(await statuses.next() == .connected(revision: nil))
    }
}
