import Foundation
@testable import ObservableDefaults
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Bounded resources", .tags(.processes))
struct ResourceTests {
    let directory = TemporaryDirectory()

    #if os(Linux)
    /// 300 stores on 300 files, each written: the process keeps its main thread, the watcher's
    /// thread (inotify and polling), the writer and Dispatch's timer thread, with one thread of
    /// margin for Dispatch's pool; and a few descriptors (inotify, the wake-up pipe, Dispatch's,
    /// one write's lock file, temporary file and directory). Measured in a child process, whose
    /// threads are its own (`DefaultsTestTool resources`).
    @Test(arguments: [false, true])
    func manyStoresShareAFewThreadsAndDescriptors(polling: Bool) throws {
        let result = try runTool(["resources", directory.path + "/s", "300"] + (polling ? ["polling"] : []), executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        let figures = Dictionary(
            uniqueKeysWithValues: result.output.split(whereSeparator: \.isWhitespace).compactMap { field -> (String, Int)? in
                let parts = field.split(separator: "=")
                guard parts.count == 2, let value = Int(parts[1]) else { return nil }
                return (String(parts[0]), value)
            })
        let threads = try #require(figures["threads-peak"])
        let descriptors = try #require(figures["descriptors-peak"])
        let descriptorsBefore = try #require(figures["descriptors-before"])
        #expect(threads <= 1 + 4 + 1, "\(result.output)")
        #expect(descriptors <= descriptorsBefore + 8, "\(result.output)")
        #expect(jsonObject(at: directory.file("s-299.json")) == ["x": .number("299")])
    }
    #endif

    /// Every store's file work runs on one thread: a store whose lock file another process holds
    /// must not keep it, or no other store could write until that process lets go.
    @Test func aLockHeldElsewhereDoesNotHoldUpTheOtherStoresWrites() throws {
        let a = DefaultsStore(fileURL: directory.file("a.json"))
        let b = DefaultsStore(fileURL: directory.file("b.json"))
        let lock = try HeldLock(directory.path + "/a.json")
        a[DefaultsKey("x", default: 0)] = 1
        try #require(waitUntil { a.storage.lock.withLock { a.file.state.lockWaits >= 1 } })
        b[DefaultsKey("x", default: 0)] = 2
        let flushed = finishes { try? b.flush() }
        #expect(flushed, "a write waited for another store's lock")
        #expect(jsonObject(at: directory.file("b.json")) == ["x": .number("2")])
        #expect(jsonObject(at: directory.file("a.json")) == nil)
        lock.release()
        try a.flush()
        #expect(jsonObject(at: directory.file("a.json")) == ["x": .number("1")])
    }
}
