import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("File watching")
struct WatcherTests {
    let directory = TemporaryDirectory()

    #if os(Linux)
    /// Fills a watcher's kernel queue (`fs.inotify.max_queued_events`) before it reads anything, then
    /// replaces the watched file: that event is dropped, and only the overflow can tell the
    /// subscription to reload.
    @Test func aQueueOverflowIsReportedToEverySubscription() throws {
        let watcher = FileWatcher()
        defer { watcher.stop() }
        let events = Locked<[FileWatcher.Event]>([])
        let subscription = try #require(watcher.watch(directory: directory.path, name: "s.json") { events.append($0) })
        let limit =
            (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 16_384
        try #require(limit <= 200_000, "max_queued_events is \(limit): too many events to overflow in a test")
        // Identical consecutive events are coalesced by the kernel: alternate two names.
        let others = [directory.path + "/other-a", directory.path + "/other-b"]
        // Twice the limit: a margin for events the kernel may not queue one by one.
        for index in 0...(2 * limit) {
            let descriptor = open(others[index & 1], O_WRONLY | O_CREAT, 0o644)
            close(descriptor)
        }
        try runShell(
            "printf '{}' > \(shellQuoted(directory.path + "/s.tmp")) && mv \(shellQuoted(directory.path + "/s.tmp")) \(shellQuoted(directory.path + "/s.json"))"
        )
        watcher.start()
        #expect(waitUntil { events.current.contains(.overflow) })
        #expect(!events.current.contains(.changed))
        subscription.cancel()
    }

    @Test func aWatcherReportsOnlyItsFilesName() throws {
        let watcher = FileWatcher()
        defer { watcher.stop() }
        watcher.start()
        let events = Locked<[FileWatcher.Event]>([])
        let subscription = try #require(watcher.watch(directory: directory.path, name: "s.json") { events.append($0) })
        try runShell("printf x > \(shellQuoted(directory.path + "/other.json"))")
        try runShell("printf x > \(shellQuoted(directory.path + "/s.json"))")
        #expect(waitUntil { !events.current.isEmpty })
        #expect(events.current == [.changed])
        subscription.cancel()
    }
    #endif

    @Test func anOverflowReloadsTheWholeFileAndReportsEachChangedKey() throws {
        // What the storage does with an overflow (or any event): read the whole file and diff it.
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url, watching: .polling(interval: .seconds(3600)))
        store[DefaultsKey("a", default: 0)] = 1
        store[DefaultsKey("b", default: 0)] = 2
        try store.flush()
        let seen = Locked<[String]>([])
        let token = store.observeJSON { key, old, new, origin in
            seen.append("\(key) \(old?.compactText ?? "-") \(new?.compactText ?? "-") \(origin)")
        }
        try #"{"a": 1, "b": 3, "c": 4}"#.write(to: url, atomically: true, encoding: .utf8)
        store.file.queue.sync { store.file.reload(store.storage) }
        #expect(seen.current.sorted() == ["b 2 3 anotherProcess", "c - 4 anotherProcess"])
        token.invalidate()
    }

    /// Another process's values for two keys are applied together and delivered one after the
    /// other; while the first is delivered, a handler sets both keys here. The second key's foreign
    /// change, older than that set, must not be delivered after it: every observer ends on the
    /// value the store holds.
    @Test func anotherProcesssChangeIsNotDeliveredAfterALaterSetOfTheSameKey() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url, watching: .polling(interval: .seconds(3600)))
        let a = DefaultsKey("a", default: 0)
        let b = DefaultsKey("b", default: 0)
        store[a] = 1
        store[b] = 1
        try store.flush()
        let lastSeen = Locked<[String: Int]>([:])
        let tokens = [a, b].map { key in
            store.observe(key, options: [.new]) { _, change in
                lastSeen.withLock { $0[change.key] = change.newValue }
            }
        }
        let reacted = Locked(false)
        let reaction = store.observeJSON { _, _, _, origin in
            guard origin == .anotherProcess,
                reacted.withLock({ first in
                    defer { first = true }
                    return !first
                })
            else { return }
            store[a] = 3
            store[b] = 3
        }
        try #"{"a": 2, "b": 2}"#.write(to: url, atomically: true, encoding: .utf8)
        store.file.queue.sync { store.file.reload(store.storage) }
        #expect(reacted.current)
        #expect(store[a] == 3 && store[b] == 3)
        #expect(lastSeen.current == ["a": 3, "b": 3])
        reaction.invalidate()
        for token in tokens { token.invalidate() }
    }

    /// The poller remembers the file this process wrote, not the file found after the lock file was
    /// unlocked: another process's write in between (made here from the error handler, which is
    /// called after the unlock) must still be seen by the next poll.
    @Test func aPollAfterThisProcesssWriteSeesAnotherProcesssWriteRightAfterIt() throws {
        let url = directory.file("s.json")
        try "{\"a\": 1,,}".write(to: url, atomically: false, encoding: .utf8)
        let foreignWrites = Locked(0)
        let store = DefaultsStore(fileURL: url, watching: .polling(interval: .seconds(3600))) { error in
            guard error.corruptCopyPath != nil,
                foreignWrites.withLock({ count in
                    defer { count += 1 }
                    return count == 0
                })
            else { return }
            try? #"{"a": 7, "b": 1}"#.write(to: url, atomically: true, encoding: .utf8)
        }
        let seen = Locked<[Int?]>([])
        let token = store.observe(DefaultsKey("a", default: 0), options: [.new]) { _, change in
            if change.isFromAnotherProcess { seen.append(change.newValue) }
        }
        store[DefaultsKey("b", default: 0)] = 1
        try store.replaceCorruptFile()
        #expect(foreignWrites.current == 1)
        store.file.queue.sync { store.file.poll(store.storage) }
        #expect(seen.current == [7])
        #expect(store[DefaultsKey("a", default: 0)] == 7)
        token.invalidate()
    }
}
