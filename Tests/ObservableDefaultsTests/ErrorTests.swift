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

@Suite("Errors")
struct ErrorTests {
    let directory = TemporaryDirectory()

    @Test func aHandBrokenFileIsReportedWithItsPositionAndTheLastGoodValuesStay() throws {
        let url = directory.file("s.json")
        let key = DefaultsKey("speed", default: 1.0)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        store[key] = 1.5
        try store.flush()
        try runShell("printf '{\\n  \"speed\": 2.0,\\n  \"volume\" 3\\n}\\n' > \(shellQuoted(url.path))")
        #expect(waitUntil { !errors.current.isEmpty })
        let error = try #require(errors.current.first)
        #expect(error.kind == .corruptFile)
        #expect(error.path == url.path)
        #expect(error.line == 3)
        #expect(error.column == 12)
        #expect(error.byteOffset == 29)
        #expect(error.reason.contains("expected ':'"))
        #expect(error.description.contains("\(url.path):3:12"))
        #expect(store[key] == 1.5)
    }

    /// Another program rewrites the file in place (truncate, then write, taking no lock) and is caught
    /// half-way by this process's write: the write lets go of the lock, looks again, finds the
    /// finished file and merges into it, instead of copying the half-written file aside and
    /// replacing the other program's values with this process's last good ones.
    ///
    /// The store polls (once an hour), rather than watching with inotify: a reload that the
    /// half-written file's event started would look again after 50 ms and confirm the corruption
    /// before this write, on a loaded machine, and the write would then rightly refuse the file.
    @Test func aWriteWaitsOutAnotherProgramsInPlaceRewrite() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url, watching: .polling(interval: .seconds(3600))) { _ in }
        store[DefaultsKey("volume", default: 0.0)] = 0.5
        try store.flush()
        rewriteInPlace(url.path, "{\"speed\": 2.0,")
        let rewrites = Locked(0)
        store.storage.lock.withLock {
            store.file.state.corruptionSuspectedHook = {
                rewrites.withLock { $0 += 1 }
                rewriteInPlace(url.path, "{\"speed\": 2.0, \"volume\": 0.5}\n")
            }
        }
        store[DefaultsKey("x", default: 0)] = 1
        try store.flush()
        #expect(rewrites.current >= 1)
        #expect(jsonObject(at: url) == ["speed": .number("2.0"), "volume": .number("0.5"), "x": .number("1")])
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!names.contains { $0.contains(".corrupt-") })
    }

    @Test func aValueOfTheWrongTypeReadsAsTheDefaultAndIsReported() throws {
        let url = directory.file("s.json")
        try "{\"speed\": \"fast\"}".write(to: url, atomically: false, encoding: .utf8)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        let key = DefaultsKey("speed", default: 1.0)
        #expect(store[key] == 1.0)
        #expect(store[key] == 1.0)
        #expect(errors.current.count == 1, "\(errors.current)")
        let error = try #require(errors.current.first)
        #expect(error.kind == .typeMismatch)
        #expect(error.key == "speed")
        #expect(error.found == "\"fast\"")
        #expect(error.description.contains("Double"))
        // The value is not lost: the file keeps it, and a key of the right type reads it.
        #expect(store[DefaultsKey("speed", default: "")] == "fast")
    }

    @Test func aMissingDirectoryIsCreated() throws {
        let url = directory.url.appendingPathComponent("a/b/c/s.json")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        store[DefaultsKey("x", default: 0)] = 1
        try store.flush()
        #expect(jsonObject(at: url) == ["x": .number("1")])
        #expect(errors.current.isEmpty)
    }

    /// As root, a directory without write permission is still writable, so the unwritable directory
    /// is made another way that holds for every user: its would-be parent is a regular file.
    @Test func anUnwritableDirectoryIsAnErrorNotACrash() throws {
        let blocker = directory.file("not-a-directory")
        try "x".write(to: blocker, atomically: false, encoding: .utf8)
        let url = blocker.appendingPathComponent("s.json")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        // Nothing is made, or found missing, before a write.
        #expect(errors.current.isEmpty)
        let key = DefaultsKey("x", default: 0)
        store[key] = 5
        #expect(store[key] == 5)
        #expect(throws: DefaultsError.self) { try store.flush() }
        do {
            try store.flush()
        } catch {
            #expect(error.kind == .writeFailed)
            #expect(error.errno == ENOTDIR)
            #expect(error.path == url.path)
        }
        // The change is still pending, not lost: once the directory can be created, it is written.
        #expect(store[key] == 5)
        try FileManager.default.removeItem(at: blocker)
        try store.flush()
        #expect(jsonObject(at: url) == ["x": .number("5")])
    }

    /// A batched write that keeps failing is tried again (with a growing delay) and reported once,
    /// although each try names another temporary file. The failure here holds for every user, root
    /// included: the temporary file's name (the data file's name and a suffix) is too long.
    @Test func aPersistentWriteFailureIsRetriedAndReportedOnce() throws {
        let url = directory.file(String(repeating: "n", count: 245))
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        store[DefaultsKey("x", default: 0)] = 1
        let storage = store.storage
        #expect(waitUntil { storage.lock.withLock { storage.fileBackend!.state.failedWrites >= 3 } })
        #expect(errors.current.count == 1, "\(errors.current)")
        #expect(errors.current.first?.kind == .writeFailed)
        #expect(errors.current.first?.errno == ENAMETOOLONG)
    }

    /// A batched write that failed is tried again without another set or a flush: once the
    /// directory can be made, the change reaches the file.
    @Test func aFailedBatchedWriteIsRetried() throws {
        let blocker = directory.file("not-a-directory")
        try "x".write(to: blocker, atomically: false, encoding: .utf8)
        let url = blocker.appendingPathComponent("s.json")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        store[DefaultsKey("x", default: 0)] = 5
        #expect(waitUntil { store.storage.lock.withLock { store.file.state.failedWrites >= 1 } })
        try FileManager.default.removeItem(at: blocker)
        #expect(waitUntil { jsonObject(at: url) == ["x": .number("5")] })
        #expect(errors.current.allSatisfy { $0.kind == .writeFailed && $0.errno == ENOTDIR })
    }

    /// A NaN is reported when it is set (once while the key keeps such a value), stays in memory,
    /// is not written, and makes `flush()` throw, naming the key, until it is replaced; the other
    /// keys are written meanwhile.
    @Test func aValueThatCannotBeEncodedIsReportedAtSetAndMakesFlushThrowUntilReplaced() throws {
        let url = directory.file("s.json")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        let ratio = DefaultsKey("ratio", default: 1.0)
        store[ratio] = 2
        try store.flush()
        store[ratio] = .nan  // JSON has no NaN
        #expect(errors.current.map(\.kind) == [.encodingFailed])
        #expect(errors.current.first?.key == "ratio")
        store[ratio] = -.infinity
        store[DefaultsKey("fine", default: 0)] = 1
        for _ in 0..<2 {
            let error = #expect(throws: DefaultsError.self) { try store.flush() }
            #expect(error?.kind == .encodingFailed)
            #expect(error?.key == "ratio")
        }
        #expect(errors.current.count == 1, "\(errors.current)")
        #expect(store[ratio] == -.infinity)
        #expect(jsonObject(at: url) == ["ratio": .number("2"), "fine": .number("1")])
        store[ratio] = 3
        try store.flush()
        #expect(jsonObject(at: url) == ["ratio": .number("3"), "fine": .number("1")])
    }

    private struct Curve: Codable, Equatable {
        struct Point: Codable, Equatable {
            var x: Double
            var y: Double
        }
        var name: String
        var points: [Point]
    }

    @Test func aNaNDeepInsideACodableValueIsReportedWithItsPlace() throws {
        let url = directory.file("s.json")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        let curve = DefaultsKey("curve", default: Curve(name: "none", points: []))
        store[curve] = Curve(name: "c", points: [.init(x: 0, y: 1), .init(x: 1, y: .infinity)])
        let error = try #require(errors.current.first)
        #expect(errors.current.count == 1)
        #expect(error.kind == .encodingFailed && error.key == "curve")
        #expect(error.description.contains("inf at points[1].y"), "\(error)")
        #expect(throws: DefaultsError.self) { try store.flush() }
        #expect(jsonObject(at: url)?["curve"] == nil)
        store.batch { $0[curve] = Curve(name: "c", points: []) }
        try store.flush()
        #expect(jsonObject(at: url) == ["curve": .object(["name": .string("c"), "points": .array([])])])
    }

    /// A directory that cannot be made is reported by the store's first write, and neither again by
    /// its other writes nor at exit (when the store is gone, on standard error). In another process, which
    /// exits.
    @Test func aWriteFailureIsReportedOncePerCause() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let directory = TemporaryDirectory()
            let blocker = directory.file("not-a-directory")
            try? "x".write(to: blocker, atomically: false, encoding: .utf8)
            do {
                let store = DefaultsStore(fileURL: blocker.appendingPathComponent("s.json"))
                store[DefaultsKey("x", default: 0)] = 1
                _ = waitUntil { store.storage.lock.withLock { store.file.state.failedWrites >= 1 } }
                #expect(throws: DefaultsError.self) { try store.flush() }
            }
            exit(0)
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.components(separatedBy: "cannot write defaults file").count - 1 == 1, "\(message)")
    }

    // Root ignores permissions; see `anUnwritableDirectoryIsAnErrorNotACrash` for every user.
    @Test(.enabled(if: geteuid() != 0, "root ignores directory permissions"))
    func aReadOnlyDirectoryIsAnErrorForUsersWhomPermissionsBind() throws {
        let readOnly = directory.url.appendingPathComponent("ro")
        try FileManager.default.createDirectory(at: readOnly, withIntermediateDirectories: false)
        chmod(readOnly.path, 0o500)
        defer { chmod(readOnly.path, 0o700) }
        let store = DefaultsStore(fileURL: readOnly.appendingPathComponent("s.json")) { _ in }
        store[DefaultsKey("x", default: 0)] = 1
        #expect(throws: DefaultsError.self) { try store.flush() }
    }

    /// A full disk, made real for one child process: `ulimit -f 2048` fails every write past 1 or 2 MiB
    /// (EFBIG, as ENOSPC would; no lower limit, which the thread sanitizer's runtime does not survive).
    /// The copy aside of a 4 MiB broken file (`write --replace-corrupt`) is created, written in part,
    /// and must not be left behind, neither by the write nor by the exit's flush.
    @Test(.tags(.processes)) func aCopyAsideThatCannotBeWrittenLeavesNothingBehind() throws {
        let url = directory.file("s.json")
        try #"{"a": 1}"#.write(to: url, atomically: true, encoding: .utf8)
        // The tool finds the file good, waits for the lock the test holds, and finds it broken then.
        let lock = try HeldLock(url.path)
        // SIGXFSZ ignored, so that the write fails instead of killing the process.
        let script =
            "ulimit -f 2048; trap '' XFSZ; exec \(shellQuoted(toolPath)) write --replace-corrupt --file \(shellQuoted(url.path)) k 1"
        let tool = try startTool(["-c", script], executable: "/bin/sh")
        var message = waitForText("waiting for another process", in: tool.error)
        let broken = "{broken" + String(repeating: " ", count: 4 << 20)
        try broken.write(to: url, atomically: true, encoding: .utf8)
        lock.release()
        tool.process.waitUntilExit()
        message += String(decoding: (try? tool.error.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
        #expect(tool.process.terminationStatus == 1)
        #expect(message.contains(".corrupt-"), "\(message)")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!names.contains { $0.contains(".corrupt-") }, "\(names)")
        #expect(contents(of: url) == broken)
    }

    /// Batched writes that keep failing on a full disk try the copy of one content with a key twice
    /// (kept before a write drops one of its values) twice, not at each retry; a new content is
    /// tried again.
    @Test func theCopyOfOneContentWithADuplicateKeyIsTriedTwiceAtMost() throws {
        let url = directory.file("s.json")
        try #"{"d": 1, "d": 2}"#.write(to: url, atomically: true, encoding: .utf8)
        let store = DefaultsStore(fileURL: url) { _ in }
        let attempts = Locked(0)
        store.storage.lock.withLock {
            store.file.state.copyAsideHook = { _ throws(DefaultsError) in
                attempts.withLock { $0 += 1 }
                throw DefaultsError(.writeFailed, location: .file(path: url.path), errno: ENOSPC, reason: "no space left on device")
            }
        }
        store[DefaultsKey("k", default: 0)] = 1
        #expect(waitUntil { store.storage.lock.withLock { store.file.state.failedWrites >= 4 } })
        #expect(attempts.current == 2)
        #expect(throws: DefaultsError.self) { try store.flush() }
        #expect(attempts.current == 2)
        try #"{"d": 1, "d": 3}"#.write(to: url, atomically: true, encoding: .utf8)
        #expect(throws: DefaultsError.self) { try store.flush() }
        #expect(attempts.current == 3)
        store.storage.lock.withLock { store.file.state.copyAsideHook = nil }
    }
}
