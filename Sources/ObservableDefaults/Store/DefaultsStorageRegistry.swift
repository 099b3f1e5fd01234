#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import KeyValueObserving

/// The process-wide table of storages by canonical file path: every `DefaultsStore` of this
/// process on one file gets the same `DefaultsStorage`, so a write through one is seen and observed
/// through the others at once. A symbolic link counts as the file it points to when the first store
/// on either is made, so a link and its target share a storage.
enum DefaultsStorageRegistry {
    private final class WeakStorage {
        weak var storage: DefaultsStorage?

        init(_ storage: DefaultsStorage) {
            self.storage = storage
        }
    }

    private static let lock = Lock()
    // Invariant: only accessed with `lock` held.
    nonisolated(unsafe) private static var storages: [String: WeakStorage] = [:]
    // Invariant: only accessed with `lock` held.
    nonisolated(unsafe) private static var isExitHookInstalled = false

    /// The storage of the file at `path` (absolute), created and loaded on first use, and the
    /// problems met while creating it (missing directory that cannot be created, corrupt file).
    static func storage(forPath path: String, pollingInterval: Duration?) -> (DefaultsStorage, [DefaultsError]) {
        var problems: [DefaultsError] = []
        var file = DefaultsFile(path: path)
        do {
            try file.createDirectory()
        } catch {
            problems.append(error)
        }
        if let resolved = realpath(file.directory, nil) {
            let directory = String(cString: resolved)
            free(resolved)
            file = DefaultsFile(path: (directory == "/" ? "" : directory) + "/" + file.name)
        }

        let key = (try? file.writeTarget().path) ?? file.path
        if let existing = lock.withLock({ storages[key]?.storage }) {
            if let pollingInterval { existing.startPolling(interval: pollingInterval) }
            return (existing, problems)
        }
        // Build and load a new storage outside the registry's lock (file I/O, and the storage's own
        // lock), then publish it unless another thread published one first.
        let candidate = DefaultsStorage(file: file)
        // Watch first, then read: a change between the two is reported, not missed.
        candidate.startWatching(pollingInterval: pollingInterval)
        let loadProblems = candidate.lock.withLock { candidate.load() }
        let storage: DefaultsStorage = lock.withLock {
            if !isExitHookInstalled {
                isExitHookInstalled = true
                // Writes are batched off the caller's thread; a process that exits right after a
                // set still makes it durable.
                atexit { DefaultsStorageRegistry.flushAll() }
            }
            if let existing = storages[key]?.storage { return existing }
            storages = storages.filter { $0.value.storage != nil }
            storages[key] = WeakStorage(candidate)
            return candidate
        }
        if storage === candidate {
            problems += loadProblems
        } else if let pollingInterval {
            storage.startPolling(interval: pollingInterval)
        }
        return (storage, problems)
    }

    /// Makes the pending changes of every storage whose file is in `directory` (or below) durable:
    /// before deleting a directory, so that no batched write recreates it afterwards.
    static func flush(under directory: String) {
        var prefix = directory
        if let resolved = realpath(directory, nil) {
            prefix = String(cString: resolved)
            free(resolved)
        }
        if !prefix.hasSuffix("/") { prefix += "/" }
        let live = lock.withLock { storages.values.compactMap(\.storage) }
        for storage in live where storage.file.path.hasPrefix(prefix) && !storage.isOnQueue {
            try? storage.flush()
        }
    }

    /// Makes every storage's pending changes durable (at exit, `atexit`), the storage whose queue
    /// called `exit()` included (`flush()` writes directly on its own queue). A process ended by a
    /// signal (SIGTERM, SIGINT with the default action, SIGKILL) runs no `atexit` handler: its
    /// changes of the last few milliseconds are lost unless it called `flush()`. `matching` limits
    /// it to some storages (for tests, which share the process).
    static func flushAll(matching: (DefaultsStorage) -> Bool = { _ in true }) {
        let live = lock.withLock { storages.values.compactMap(\.storage) }
        for storage in live where matching(storage) {
            do {
                try storage.flush()
            } catch {
                // Reported already, most often (to a handler of a store that may be gone by now).
                storage.reportOnce(error)
            }
        }
    }
}
