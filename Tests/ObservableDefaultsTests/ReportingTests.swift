import Foundation
import Testing
import TestSupport

/// The reporting contract, up to the process's exit (in child processes, whose standard error is
/// captured): once per distinct cause per store, a cause `flush()` threw counting as reported;
/// standard error only for stores created without a handler (a store given one keeps it for its
/// pending changes after it is let go); nothing again at exit.
@Suite("Error reporting", .tags(.processes))
struct ReportingTests {
    let directory = TemporaryDirectory()

    /// The file is a directory: the store's init reports it, `flush()` throws it, the batched write
    /// that fails the same way and the exit's flush stay quiet. The loss of the change still pending
    /// at exit is a cause of its own, told once, to the handler of the store that was let go: it is
    /// kept while its changes are pending, so standard error stays empty.
    @Test func aCauseIsReportedOnceAndNeverOnStandardErrorWhenAHandlerWasGiven() throws {
        let path = directory.file("d.json").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let result = try runTool(
            ["errors", path, "--handler", "--flush", "--wait-for-retry", "--drop", "x", "1"], executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.isEmpty, "\(result.error)")
        let handled = result.output.split(separator: "\n").filter { $0.hasPrefix("handler: ") }
        #expect(handled.count == 2, "\(result.output)")
        #expect(handled.first?.contains("it is a directory") == true)
        // At exit, or when the store was let go (nothing holds its storage for a retry then).
        #expect(handled.last?.contains("1 change not written (key 'x'), now lost") == true, "\(result.output)")
        #expect(result.output.contains("flush threw: \(path): not usable as a defaults file"))
    }

    /// The exit's flush can hold the last reference to the storage (under load, the retry's queue
    /// still holds it when `exit` runs): the loss it tells is not told again by the release.
    @Test func aLossToldAtExitIsNotToldAgainWhenTheStorageIsReleased() throws {
        let path = directory.file("d.json").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let result = try runTool(
            ["errors", path, "--handler", "--flush", "--wait-for-retry", "--drop", "--release-after-exit-flush", "x", "1"],
            executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.isEmpty, "\(result.error)")
        let lost = result.output.split(separator: "\n").filter { $0.contains("now lost") }
        #expect(lost.count == 1, "\(result.output)")
        #expect(lost.first?.hasPrefix("handler: ") == true, "\(result.output)")
        #expect(lost.first?.contains("the process exits with 1 change not written (key 'x')") == true, "\(result.output)")
    }

    /// Kept until exit: the cause is not told again; the loss of the pending change is a cause of
    /// its own, told once, to the handler.
    @Test func atExitOnlyTheLossIsNewAndItGoesToTheHandler() throws {
        let path = directory.file("d.json").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let result = try runTool(["errors", path, "--handler", "--flush", "--wait-for-retry", "x", "1"], executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.isEmpty, "\(result.error)")
        let handled = result.output.split(separator: "\n").filter { $0.hasPrefix("handler: ") }
        #expect(handled.count == 2, "\(result.output)")
        #expect(handled.last?.contains("exits with 1 change not written (key 'x'), now lost") == true, "\(result.output)")
    }

    /// Without a handler: standard error, once per cause, the loss at exit included.
    @Test func withoutAHandlerEachCauseIsPrintedOnceOnStandardError() throws {
        let path = directory.file("d.json").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let result = try runTool(["errors", path, "--flush", "--wait-for-retry", "x", "1"], executable: testToolPath)
        #expect(result.status == 0)
        let lines = result.error.split(separator: "\n")
        #expect(lines.count == 2, "\(result.error)")
        #expect(lines.first?.hasPrefix("ObservableDefaults: \(path): not usable as a defaults file") == true, "\(result.error)")
        #expect(lines.last?.contains("now lost") == true, "\(result.error)")
    }
}

@Suite("Error reporting after the store is let go", .tags(.processes))
struct ReleasedHandlerTests {
    let directory = TemporaryDirectory()

    /// The case measured in the trial: a store with a handler, local to a function that has
    /// returned, on a path that cannot be written. The storage outlives the store; its handler is
    /// kept while it has anything to report, so the loss at exit goes to it, not standard error.
    @Test func aStoreLetGoAtOnceStillTellsItsHandlerAndNeverStandardError() throws {
        let path = directory.file("d.json").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let result = try runTool(["errors", path, "--handler", "--drop", "x", "1"], executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.isEmpty, "\(result.error)")
        #expect(result.output.contains("handler: ") && result.output.contains("now lost"), "\(result.output)")
    }
}
