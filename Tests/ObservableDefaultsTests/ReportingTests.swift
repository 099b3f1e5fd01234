import Foundation
import Testing
import TestSupport

/// The reporting contract, up to the process's exit (in child processes, whose standard error is
/// captured): once per distinct cause per store, a cause `flush()` threw counting as reported;
/// standard error only for stores created without a handler; nothing again at exit.
@Suite("Error reporting", .tags(.processes))
struct ReportingTests {
    let directory = TemporaryDirectory()

    /// The file is a directory: the store's init reports it, `flush()` throws it, the batched write
    /// that fails the same way and the exit's flush stay quiet: the cause never reaches standard
    /// error although the store is gone by then. The loss of the change still pending at exit is a
    /// cause of its own, and with no handler left to tell it goes to standard error, once: a loss
    /// is never silent.
    @Test func aCauseIsReportedOnceAndNeverOnStandardErrorWhenAHandlerWasGiven() throws {
        let path = directory.file("d.json").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let result = try runTool(
            ["errors", path, "--handler", "--flush", "--wait-for-retry", "--drop", "x", "1"], executable: testToolPath)
        #expect(result.status == 0, "\(result.error)")
        let printed = result.error.split(separator: "\n")
        #expect(printed.count == 1, "\(result.error)")
        // At exit, or when the store was let go (nothing holds its storage for a retry then).
        #expect(printed.first?.contains("1 change not written (key 'x'), now lost") == true, "\(result.error)")
        #expect(printed.first?.contains("it is a directory") == printed.first?.contains("exits with"), "\(result.error)")
        let handled = result.output.split(separator: "\n").filter { $0.hasPrefix("handler: ") }
        #expect(handled.count == 1, "\(result.output)")
        #expect(handled.first?.contains("it is a directory") == true)
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
        let printed = result.error.split(separator: "\n")
        #expect(printed.count == 1, "\(result.error)")
        #expect(printed.first?.contains("the process exits with 1 change not written (key 'x'), now lost") == true, "\(result.error)")
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
