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

/// A store whose directory does not exist yet: it creates nothing until it writes, and hears of
/// the directory and the file another process makes there through the kernel's watches.
extension CrossProcessTests {
    /// Opening, reading, observing and flushing a store with nothing to write create nothing: no
    /// directory, no lock file, no file.
    @Test func aStoreOnAMissingDirectoryCreatesNothingUntilItWrites() throws {
        let url = directory.url.appendingPathComponent("missing/dir/s.json")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        let key = DefaultsKey("speed", default: 1.0)
        let token = store.observe(key, options: [.initial, .new]) { _, _ in }
        #expect(store[key] == 1.0)
        #expect(store.snapshot()[key] == 1.0)
        try store.flush()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [])
        #expect(errors.current.isEmpty, "\(errors.current)")
        // The first write makes the directory.
        store[key] = 2.0
        try store.flush()
        #expect(jsonObject(at: url) == ["speed": .number("2")])
        token.invalidate()
    }

    /// The store watches the nearest existing ancestor of its directory, moves the watch down as
    /// each directory on the way is made, and watches the directory once it exists: the file
    /// another process then writes reaches the observer through the kernel's watch. The store never
    /// polls (the back end says which mechanisms it uses at each step).
    @Test func aStoreOnAMissingDirectorySeesAFileAnotherProcessWritesThereThroughTheWatcher() throws {
        let top = directory.path + "/a"
        let url = URL(fileURLWithPath: top + "/b/c/s.json")
        let key = DefaultsKey("speed", default: 0.0)
        let store = DefaultsStore(fileURL: url)
        #expect(store.file.watchMechanisms == [.awaitingDirectory(ancestor: directory.path)])
        let seen = Locked<[Double?]>([])
        let token = store.observe(key, options: [.new]) { _, change in
            if change.isFromAnotherProcess { seen.append(change.newValue) }
        }
        try runShell("mkdir \(shellQuoted(top))")
        #expect(waitUntil { store.file.watchMechanisms == [.awaitingDirectory(ancestor: top)] }, "\(store.file.watchMechanisms)")
        // The rest of the path at once, and the file: the watch moves down to `c` and reads what is there.
        let result = try runTool(["write", "--file", url.path, "speed", "2.5"])
        #expect(result.status == 0, "\(result.error)")
        #expect(waitUntil { seen.current == [2.5] }, "\(seen.current)")
        #expect(store.file.watchMechanisms == [.directory])
        // And the directory's watch sees the next write.
        #expect(try runTool(["write", "--file", url.path, "speed", "3.5"]).status == 0)
        #expect(waitUntil { seen.current == [2.5, 3.5] }, "\(seen.current)")
        #expect(store[key] == 3.5)
        token.invalidate()
    }

    /// A directory renamed into place (`mv`, an `IN_MOVED_TO`) is an appearance too, and so is an
    /// ancestor removed meanwhile: the watch moves up, then down again.
    @Test func aDirectoryMovedIntoPlaceIsSeenAfterItsAncestorWasRemoved() throws {
        let top = directory.path + "/a"
        try FileManager.default.createDirectory(atPath: top, withIntermediateDirectories: false)
        let url = URL(fileURLWithPath: top + "/b/s.json")
        let key = DefaultsKey("speed", default: 0.0)
        let store = DefaultsStore(fileURL: url)
        #expect(store.file.watchMechanisms == [.awaitingDirectory(ancestor: top)])
        let seen = Locked<[Double?]>([])
        let token = store.observe(key, options: [.new]) { _, change in
            if change.isFromAnotherProcess { seen.append(change.newValue) }
        }
        try runShell("rmdir \(shellQuoted(top))")
        #expect(waitUntil { store.file.watchMechanisms == [.awaitingDirectory(ancestor: directory.path)] }, "\(store.file.watchMechanisms)")
        let staging = directory.path + "/staging"
        #expect(try runTool(["write", "--file", staging + "/b/s.json", "speed", "4.5"]).status == 0)
        try runShell("mv \(shellQuoted(staging)) \(shellQuoted(top))")
        #expect(waitUntil { seen.current == [4.5] }, "\(seen.current)")
        #expect(store.file.watchMechanisms == [.directory])
        token.invalidate()
    }

    /// A symbolic link to nowhere on the path: what would make the directory appear happens
    /// elsewhere, so the store looks again every `rewatchInterval` instead, reports nothing while
    /// the path stays missing, and watches the directory once the link leads to one.
    @Test func aLinkToNowhereOnThePathIsLookedAtAgainUntilItLeadsToADirectory() throws {
        let link = directory.path + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: directory.path + "/nowhere")
        let url = URL(fileURLWithPath: link + "/sub/s.json")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        #expect(store.file.watchMechanisms == [.retrying])
        let seen = Locked<[Double?]>([])
        let token = store.observe(DefaultsKey("speed", default: 0.0), options: [.new]) { _, change in
            if change.isFromAnotherProcess { seen.append(change.newValue) }
        }
        try FileManager.default.createDirectory(atPath: directory.path + "/nowhere/sub", withIntermediateDirectories: true)
        #expect(try runTool(["write", "--file", url.path, "speed", "1.5"]).status == 0)
        #expect(waitUntil { seen.current == [1.5] }, "\(seen.current)")
        #expect(store.file.watchMechanisms == [.directory])
        #expect(errors.current.isEmpty, "\(errors.current)")
        token.invalidate()
    }
}
