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

/// Files that are not what they seem: FIFOs, devices, symbolic links.
@Suite("Files that are not what they seem", .tags(.processes))
struct FileKindTests {
    let directory = TemporaryDirectory()

    func lstatType(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : nil
    }

    // MARK: FIFOs and devices

    @Test func aFIFOIsRefusedWithoutBlockingAndStaysAFIFO() throws {
        let path = directory.path + "/prefs.json"
        try #require(mkfifo(path, 0o644) == 0)
        let errors = Locked<[DefaultsError]>([])
        let flushError = Locked<DefaultsError?>(nil)
        let finished = finishes {
            let store = DefaultsStore(fileURL: URL(fileURLWithPath: path)) { errors.append($0) }
            store[DefaultsKey("x", default: 0)] = 1
            do throws(DefaultsError) {
                try store.flush()
            } catch {
                flushError.withLock { $0 = error }
            }
        }
        #expect(finished, "a store on a FIFO blocked")
        try #require(finished)
        let error = try #require(errors.current.first)
        #expect(error.kind == .unsupportedFile)
        #expect(error.description.contains("it is a FIFO (named pipe), not a regular file"), "\(error)")
        #expect(flushError.current?.kind == .unsupportedFile)
        #expect(lstatType(path) == S_IFIFO)
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/.prefs.json.lock"))
    }

    @Test(arguments: [["read"], ["read", "k"], ["write", "k", "1"], ["delete", "k"], ["watch"]])
    func everyCommandRefusesAFIFO(command: [String]) throws {
        let path = directory.path + "/prefs.json"
        try #require(mkfifo(path, 0o644) == 0)
        let result = try runTool([command[0], "--file", path] + command.dropFirst(), seconds: 20)
        #expect(result.status == 1, "\(result.error)")
        #expect(result.error.contains("FIFO (named pipe), not a regular file"), "\(result.error)")
        #expect(lstatType(path) == S_IFIFO)
    }

    #if os(Linux)
    @Test func aDeviceIsRefusedInsteadOfReadForever() throws {
        let result = try runTool(["read", "--file", "/dev/zero"], seconds: 20)
        #expect(result.status == 1)
        #expect(result.error.contains("it is a character device, not a regular file"), "\(result.error)")
    }
    #endif

    // MARK: Symbolic links

    /// `config/prefs.json -> ../dotfiles/prefs.json`, as dotfile managers make it.
    func makeLinkedFile(_ text: String? = #"{"a": 1}"#) throws -> (link: URL, target: URL) {
        try FileManager.default.createDirectory(atPath: directory.path + "/config", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory.path + "/dotfiles", withIntermediateDirectories: true)
        let target = URL(fileURLWithPath: directory.path + "/dotfiles/prefs.json")
        if let text { try text.write(to: target, atomically: true, encoding: .utf8) }
        let link = URL(fileURLWithPath: directory.path + "/config/prefs.json")
        try #require(symlink("../dotfiles/prefs.json", link.path) == 0)
        return (link, target)
    }

    @Test func aWriteThroughALinkReplacesItsTargetAndKeepsTheLink() throws {
        let (link, target) = try makeLinkedFile()
        let store = DefaultsStore(fileURL: link) { Issue.record("\($0)") }
        #expect(store[DefaultsKey("a", default: 0)] == 1)
        store[DefaultsKey("b", default: 0)] = 2
        try store.flush()
        #expect(lstatType(link.path) == S_IFLNK)
        #expect(jsonObject(at: target) == ["a": .number("1"), "b": .number("2")])
        // The lock file and the temporary file live beside the target, which every writer of it shares.
        #expect(FileManager.default.fileExists(atPath: directory.path + "/dotfiles/.prefs.json.lock"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/config") == ["prefs.json"])
    }

    @Test func aWriteToTheTargetReachesAnObserverOfTheLink() throws {
        let (link, target) = try makeLinkedFile()
        let store = DefaultsStore(fileURL: link) { Issue.record("\($0)") }
        let seen = Locked<[Int?]>([])
        let token = store.observe(DefaultsKey("a", default: 0), options: [.new]) { _, change in seen.append(change.newValue) }
        let result = try runTool(["write", "--file", target.path, "a", "5"])
        #expect(result.status == 0, "\(result.error)")
        #expect(waitUntil { seen.current == [5] })
        token.invalidate()
    }

    @Test func aLinkAndItsTargetShareOneStorage() throws {
        let (link, target) = try makeLinkedFile()
        let throughLink = DefaultsStore(fileURL: link)
        let direct = DefaultsStore(fileURL: target)
        #expect(throughLink.storage === direct.storage)
        let seen = Locked<[DefaultsChange<Int>]>([])
        let token = direct.observe(DefaultsKey("a", default: 0), options: [.new]) { _, change in seen.append(change) }
        throughLink[DefaultsKey("a", default: 0)] = 7
        #expect(seen.current.map(\.newValue) == [7])
        #expect(seen.current.first?.origin == .thisProcess)
        token.invalidate()
    }

    @Test func aRepointedLinkIsFollowedAtTheNextReload() throws {
        let (link, _) = try makeLinkedFile()
        let other = URL(fileURLWithPath: directory.path + "/dotfiles/other.json")
        try #"{"a": 2}"#.write(to: other, atomically: true, encoding: .utf8)
        let store = DefaultsStore(fileURL: link) { Issue.record("\($0)") }
        let seen = Locked<[Int?]>([])
        let token = store.observe(DefaultsKey("a", default: 0), options: [.new]) { _, change in seen.append(change.newValue) }
        // `ln -sfn` replaces the link by a rename, as dotfile managers do.
        try runShell("cd \(shellQuoted(directory.path + "/config")) && ln -s ../dotfiles/other.json new && mv -T new prefs.json")
        #expect(waitUntil { seen.current == [2] })
        // Writes now go to the new target, and its changes are watched.
        store[DefaultsKey("b", default: 0)] = 3
        try store.flush()
        #expect(jsonObject(at: other) == ["a": .number("2"), "b": .number("3")])
        #expect(try runTool(["write", "--file", other.path, "a", "4"]).status == 0)
        #expect(waitUntil { seen.current == [2, 4] })
        token.invalidate()
    }

    @Test func aDanglingLinkIsAClearErrorAndNothingIsCreatedThroughIt() throws {
        let (link, target) = try makeLinkedFile(nil)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: link) { errors.append($0) }
        #expect(errors.current.map(\.kind) == [.unsupportedFile])
        #expect(errors.current.first?.reason.contains("symbolic link to ../dotfiles/prefs.json, which does not exist") == true)
        store[DefaultsKey("b", default: 0)] = 2
        #expect(throws: DefaultsError.self) { try store.flush() }
        let tool = try runTool(["write", "--file", link.path, "b", "2"])
        #expect(tool.status == 1)
        #expect(tool.error.contains("which does not exist"), "\(tool.error)")
        #expect(!FileManager.default.fileExists(atPath: target.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/dotfiles").isEmpty)
        #expect(lstatType(link.path) == S_IFLNK)
    }
}
