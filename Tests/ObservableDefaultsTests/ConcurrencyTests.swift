import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing

@Suite("Concurrency")
struct ConcurrencyTests {
    let directory = TemporaryDirectory()

    @Test func threadsSettingReadingAndObservingAtOnceLoseNothing() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        let shared = DefaultsKey("shared", default: -1)
        let deliveries = Locked(0)
        let token = store.observe(shared, options: [.new]) { _, _ in deliveries.withLock { $0 += 1 } }
        let threads = 4
        let perThread = 300
        let group = DispatchGroup()
        for thread in 0..<threads {
            group.enter()
            Thread {
                let other = DefaultsStore(fileURL: url)
                for index in 0..<perThread {
                    other[DefaultsKey("t\(thread)-\(index)", default: -1)] = index
                    other[shared] = index
                    _ = other[shared]
                    if index.isMultiple(of: 50) {
                        let token = other.observe(shared) { _, _ in }
                        token.invalidate()
                    }
                }
                group.leave()
            }.start()
        }
        group.wait()
        #expect(deliveries.current == threads * perThread)
        try store.flush()
        let file = try #require(jsonObject(at: url))
        for thread in 0..<threads {
            for index in 0..<perThread where file["t\(thread)-\(index)"] != .number(String(index)) {
                Issue.record("t\(thread)-\(index) missing or wrong: \(String(describing: file["t\(thread)-\(index)"]))")
                break
            }
        }
        #expect(file.count == threads * perThread + 1)
        token.invalidate()
    }
}
