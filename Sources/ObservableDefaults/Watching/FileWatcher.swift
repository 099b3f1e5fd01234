#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import Foundation
import KeyValueObserving

/// Reports changes of named files in watched directories.
///
/// On Linux, one inotify instance and one thread serve the whole process. The *directory* is
/// watched, not the file: a file replaced by rename is a new inode, and a watch on the old one would
/// go blind after the first atomic write. `IN_MOVED_TO`, `IN_CLOSE_WRITE`, `IN_DELETE` and
/// `IN_MOVED_FROM` (the file renamed away) for the file's name report a change. `IN_DELETE_SELF`,
/// `IN_MOVE_SELF` and `IN_IGNORED` (the directory removed or moved away: the watch is gone, or
/// watches the wrong place) end the directory's subscriptions with `.lost`; the storage then
/// reloads and watches again once the directory exists. `IN_Q_OVERFLOW` (the kernel dropped events)
/// is reported to every subscription, which reloads its file in full. On macOS, kqueue (through Dispatch sources) watches
/// the directory and the file. Where neither works (an `inotify_add_watch` error, a network file
/// system), the storage polls instead.
///
/// Handlers run on the watcher's thread and must return quickly (the storage only schedules a
/// reload on its own queue).
final class FileWatcher: @unchecked Sendable {
    // Invariant: `subscriptions` and `nextID` are only accessed with `lock` held; `descriptor` and
    // `wakeDescriptors` are set in init and closed only by `stop()` after the thread has ended.
    enum Event: Sendable, Hashable {
        /// The watched file was replaced, rewritten or deleted.
        case changed
        /// The kernel's event queue overflowed: events were lost, reload everything.
        case overflow
        /// The watched directory was removed or moved away: the subscription is over (it gets no
        /// more events); reload, and watch again once the directory exists again.
        case lost
    }

    typealias Handler = @Sendable (Event) -> Void

    /// The process-wide watcher, or `nil` where file watching is unavailable.
    static let shared: FileWatcher? = {
        let watcher = FileWatcher()
        watcher?.start()
        return watcher
    }()

    private let lock = Lock()
    private var nextID: UInt64 = 0

    #if canImport(Darwin)
    private var subscriptions: [UInt64: DarwinWatch] = [:]
    #else
    private struct Entry {
        let name: String
        let handler: Handler
    }

    private var subscriptions: [Int32: [UInt64: Entry]] = [:]
    private let descriptor: Int32
    private let wakeDescriptors: (read: Int32, write: Int32)
    private let finished = DispatchSemaphore(value: 0)
    private var isStarted = false
    private var isStopped = false

    // From <sys/inotify.h>.
    static let closeWrite: UInt32 = 0x0000_0008
    static let movedFrom: UInt32 = 0x0000_0040
    static let movedTo: UInt32 = 0x0000_0080
    static let deleted: UInt32 = 0x0000_0200
    static let deletedSelf: UInt32 = 0x0000_0400
    static let movedSelf: UInt32 = 0x0000_0800
    static let queueOverflow: UInt32 = 0x0000_4000
    static let ignored: UInt32 = 0x0000_8000
    static let onlyDirectory: UInt32 = 0x0100_0000
    #endif

    /// A subscription: cancel it (or let it go) to stop receiving events.
    final class Subscription: Sendable {
        weak let watcher: FileWatcher?
        let id: UInt64
        let watchDescriptor: Int32

        init(watcher: FileWatcher, id: UInt64, watchDescriptor: Int32) {
            self.watcher = watcher
            self.id = id
            self.watchDescriptor = watchDescriptor
        }

        func cancel() {
            watcher?.remove(id: id, watchDescriptor: watchDescriptor)
        }

        deinit {
            cancel()
        }
    }

    #if canImport(Darwin)
    init?() {}

    func start() {}

    func stop() {}

    /// Watches `name` in `directory`; `nil` if the directory cannot be watched.
    func watch(directory: String, name: String, handler: @escaping Handler) -> Subscription? {
        guard let watch = DarwinWatch(directory: directory, path: directory + "/" + name, handler: handler) else { return nil }
        let id = lock.withLock {
            nextID += 1
            subscriptions[nextID] = watch
            return nextID
        }
        return Subscription(watcher: self, id: id, watchDescriptor: -1)
    }

    private func remove(id: UInt64, watchDescriptor _: Int32) {
        let watch = lock.withLock { subscriptions.removeValue(forKey: id) }
        watch?.cancel()
    }
    #else
    /// A watcher with its own inotify instance, not reading until `start()`.
    init?() {
        let descriptor = inotify_init1(Int32(IN_CLOEXEC) | Int32(IN_NONBLOCK))
        guard descriptor >= 0 else { return nil }
        var pipeDescriptors: [Int32] = [0, 0]
        guard pipe(&pipeDescriptors) == 0 else {
            close(descriptor)
            return nil
        }
        // Not inherited by the processes this one starts.
        _ = fcntl(pipeDescriptors[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipeDescriptors[1], F_SETFD, FD_CLOEXEC)
        self.descriptor = descriptor
        self.wakeDescriptors = (pipeDescriptors[0], pipeDescriptors[1])
    }

    /// Starts the thread that reads events.
    func start() {
        let shouldStart = lock.withLock {
            defer { isStarted = true }
            return !isStarted
        }
        guard shouldStart else { return }
        let thread = Thread { [self] in
            self.readEvents()
            self.finished.signal()
        }
        thread.name = "ObservableDefaults.FileWatcher"
        thread.start()
    }

    /// Stops the thread and closes the inotify instance (the shared watcher is never stopped).
    func stop() {
        let wasStarted = lock.withLock {
            // After this, `remove` must not touch the descriptor: its number may be reused.
            isStopped = true
            return isStarted
        }
        var byte: UInt8 = 1
        _ = write(wakeDescriptors.write, &byte, 1)
        if wasStarted { finished.wait() }
        close(descriptor)
        close(wakeDescriptors.read)
        close(wakeDescriptors.write)
    }

    /// Watches `name` in `directory`; `nil` if the directory cannot be watched (it does not exist, or
    /// the system's watch limit is reached), in which case the caller polls.
    func watch(directory: String, name: String, handler: @escaping Handler) -> Subscription? {
        let mask = Self.closeWrite | Self.movedTo | Self.movedFrom | Self.deleted | Self.deletedSelf | Self.movedSelf | Self.onlyDirectory
        return lock.withLock {
            // Under the lock: a `remove` that drops a directory's last subscription must not remove
            // the kernel watch between this add and the registration below.
            guard !isStopped else { return nil }
            let watchDescriptor = inotify_add_watch(descriptor, directory, mask)
            guard watchDescriptor >= 0 else { return nil }
            nextID += 1
            subscriptions[watchDescriptor, default: [:]][nextID] = Entry(name: name, handler: handler)
            return Subscription(watcher: self, id: nextID, watchDescriptor: watchDescriptor)
        }
    }

    private func remove(id: UInt64, watchDescriptor: Int32) {
        lock.withLock {
            guard subscriptions[watchDescriptor]?.removeValue(forKey: id) != nil else { return }
            if subscriptions[watchDescriptor]!.isEmpty {
                subscriptions.removeValue(forKey: watchDescriptor)
                if !isStopped { inotify_rm_watch(descriptor, watchDescriptor) }
            }
        }
    }

    private func readEvents() {
        let bufferSize = 64 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: 8)
        defer { buffer.deallocate() }
        var descriptors = [
            pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeDescriptors.read, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            descriptors[0].revents = 0
            descriptors[1].revents = 0
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if descriptors[1].revents != 0 { return }
            let count = read(descriptor, buffer, bufferSize)
            if count <= 0 {
                if count < 0, errno == EAGAIN || errno == EINTR { continue }
                return
            }
            dispatch(events: UnsafeRawBufferPointer(start: buffer, count: count))
        }
    }

    /// Calls, once each, the handlers of the subscriptions the events in `buffer` concern.
    private func dispatch(events buffer: UnsafeRawBufferPointer) {
        var changed: [(watchDescriptor: Int32, name: String)] = []
        var lost: [(watchDescriptor: Int32, isStillWatched: Bool)] = []
        var overflowed = false
        var offset = 0
        let headerSize = 16  // struct inotify_event: wd, mask, cookie, len, then the name
        while offset + headerSize <= buffer.count {
            let watchDescriptor = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let nameLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameBytes = UnsafeRawBufferPointer(rebasing: buffer[(offset + headerSize)..<min(offset + headerSize + nameLength, buffer.count)])
            offset += headerSize + nameLength
            if mask & Self.queueOverflow != 0 {
                overflowed = true
                continue
            }
            if mask & (Self.deletedSelf | Self.movedSelf | Self.ignored) != 0 {
                // A moved directory is still watched, at its new place: that watch is removed.
                lost.append((watchDescriptor, mask & Self.movedSelf != 0))
                continue
            }
            if mask & (Self.closeWrite | Self.movedTo | Self.movedFrom | Self.deleted) != 0, nameLength > 0 {
                let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                changed.append((watchDescriptor, name))
            }
        }
        let handlers: [(Handler, Event)] = lock.withLock {
            var handlers: [(Handler, Event)] = []
            // Dead watches are dropped: their subscriptions get no more events, and a `remove` of
            // one of them finds nothing to do.
            for (watchDescriptor, isStillWatched) in lost {
                guard let entries = subscriptions.removeValue(forKey: watchDescriptor) else { continue }
                if isStillWatched, !isStopped { inotify_rm_watch(descriptor, watchDescriptor) }
                handlers += entries.values.map { ($0.handler, Event.lost) }
            }
            if overflowed {
                return handlers + subscriptions.values.flatMap(\.values).map { ($0.handler, Event.overflow) }
            }
            var seen = Set<UInt64>()
            for (watchDescriptor, name) in changed {
                for (id, subscription) in subscriptions[watchDescriptor] ?? [:] where subscription.name == name {
                    if seen.insert(id).inserted { handlers.append((subscription.handler, .changed)) }
                }
            }
            return handlers
        }
        for (handler, event) in handlers { handler(event) }
    }
    #endif
}

#if canImport(Darwin)
/// kqueue watches (through Dispatch sources) for one file: its directory (entries added, removed,
/// renamed: an atomic replace) and the file itself (written in place), re-armed on the new file after
/// each replacement.
private final class DarwinWatch: @unchecked Sendable {
    // Invariant: `directorySource` and `fileSource` are only accessed on `queue`.
    private let queue = DispatchQueue(label: "ObservableDefaults.FileWatcher")
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
