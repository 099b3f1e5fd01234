import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

private struct Refusal: Error, Equatable {}

/// Runs `body` on `count` real threads at once and waits for them.
private func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
    group.wait()
}

@Suite("Atomic updates", .tags(.processes))
struct UpdateTests {
    let directory = TemporaryDirectory()

    @Test func updatesFromEightThreadsLoseNoIncrement() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        let hits = DefaultsKey("hits", default: 0)
        let failures = Locked<[String]>([])
        onThreads(8) { _ in
            for _ in 0..<50 {
                do {
                    try store.update(hits) { $0 += 1 }
                } catch {
                    failures.append("\(error)")
                }
            }
        }
        #expect(failures.current.isEmpty)
        #expect(store[hits] == 400)
        #expect(jsonObject(at: url) == ["hits": .number("400")])
    }

    /// 4 processes × 2 threads × 250 increments, each an `update` through `DefaultsTestTool update-many`:
    /// exactly 2,000, and this process, observing, sees the count only grow and end at the total.
    @Test func updatesFromFourProcessesAndTheirThreadsLoseNoIncrement() throws {
        let url = directory.file("shared.json")
        let store = DefaultsStore(fileURL: url)
        let hits = DefaultsKey("hits", default: 0)
        let seen = Locked<[Int]>([])
        let token = store.observe(hits, options: [.new]) { _, change in
            if change.isFromAnotherProcess, let value = change.newValue { seen.append(value) }
        }
        let writers = try (0..<4).map { _ in try startTool(["update-many", url.path, "hits", "250", "2"], executable: testToolPath) }
        for writer in writers {
            #expect(waitUntil(seconds: 300) { !writer.process.isRunning })
            writer.process.waitUntilExit()
            let error = String(decoding: (try? writer.error.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
            #expect(writer.process.terminationStatus == 0, "\(error)")
        }
        #expect(jsonObject(at: url) == ["hits": .number("2000")])
        #expect(waitUntil { seen.current.last == 2000 })
        let values = seen.current
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "not strictly increasing: \(values)")
        #expect(store[hits] == 2000)
        token.invalidate()
    }

    /// The store never reloads here (polling once an hour): its memory says 1 while another process
    /// has written 10. The update reads the file under the lock and adds to 10.
    @Test func updateRunsOnTheFileValueAnotherProcessWrote() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url, watching: .polling(interval: .seconds(3600)))
        let hits = DefaultsKey("hits", default: 0)
        store[hits] = 1
        try store.flush()
        #expect(try runTool(["write", "--file", url.path, "hits", "10"]).status == 0)
        #expect(store[hits] == 1)
        let result = try store.update(hits) { value -> Int in
            value += 1
            return value
        }
        #expect(result == 11)
        #expect(store[hits] == 11)
        #expect(jsonObject(at: url) == ["hits": .number("11")])
    }

    @Test func updateSeesThisProcessesPendingSet() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        let hits = DefaultsKey("hits", default: 0)
        store[hits] = 41
        try store.update(hits) { $0 += 1 }
        #expect(jsonObject(at: url) == ["hits": .number("42")])
    }

    @Test func updateReturnsAfterTheDurableWriteAndNotifiesWithOldAndNewValues() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        let name = DefaultsKey("name", default: "a")
        let other = DefaultsKey("other", default: 0)
        let seen = Locked<[DefaultsChange<String>]>([])
        let token = store.observe(name, options: [.old, .new]) { _, change in seen.append(change) }
        let changes = Locked<[Set<String>]>([])
        let storeToken = store.observeChanges { _, change in changes.append(change.keys) }
        store[other] = 7
        try store.update(name) { $0 += "b" }
        // No flush: the update's write is done, and took the pending set with it.
        #expect(jsonObject(at: url) == ["name": .string("ab"), "other": .number("7")])
        #expect(seen.current == [DefaultsChange(key: "name", newValue: "ab", oldValue: "a", origin: .thisProcess)])
        #expect(changes.current == [["other"], ["name"]])
        token.invalidate()
        storeToken.invalidate()
    }

    @Test func aBodyThatThrowsWritesNothing() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        let hits = DefaultsKey("hits", default: 0)
        store[hits] = 3
        try store.flush()
        let writes = store.fileWriteCount
        #expect(throws: Refusal()) {
            try store.update(hits) { value in
                value = 100
                throw Refusal()
            }
        }
        #expect(store[hits] == 3)
        #expect(store.fileWriteCount == writes)
        #expect(jsonObject(at: url) == ["hits": .number("3")])
    }

    /// A write failure leaves memory as it was: the caller, told it failed, may try again without
    /// counting twice.
    @Test func aFailedWriteThrowsAndChangesNothing() throws {
        let blocker = directory.file("not-a-directory")
        try "x".write(to: blocker, atomically: false, encoding: .utf8)
        let store = DefaultsStore(fileURL: blocker.appendingPathComponent("s.json")) { _ in }
        let hits = DefaultsKey("hits", default: 0)
        let error = #expect(throws: DefaultsError.self) { try store.update(hits) { $0 += 1 } }
        #expect(error?.kind == .writeFailed)
        #expect(error?.errno == ENOTDIR)
        #expect(store[hits] == 0)
    }

    /// A value of another type in the file is not replaced by the key's default plus one.
    @Test func aValueOfTheWrongTypeIsLeftAsItIs() throws {
        let url = directory.file("s.json")
        try #"{"hits": "many"}"#.write(to: url, atomically: true, encoding: .utf8)
        let store = DefaultsStore(fileURL: url) { _ in }
        let error = #expect(throws: DefaultsError.self) { try store.update(DefaultsKey("hits", default: 0)) { $0 += 1 } }
        #expect(error?.kind == .typeMismatch)
        #expect(error?.key == "hits")
        #expect(jsonObject(at: url) == ["hits": .string("many")])
    }

    @Test func aResultThatCannotBeEncodedIsNotWritten() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        let ratio = DefaultsKey("ratio", default: 1.0)
        store[ratio] = 2
        try store.flush()
        let error = #expect(throws: DefaultsError.self) { try store.update(ratio) { $0 = .infinity } }
        #expect(error?.kind == .encodingFailed)
        #expect(error?.key == "ratio")
        #expect(store[ratio] == 2)
        #expect(jsonObject(at: url) == ["ratio": .number("2")])
    }

    /// The body runs holding the file lock: using the store from it would deadlock (a flush waits
    /// for that lock) or act twice. It traps with a message instead.
    @Test func aBodyThatUsesTheStoreTrapsWithAMessage() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let directory = TemporaryDirectory()
            let store = DefaultsStore(fileURL: directory.file("s.json"))
            let hits = DefaultsKey("hits", default: 0)
            try? store.update(hits) { value in
                value = store[hits] + 1
            }
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("DefaultsStore.update: the body used the store"), "\(message)")
    }

    @Test func aBodyThatFlushesTrapsInsteadOfDeadlocking() async {
        await #expect(processExitsWith: .failure) {
            let directory = TemporaryDirectory()
            let store = DefaultsStore(fileURL: directory.file("s.json"))
            try? store.update(DefaultsKey("hits", default: 0)) { value in
                value += 1
                try? store.flush()
            }
        }
    }
}
