#if canImport(Darwin)
import Darwin
import Dispatch
import KeyValueObserving

/// The kernel's directory watches on Darwin.
typealias KernelWatches = KqueueWatches

/// `FileWatcher`'s directory watches on Darwin: kqueue, through Dispatch sources on one shared
/// queue, on the directory and on the file (see `DarwinWatch`). They need no thread of the watcher's:
/// `eventDescriptor` is `nil` and `readEvents()` does nothing.
final class KqueueWatches: @unchecked Sendable {
    // Invariant: `subscriptions` is only accessed with `lock` held.
    private let lock = Lock()
    private var subscriptions: [UInt64: DarwinWatch] = [:]

    init() {}

    /// The sources report on their own queue: the watcher's thread waits on nothing of theirs.
    var eventDescriptor: Int32? {
        nil
    }

    /// Watches `name` in `directory` for the subscription `id`; returns -1, or `nil` if the directory
    /// cannot be watched. Both kinds of events are the same watch here: a directory's `.write`
    /// reports an entry created or renamed in (an awaited directory's appearance) as well as a
    /// replaced file. For `.everyEntry` only the directory is watched: an entry rewritten in place
    /// is not seen on Darwin (a Kubernetes-style `..data` swap and every replacement are).
    func add(
        id: UInt64, directory: String, name: String, kind: FileWatcher.EntryEvents, handler: @escaping FileWatcher.Handler
    ) -> Int32? {
        let path = kind == .everyEntry ? directory : directory + "/" + name
        guard let watch = DarwinWatch(directory: directory, path: path, handler: handler) else { return nil }
        lock.withLock { subscriptions[id] = watch }
        return -1
    }

    /// Ends the subscription `id` (`watchDescriptor` is -1).
    func remove(id: UInt64, watchDescriptor _: Int32) {
        let watch = lock.withLock { () -> DarwinWatch? in subscriptions.removeValue(forKey: id) }
        watch?.cancel()
    }

    /// Nothing to close: each watch closes its descriptors when cancelled.
    func stop() {}

    /// Never called: `eventDescriptor` is `nil`.
    func readEvents() {}
}

/// kqueue watches (through Dispatch sources) for one file: its directory (entries added, removed,
/// renamed: an atomic replace) and the file itself (written in place), re-armed on the new file after
/// each replacement.
private final class DarwinWatch: @unchecked Sendable {
    // Invariant: `directorySource` and `fileSource` are only accessed on `queue`.
    /// One queue for every watch: a handler only schedules a reload.
    private static let sharedQueue = DispatchQueue(label: "ObservableDefaults.FileWatcher")
    private var queue: DispatchQueue { Self.sharedQueue }
    private var directorySource: DispatchSourceFileSystemObject?
    private var fileSource: DispatchSourceFileSystemObject?
    private let path: String
    private let handler: FileWatcher.Handler

    init?(directory: String, path: String, handler: @escaping FileWatcher.Handler) {
        self.path = path
        self.handler = handler
        let descriptor = open(directory, O_EVTONLY)
        guard descriptor >= 0 else { return nil }
        let source = DispatchSource.makeFileSystemObjectSource(fileDescriptor: descriptor, eventMask: [.write], queue: queue)
        source.setEventHandler { [weak self] in
            guard let self else { return }
            self.armFileSource()
            self.handler(.changed)
        }
        source.setCancelHandler { close(descriptor) }
        queue.sync {
            directorySource = source
            armFileSource()
        }
        source.resume()
    }

    private func armFileSource() {
        fileSource?.cancel()
        fileSource = nil
        let descriptor = open(path, O_EVTONLY)
        guard descriptor >= 0 else { return }
        let source = DispatchSource.makeFileSystemObjectSource(
            fileDescriptor: descriptor, eventMask: [.write, .extend, .delete, .rename], queue: queue
        )
        source.setEventHandler { [weak self] in
            guard let self else { return }
            if let data = self.fileSource?.data, !data.isDisjoint(with: [.delete, .rename]) { self.armFileSource() }
            self.handler(.changed)
        }
        source.setCancelHandler { close(descriptor) }
        fileSource = source
        source.resume()
    }

    func cancel() {
        queue.sync {
            directorySource?.cancel()
            fileSource?.cancel()
            directorySource = nil
            fileSource = nil
        }
    }
}
#endif
