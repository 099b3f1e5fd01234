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

@Suite("Across processes", .tags(.processes))
struct CrossProcessTests {
    let directory = TemporaryDirectory()

    @Test func anotherProcessWriteReachesTheObserverWithOldAndNewValues() throws {
        let url = directory.file("player.json")
        let key = DefaultsKey("playbackSpeed", default: 0.0)
        let store = DefaultsStore(fileURL: url)
        store[key] = 1.0
        try store.flush()
        let seen = Locked<[DefaultsChange<Double>]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in seen.append(change) }

        let result = try runTool(["write", "--file", url.path, "playbackSpeed", "2.5"])
        #expect(result.status == 0, "\(result.error)")
        #expect(waitUntil { !seen.current.isEmpty })
        #expect(seen.current == [DefaultsChange(key: "playbackSpeed", newValue: 2.5, oldValue: 1.0, origin: .anotherProcess)])
        #expect(store[key] == 2.5)
        token.invalidate()
    }

    @Test func thisProcessWritesAreNotReportedBackAsForeign() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        let records = Locked<[(String, DefaultsChangeOrigin)]>([])
        let token = store.observeJSON { key, _, _, origin in records.append((key, origin)) }
        let counter = DefaultsKey("counter", default: 0)
        for value in 1...10 {
            store[counter] = value
            if value.isMultiple(of: 3) { try store.flush() }
        }
        try store.flush()
        #expect(try runTool(["write", "--file", url.path, "done", "true"]).status == 0)
        #expect(waitUntil { records.current.contains { $0.0 == "done" } })
        // Give any late echo of this process's own writes the same chance to arrive.
        #expect(try runTool(["write", "--file", url.path, "done2", "true"]).status == 0)
        #expect(waitUntil { records.current.contains { $0.0 == "done2" } })
        let current = records.current
        #expect(current.filter { $0.1 == .thisProcess }.map(\.0) == Array(repeating: "counter", count: 10))
        #expect(current.filter { $0.1 == .anotherProcess }.map(\.0) == ["done", "done2"])
        token.invalidate()
    }

    /// The watched directory is removed (or moved away), then made again by another process's
    /// write: the store watches the new directory and sees that write.
    @Test(arguments: ["rm -rf", "mv"])
    func aWriteInARecreatedDirectoryIsNoticed(removal: String) throws {
        let folder = directory.path + "/config"
        let url = URL(fileURLWithPath: folder + "/s.json")
        let key = DefaultsKey("speed", default: 0.0)
        let store = DefaultsStore(fileURL: url)
        store[key] = 1.0
        try store.flush()
        let seen = Locked<[Double?]>([])
        let token = store.observe(key, options: [.new]) { _, change in
            if change.isFromAnotherProcess { seen.append(change.newValue) }
        }
        let command = removal == "mv" ? "mv \(shellQuoted(folder)) \(shellQuoted(folder + ".old"))" : "rm -rf \(shellQuoted(folder))"
        try runShell(command)
        // The file is gone: the key reads as absent (its default).
        #expect(waitUntil { seen.current == [0.0] }, "\(seen.current), \(store[key]), \(store.file.watchMechanisms)")
        let result = try runTool(["write", "--file", url.path, "speed", "2.5"])
        #expect(result.status == 0, "\(result.error)")
        #expect(waitUntil { seen.current.last == 2.5 })
        #expect(store[key] == 2.5)
        token.invalidate()
    }

    /// `mv s.json s.json.bak` (IN_MOVED_FROM for the file's name) is a removal of every key.
    @Test func aFileRenamedAwayIsNoticed() throws {
        let url = directory.file("s.json")
        let key = DefaultsKey("speed", default: 0.0)
        let store = DefaultsStore(fileURL: url)
        store[key] = 1.0
        try store.flush()
        let seen = Locked<[Double?]>([])
        let token = store.observe(key, options: [.new]) { _, change in
            if change.isFromAnotherProcess { seen.append(change.newValue) }
        }
        try runShell("mv \(shellQuoted(url.path)) \(shellQuoted(url.path + ".bak"))")
        #expect(waitUntil { seen.current == [0.0] })
        #expect(store[key] == 0.0)
        token.invalidate()
    }

    /// A writer killed mid-write leaves its temporary file; the next write (under the lock) removes
    /// it once its process is gone and it is old enough, and keeps a live or recent writer's.
    @Test func aKilledWritersTemporaryFileIsSweptByTheNextWrite() throws {
        let url = directory.file("s.json")
        let exited = Process()
        exited.executableURL = URL(fileURLWithPath: "/bin/true")
        try exited.run()
        exited.waitUntilExit()
        let deadPID = exited.processIdentifier
        let hourAgo = Date().addingTimeInterval(-3600)
        func temporary(_ pid: Int32, old: Bool) throws -> String {
            let path = directory.path + "/.s.json.tmp-\(pid)-12345"
            try "{\"half".write(toFile: path, atomically: false, encoding: .utf8)
            if old { try FileManager.default.setAttributes([.modificationDate: hourAgo], ofItemAtPath: path) }
            return path
        }
        let abandoned = try temporary(deadPID, old: true)
        let recent = try temporary(deadPID + 1_000_000, old: false)
        let live = try temporary(getppid(), old: true)
        let store = DefaultsStore(fileURL: url)
        store[DefaultsKey("x", default: 0)] = 1
        try store.flush()
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(FileManager.default.fileExists(atPath: recent))
        #expect(FileManager.default.fileExists(atPath: live))
        #expect(jsonObject(at: url) == ["x": .number("1")])
    }

    @Test func anEditorStyleReplaceIsNoticed() throws {
        let url = directory.file("s.json")
        let key = DefaultsKey("theme", default: "light")
        let store = DefaultsStore(fileURL: url)
        store[key] = "light"
        try store.flush()
        let seen = Locked<[DefaultsChange<String>]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in seen.append(change) }
        let temporary = directory.path + "/.s.json.swp"
        try runShell(
            "printf '{\"theme\": \"dark\"}\\n' > \(shellQuoted(temporary)) && mv \(shellQuoted(temporary)) \(shellQuoted(url.path))")
        #expect(waitUntil { !seen.current.isEmpty })
        #expect(seen.current == [DefaultsChange(key: "theme", newValue: "dark", oldValue: "light", origin: .anotherProcess)])
        token.invalidate()
    }

    @Test func anInPlaceRewriteIsNoticed() throws {
        let url = directory.file("s.json")
        let key = DefaultsKey("size", default: 10)
        let store = DefaultsStore(fileURL: url)
        store[key] = 12
        try store.flush()
        let seen = Locked<[DefaultsChange<Int>]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in seen.append(change) }
        try runShell("printf '{\"size\": 14}' > \(shellQuoted(url.path))")
        #expect(waitUntil { !seen.current.isEmpty })
        #expect(seen.current == [DefaultsChange(key: "size", newValue: 14, oldValue: 12, origin: .anotherProcess)])
        token.invalidate()
    }

    @Test func aDeletedKeyIsReportedAsItsDefault() throws {
        let url = directory.file("s.json")
        let key = DefaultsKey("name", default: "none")
        let store = DefaultsStore(fileURL: url)
        store[key] = "ada"
        try store.flush()
        let seen = Locked<[DefaultsChange<String>]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in seen.append(change) }
        #expect(try runTool(["delete", "--file", url.path, "name"]).status == 0)
        #expect(waitUntil { !seen.current.isEmpty })
        #expect(
            seen.current == [DefaultsChange(key: "name", newValue: "none", oldValue: "ada", origin: .anotherProcess, layer: .defaultValue)])
        token.invalidate()
    }

    @Test func concurrentWritersInFourProcessesLoseNoUpdate() throws {
        let url = directory.file("shared.json")
        let store = DefaultsStore(fileURL: url)
        let writers = try ["p0", "p1", "p2", "p3"].map { prefix in
            // 500 sets each, made durable every 10: 50 lock-merge-rename cycles per process.
            try startTool(["write-many", url.path, prefix, "500", "10"], executable: testToolPath)
        }
        // This process writes its own keys at the same time.
        for index in 0..<100 {
            store[DefaultsKey("local-\(index)", default: -1)] = index
            if index.isMultiple(of: 10) { try store.flush() }
        }
        try store.flush()
        for writer in writers {
            #expect(waitUntil(seconds: 120) { !writer.process.isRunning })
            writer.process.waitUntilExit()
            #expect(writer.process.terminationStatus == 0)
        }
        let file = try #require(jsonObject(at: url))
        #expect(file.count == 4 * 500 + 100)
        for prefix in ["p0", "p1", "p2", "p3"] {
            for index in 0..<500 where file["\(prefix)-\(index)"] != .number(String(index)) {
                Issue.record("\(prefix)-\(index) is \(String(describing: file["\(prefix)-\(index)"])), expected \(index)")
                break
            }
        }
        for index in 0..<100 {
            #expect(file["local-\(index)"] == .number(String(index)))
        }
        // The observing process's memory converges on the file.
        #expect(waitUntil { store[DefaultsKey("p3-499", default: -1)] == 499 && store[DefaultsKey("p0-499", default: -1)] == 499 })
    }

    @Test func aWriterKilledMidWritesLeavesAFileWithOnlyCompleteWrites() throws {
        let url = directory.file("killed.json")
        let writer = try startTool(["write-many", url.path, "k", "1000000", "1"], executable: testToolPath)
        // Read the file while it is being replaced: every version must parse.
        var versions = 0
        let reachedEnough = waitUntil(seconds: 60) {
            guard let text = contents(of: url), !text.isEmpty else { return false }
            guard case .object(let values)? = try? JSONValue.parse(text) else {
                Issue.record("a reader saw a torn file: \(text.prefix(200))")
                return true
            }
            versions += 1
            return values.count >= 30
        }
        #expect(reachedEnough)
        kill(writer.process.processIdentifier, SIGKILL)
        writer.process.waitUntilExit()
        #expect(writer.process.terminationReason == .uncaughtSignal)
        let file = try #require(jsonObject(at: url))
        // Writes are flushed one by one: the file holds exactly the keys k-0 … k-(n-1), each complete.
        #expect(file.count >= 30)
        for index in 0..<file.count {
            #expect(file["k-\(index)"] == .number(String(index)))
        }
        #expect(versions > 0)
        // Another process can go on writing the file.
        let store = DefaultsStore(fileURL: url)
        store[DefaultsKey("after", default: false)] = true
        try store.flush()
        #expect(jsonObject(at: url)?["after"] == .bool(true))
    }

    @Test func pollingNoticesWritesWhereWatchingIsNotUsed() throws {
        let url = directory.file("polled.json")
        let key = DefaultsKey("mode", default: "a")
        let store = DefaultsStore(fileURL: url, watching: .polling(interval: .milliseconds(20)))
        #expect(store.storage.lock.withLock { store.file.subscription == nil })
        let seen = Locked<[DefaultsChange<String>]>([])
        let token = store.observe(key, options: [.old, .new]) { _, change in seen.append(change) }
        #expect(try runTool(["write", "--file", url.path, "mode", "b"]).status == 0)
        #expect(waitUntil { !seen.current.isEmpty })
        #expect(seen.current == [DefaultsChange(key: "mode", newValue: "b", oldValue: "a", origin: .anotherProcess)])
        token.invalidate()
    }
}
