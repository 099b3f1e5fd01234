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

/// A file that does not parse (a typo in a hand-edited file) is never replaced unasked: the store
/// keeps its changes in memory until the file parses again.
@Suite("Files that do not parse")
struct CorruptFileTests {
    let directory = TemporaryDirectory()

    private func copiesAside() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".corrupt-") }
    }

    @Test func aStoreNeverReplacesAFileItCannotParseAndWritesOnceItParsesAgain() throws {
        let url = directory.file("f.json")
        let broken = #"{"a": 1,}"#
        try broken.write(to: url, atomically: false, encoding: .utf8)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        #expect(errors.current.map(\.kind) == [.corruptFile])
        #expect(errors.current.first?.keepsLastGoodValues == false)
        #expect(errors.current.first?.description.contains("keeping the last good values") == false)
        let port = DefaultsKey("port", default: 0)
        let seen = Locked<[Int?]>([])
        let token = store.observe(port, options: [.new]) { _, change in seen.append(change.newValue) }
        store[port] = 7000
        #expect(seen.current == [7000])
        let thrown = #expect(throws: DefaultsError.self) { try store.flush() }
        #expect(thrown?.kind == .corruptFile)
        #expect(thrown?.path == url.path && thrown?.line == 1 && thrown?.column == 9)
        #expect(thrown?.corruptCopyPath == nil)
        var bodyRan = false
        let refused = #expect(throws: DefaultsError.self) {
            try store.update(port) { value in
                bodyRan = true
                value += 1
            }
        }
        #expect(refused?.kind == .corruptFile)
        #expect(!bodyRan)
        #expect(store[port] == 7000)
        #expect(contents(of: url) == broken)
        #expect(try copiesAside().isEmpty)
        // The operator fixes the file: the watcher sees it, and the store merges its change over the
        // file's keys, without a flush.
        try #"{"a": 1, "b": 2}"#.write(to: url, atomically: true, encoding: .utf8)
        #expect(waitUntil { jsonObject(at: url) == ["a": .number("1"), "b": .number("2"), "port": .number("7000")] })
        // The write that merges the pending change replaces the file, then applies the file's keys
        // in memory (`commit`): the store reads them a moment after the file shows them.
        #expect(waitUntil { store[DefaultsKey("b", default: 0)] == 2 })
        // Reported once: at init (the batched write and the throws count as told).
        #expect(errors.current.map(\.kind) == [.corruptFile], "\(errors.current)")
        token.invalidate()
    }

    /// A file broken after the store read a good version keeps those values, and says so.
    @Test func aFileBrokenLaterKeepsTheLastGoodValuesAndIsNotReplaced() throws {
        let url = directory.file("f.json")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        let a = DefaultsKey("a", default: 0)
        store[a] = 1
        try store.flush()
        try #"{"a": 2,"#.write(to: url, atomically: true, encoding: .utf8)
        store[DefaultsKey("c", default: 0)] = 3
        let thrown = #expect(throws: DefaultsError.self) { try store.flush() }
        #expect(thrown?.keepsLastGoodValues == true)
        #expect(thrown?.description.contains("keeping the last good values") == true, "\(String(describing: thrown))")
        #expect(store[a] == 1)
        #expect(contents(of: url) == #"{"a": 2,"#)
        try #"{"a": 2}"#.write(to: url, atomically: true, encoding: .utf8)
        try store.flush()
        #expect(jsonObject(at: url) == ["a": .number("2"), "c": .number("3")])
        #expect(errors.current.filter { $0.kind == .corruptFile }.count <= 1, "\(errors.current)")
    }

    /// A store let go while its changes wait for the file to parse: they are not dropped with it,
    /// but written once the operator fixes the file.
    @Test func changesWaitingForTheFileToParseOutliveTheStore() throws {
        let url = directory.file("f.json")
        try #"{"a": 1,}"#.write(to: url, atomically: false, encoding: .utf8)
        do {
            let store = DefaultsStore(fileURL: url) { _ in }
            store[DefaultsKey("port", default: 0)] = 7000
            #expect(throws: DefaultsError.self) { try store.flush() }
            // Not a timing claim: lets the batched write the set scheduled (5 ms later, holding the
            // storage until it runs) meet the broken file too, so that only the wait keeps it.
            Thread.sleep(forTimeInterval: 0.2)
        }
        try #"{"a": 1}"#.write(to: url, atomically: true, encoding: .utf8)
        #expect(waitUntil { jsonObject(at: url) == ["a": .number("1"), "port": .number("7000")] })
    }

    /// The explicit choice: copy aside (with the file's permission bits: a 0600 file's copy must not
    /// be readable by everyone), then replace with the last good values and the pending changes.
    @Test func replaceCorruptFileCopiesItAsideWithItsPermissionsThenReplacesIt() throws {
        let url = directory.file("f.json")
        let broken = #"{"secret": "x",,}"#
        try broken.write(to: url, atomically: false, encoding: .utf8)
        #expect(chmod(url.path, 0o600) == 0)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        store[DefaultsKey("volume", default: 0.0)] = 0.5
        let copy = try #require(try store.replaceCorruptFile())
        #expect(copy.hasPrefix(url.path + ".corrupt-"))
        #expect(contents(of: URL(fileURLWithPath: copy)) == broken)
        var info = stat()
        #expect(stat(copy, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(jsonObject(at: url) == ["volume": .number("0.5")])
        #expect(errors.current.last?.corruptCopyPath == copy)
        // Nothing left to replace: the next call is a flush.
        #expect(try store.replaceCorruptFile() == nil)
    }

    /// At exit, changes that could not be written are lost: said once, with how many and which keys,
    /// on standard error for a store without a handler (and the file is left as it was).
    @Test(.tags(.processes)) func changesPendingAtExitAreReportedLostOnceOnStandardError() throws {
        let url = directory.file("f.json")
        let broken = #"{"a": 1,}"#
        try broken.write(to: url, atomically: false, encoding: .utf8)
        let result = try runTool(["errors", url.path, "port", "7000", "host", "\"x\""], executable: testToolPath)
        #expect(result.status == 0)
        let lines = result.error.split(separator: "\n")
        #expect(lines.count == 2, "\(result.error)")
        #expect(lines.first?.contains("\(url.path):1:9 (byte 8): corrupt defaults file") == true, "\(result.error)")
        #expect(lines.last?.contains("exits with 2 changes not written (keys 'host', 'port'), now lost") == true, "\(result.error)")
        #expect(contents(of: url) == broken)
        #expect(try copiesAside().isEmpty)
    }

    /// The same through the handler, and nothing on standard error.
    @Test(.tags(.processes)) func changesPendingAtExitAreReportedLostThroughTheHandler() throws {
        let url = directory.file("f.json")
        try #"{"a": 1,}"#.write(to: url, atomically: false, encoding: .utf8)
        let result = try runTool(["errors", url.path, "--handler", "--flush", "port", "7000"], executable: testToolPath)
        #expect(result.status == 0)
        #expect(result.error.isEmpty, "\(result.error)")
        let handled = result.output.split(separator: "\n").filter { $0.hasPrefix("handler: ") }
        #expect(handled.count == 2, "\(result.output)")
        #expect(handled.last?.contains("exits with 1 change not written (key 'port'), now lost") == true, "\(result.output)")
        #expect(result.output.contains("flush threw: \(url.path):1:9"))
    }
}
