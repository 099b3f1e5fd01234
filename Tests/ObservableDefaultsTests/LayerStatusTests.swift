import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing
import TestSupport

/// Every layer's status: a directory that goes away and comes back, a file that stops parsing and
/// parses again; the loss told once to the error handler, its end to the status observers.
@Suite("Layer statuses")
struct LayerStatusTests {
    let directory = TemporaryDirectory()

    @Test func aRemovedDirectoryIsReportedOnceAndItsReturnIsAStatusChange() throws {
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("s3cret\n", to: config + "/statusToken")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: directory.file("s.json"), layers: [.directory(URL(fileURLWithPath: config))]) { error in
            errors.append(error)
        }
        let key = DefaultsKey("statusToken", default: "none")
        #expect(store[key] == "s3cret")
        #expect(store.layerStatuses.map(\.isAvailable) == [true, true])
        #expect(store.layerStatuses.map(\.kind) == [.directory, .store])
        let changes = Locked<[KeyValueObservedChange<[DefaultsLayerStatus]>]>([])
        let token = store.observeLayerStatuses(options: [.old, .new]) { _, change in changes.append(change) }
        try FileManager.default.removeItem(atPath: config)
        #expect(waitUntil { changes.current.count == 1 })
        #expect(store[key] == "none")
        let lost = errors.current.filter { $0.kind == .layerProblem }
        #expect(lost.count == 1, "\(errors.current)")
        #expect(lost.first?.description.contains("directory layer: \(config) does not exist") == true, "\(lost)")
        #expect(changes.current.first?.oldValue?.first?.isAvailable == true)
        #expect(changes.current.first?.newValue?.first?.isAvailable == false)
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("s3cret\n", to: config + "/statusToken")
        #expect(waitUntil { changes.current.count == 2 })
        #expect(changes.current.last?.newValue?.first?.isAvailable == true)
        #expect(waitUntil { store[key] == "s3cret" })
        // Its return is no error; a second loss is reported again.
        #expect(errors.current.filter { $0.kind == .layerProblem }.count == 1)
        try FileManager.default.removeItem(atPath: config)
        #expect(waitUntil { errors.current.filter { $0.kind == .layerProblem }.count == 2 })
        token.invalidate()
    }

    /// A removal shorter than the confirmation delay (Kubernetes swapping `..data`, a directory
    /// replaced by a rename) is not a loss.
    @Test func aBriefRemovalIsNotReported() throws {
        let config = directory.path + "/configmap"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("1\n", to: config + "/briefValue")
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: directory.file("s.json"), layers: [.directory(URL(fileURLWithPath: config))]) { error in
            errors.append(error)
        }
        let key = DefaultsKey("briefValue", default: 0)
        #expect(store[key] == 1)
        let replacement = directory.path + "/configmap-new"
        try FileManager.default.createDirectory(atPath: replacement, withIntermediateDirectories: true)
        try writeAtomically("2\n", to: replacement + "/briefValue")
        try FileManager.default.removeItem(atPath: config)
        // Long enough for the watcher to see the directory gone, well short of the confirmation.
        usleep(100_000)
        try FileManager.default.moveItem(atPath: replacement, toPath: config)
        #expect(waitUntil { store[key] == 2 })
        // Well past the confirmation delay.
        usleep(1_500_000)
        #expect(errors.current.filter { $0.kind == .layerProblem }.isEmpty, "\(errors.current)")
        #expect(store.layerStatuses.allSatisfy { $0.isAvailable })
    }

    /// A file that stops parsing makes the back end unreachable (told once to the error handler),
    /// and reachable again when it parses (told to the status observers).
    @Test func aFileThatStopsParsingAndParsesAgainIsAStatusChangeEachWay() throws {
        let file = directory.file("s.json")
        try Data(#"{"a": 1}"#.utf8).write(to: file)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: file) { error in errors.append(error) }
        #expect(store.backendStatus == .connected(revision: nil))
        let statuses = Locked<[DefaultsBackendStatus]>([])
        let token = store.observeBackendStatus { _, change in statuses.append(change.newValue!) }
        try writeAtomically(#"{"a": 1,,"#, to: file.path)
        #expect(waitUntil { statuses.current.count == 1 })
        guard case .unreachable(_, let error)? = statuses.current.first else {
            Issue.record("not unreachable: \(statuses.current)")
            return
        }
        #expect(error.kind == .corruptFile)
        #expect(!store.layerStatuses.last!.isAvailable)
        #expect(errors.current.filter { $0.kind == .corruptFile }.count == 1)
        try writeAtomically(#"{"a": 2}"#, to: file.path)
        #expect(waitUntil { statuses.current.count == 2 })
        #expect(statuses.current.last == .connected(revision: nil))
        #expect(store[DefaultsKey("a", default: 0)] == 2)
        #expect(errors.current.filter { $0.kind == .corruptFile }.count == 1)
        token.invalidate()
    }

    @Test func aFileBrokenWhenTheStoreOpensStartsUnreachable() throws {
        let file = directory.file("s.json")
        try Data(#"{"a": "#.utf8).write(to: file)
        let store = DefaultsStore(fileURL: file) { _ in }
        #expect(!store.backendStatus.isConnected)
        #expect(store.layerStatuses.map(\.isAvailable) == [false])
    }
}

#if os(Linux)
@Suite("kvo-defaults watch: statuses", .tags(.processes))
struct ToolStatusTests {
    let directory = TemporaryDirectory()

    /// `watch` prints when the file stops parsing and when it reads again, and when a directory
    /// layer goes away and when it is back.
    @Test func watchPrintsBothEventsForAFileAndADirectory() throws {
        let file = directory.path + "/s.json"
        let config = directory.path + "/config"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try Data(#"{"a": 1}"#.utf8).write(to: URL(fileURLWithPath: file))
        let watch = try startTool(["watch", "--file", file, "--directory", config])
        defer {
            watch.process.terminate()
            watch.process.waitUntilExit()
        }
        #expect(waitUntil { hasInotifyWatch(watch.process.processIdentifier) })
        try writeAtomically(#"{"a": 1,,"#, to: file)
        #expect(waitForText("corrupt defaults file", in: watch.error).contains("corrupt defaults file"))
        try writeAtomically(#"{"a": 2}"#, to: file)
        #expect(waitForText("readable again", in: watch.error).contains("\(file): readable again"))
        try FileManager.default.removeItem(atPath: config)
        #expect(waitForText("does not exist", in: watch.error).contains("directory layer: \(config) does not exist"))
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        #expect(waitForText("back", in: watch.error).contains("directory layer \(config): back"))
    }
}
#endif
