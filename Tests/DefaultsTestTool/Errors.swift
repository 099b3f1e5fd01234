#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
import KeyValueObserving
import ObservableDefaults

/// `errors PATH [--handler] [--flush] [--wait-for-retry] [--drop] [--release-after-exit-flush]
/// [KEY VALUE]...`: how a store
/// reports its problems, up to and including the process's exit. Opens a store on the file at PATH
/// (with an error handler that prints each error on standard output as `handler: DESCRIPTION`, or
/// without one: the library prints on standard error), sets each KEY to the JSON VALUE, then, as
/// asked: flushes (printing `flush threw: DESCRIPTION`), waits until a batched write has failed,
/// lets the store go; then exits without flushing. `--release-after-exit-flush` holds the storage
/// until the library's exit flush has run, then lets it go (the order a load can give `--drop`).
func reportErrors(_ arguments: [String]) -> Never {
    var flags: Set<String> = []
    var rest = arguments.dropFirst()
    while let flag = rest.first, flag.hasPrefix("--") {
        flags.insert(flag)
        rest.removeFirst()
    }
    guard rest.count % 2 == 0 else { fail("'errors' needs a VALUE after each KEY") }
    let printHandled: @Sendable (DefaultsError) -> Void = { error in _ = writeLine("handler: \(error)", toDescriptor: 1) }
    if flags.contains("--release-after-exit-flush") {
        // Registered before the store registers the library's exit flush: `atexit` handlers run
        // in reverse order, so this one runs after it.
        atexit { heldStorage = nil }
    }
    do {
        let store = DefaultsStore(
            fileURL: URL(fileURLWithPath: arguments[0]), errorHandler: flags.contains("--handler") ? printHandled : nil)
        for index in stride(from: rest.startIndex, to: rest.endIndex, by: 2) {
            let text = rest[index + 1]
            store.setJSONValue((try? JSONValue.parse(text)) ?? .string(text), forKey: rest[index])
        }
        if flags.contains("--flush") {
            do {
                try store.flush()
            } catch {
                _ = writeLine("flush threw: \(error)", toDescriptor: 1)
            }
        }
        if flags.contains("--wait-for-retry") {
            let deadline = ContinuousClock.now + .seconds(30)
            while store.failedWriteCount < 1 {
                guard ContinuousClock.now < deadline else { fail("no batched write failed within 30 s") }
                usleep(2_000)
            }
        }
        if flags.contains("--release-after-exit-flush") { heldStorage = store.storage }
        if !flags.contains("--drop") { withExtendedLifetime(store) { exit(0) } }
    }
    exit(0)
}

/// The storage `--release-after-exit-flush` keeps alive until its `atexit` handler. Only the main
/// thread touches it: it is set before `exit` and cleared by the handler `exit` runs on that thread.
nonisolated(unsafe) var heldStorage: DefaultsStorage?
