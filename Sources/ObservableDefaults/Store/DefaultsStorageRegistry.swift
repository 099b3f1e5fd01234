#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif
import KeyValueObserving

/// The process-wide table of storages by identity (a canonical file path, or an etcd cluster and
/// prefix): every `DefaultsStore` of this process on one location gets the same `DefaultsStorage`, so
/// a write through one is seen and observed through the others at once. A symbolic link counts as the
/// file it points to when the first store on either is made, so a link and its target share a storage.
package enum DefaultsStorageRegistry {
    private final class WeakStorage {
        weak var storage: DefaultsStorage?

        init(_ storage: DefaultsStorage) {
            self.storage = storage
        }
    }

    /// The storages by identity, and whether the exit hook that flushes them is installed.
    private static let table = Locked<(storages: [String: WeakStorage], isExitHookInstalled: Bool)>(([:], false))

    /// The storage for `identity`: the live one if there is one (passed to `reuse`), else the one
    /// `make` builds (outside the registry's lock: it may do I/O), published unless another thread
    /// published one first (then the built one is dropped, and `reuse` gets the winner).
    ///
    /// - Parameters:
    ///   - identity: what makes two stores share a storage (`file:PATH`, `etcd:…`).
    ///   - make: builds and loads a storage, returning the problems met (reported to the new store).
    ///   - reuse: called with an existing storage that is returned instead of a new one.
    /// - Returns: the storage, and the problems `make` met if its storage was the one published.
    /// - Throws: what `make` threw.
    package static func storage<Failure: Error>(
        identity: String,
        make: () throws(Failure) -> (DefaultsStorage, [DefaultsError]),
        reuse: (DefaultsStorage) -> Void = { _ in }
    ) throws(Failure) -> (DefaultsStorage, [DefaultsError]) {
        if let existing = table.withLock({ $0.storages[identity]?.storage }) {
            reuse(existing)
            return (existing, [])
        }
        let (candidate, problems) = try make()
        let storage: DefaultsStorage = table.withLock { table in
            if !table.isExitHookInstalled {
                table.isExitHookInstalled = true
                // Writes are batched off the caller's thread; a process that exits right after a
                // set still makes it durable.
                atexit { DefaultsStorageRegistry.flushAll() }
            }
            if let existing = table.storages[identity]?.storage { return existing }
            table.storages = table.storages.filter { $0.value.storage != nil }
            table.storages[identity] = WeakStorage(candidate)
            return candidate
        }
        guard storage === candidate else {
            reuse(storage)
            return (storage, [])
        }
        return (storage, problems)
    }

    /// The storage of the file at `path` (absolute), created and loaded on first use, and the
    /// problems met while loading it (an unreadable or corrupt file). Nothing is created: a missing
    /// directory is made by the first write.
    static func storage(forPath path: String, pollingInterval: Duration?) -> (DefaultsStorage, [DefaultsError]) {
        let file = DefaultsFile(path: path).resolvingExistingDirectories()
        let key = (try? file.writeTarget().path) ?? file.path
        let (storage, loadProblems) = storage(identity: "file:" + key) { () -> (DefaultsStorage, [DefaultsError]) in
            let lock = Lock()
            let backend = FileBackend(file: file, lock: lock)
            let candidate = DefaultsStorage(backend: backend, lock: lock)
            // Watch first, then read: a change between the two is reported, not missed.
            backend.startWatching(candidate, pollingInterval: pollingInterval)
            return (candidate, backend.load(into: candidate))
        } reuse: { existing in
            if let pollingInterval { existing.fileBackend?.startPolling(existing, interval: pollingInterval) }
        }
        return (storage, loadProblems)
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
        let live = table.withLock { $0.storages.values.compactMap(\.storage) }
        for storage in live {
            guard let backend = storage.fileBackend, backend.file.path.hasPrefix(prefix), !backend.isOnQueue else { continue }
            try? storage.flush()
        }
    }

    /// Makes every storage's pending changes durable (at exit, `atexit`), the storage whose queue
    /// called `exit()` included (a file back end's `flush()` writes directly on its own queue). A
    /// process ended by a signal (SIGTERM, SIGINT with the default action, SIGKILL) runs no `atexit`
    /// handler: its changes of the last few milliseconds are lost unless it called `flush()`.
    /// `matching` limits it to some storages (for tests, which share the process).
    static func flushAll(matching: (DefaultsStorage) -> Bool = { _ in true }) {
        let live = table.withLock { $0.storages.values.compactMap(\.storage) }
        for storage in live where matching(storage) {
            storage.backend.flushAtExit(storage)
        }
    }
}
