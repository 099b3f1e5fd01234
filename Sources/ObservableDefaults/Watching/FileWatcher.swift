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

/// Reports changes of named files in watched directories, and of polled files.
///
/// One thread serves the whole process, however many stores it has: it reads the events of one
/// inotify instance (Linux) and looks at the polled files when they are due. On Linux the
/// *directory* is watched, not the file: a file replaced by rename is a new inode, and a watch on the
/// old one would go blind after the first atomic write. `IN_MOVED_TO`, `IN_CLOSE_WRITE`, `IN_DELETE`
/// and `IN_MOVED_FROM` (the file renamed away) for the file's name report a change. `IN_DELETE_SELF`,
/// `IN_MOVE_SELF` and `IN_IGNORED` (the directory removed or moved away: the watch is gone, or
/// watches the wrong place) end the directory's subscriptions with `.lost`; the storage then
/// reloads and watches again once the directory exists. `IN_Q_OVERFLOW` (the kernel dropped events)
/// is reported to every subscription, which reloads its file in full. On macOS, kqueue (through
/// Dispatch sources on one shared queue) watches the directory and the file. Where neither works (an
/// `inotify_add_watch` error, a network file system), the storage polls instead: the thread compares
/// the file's identity (inode, size, modification time) at each interval.
///
/// Handlers run on the watcher's thread and must return quickly (the storage only schedules a
/// reload on its own queue).
final class FileWatcher: @unchecked Sendable {
    // Invariant: `subscriptions`, `polled`, `nextID`, `isStarted` and `isStopped` are only accessed
    // with `lock` held; `descriptor` and `wakeDescriptors` are set in init and closed only by `stop()`
    // after the thread has ended.
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

    /// The process-wide watcher, started.
    static let shared: FileWatcher = {
        let watcher = FileWatcher()
        watcher.start()
        return watcher
    }()

    private let lock = Lock()
    private var nextID: UInt64 = 0
    private let wakeDescriptors: (read: Int32, write: Int32)
    private let finished = DispatchSemaphore(value: 0)
    private var isStarted = false
    private var isStopped = false

    /// A polled file: its path, how often to look, when to look next, and what it was last time.
    private struct Polled {
        let path: String
        let interval: UInt64
        var deadline: UInt64
        var identity: DefaultsFile.Identity?
        let handler: Handler
    }

    private var polled: [UInt64: Polled] = [:]

    #if canImport(Darwin)
    private var subscriptions: [UInt64: DarwinWatch] = [:]
    #else
    private struct Entry {
        let name: String
        let handler: Handler
    }

    private var subscriptions: [Int32: [UInt64: Entry]] = [:]
    /// The inotify instance, or -1 if the system has none to give (every store then polls).
    private let descriptor: Int32

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
        enum Kind: Sendable {
            /// An inotify watch of a directory (its watch descriptor), or a kqueue watch on macOS.
            case watched(Int32)
            case polled
        }

        weak let watcher: FileWatcher?
        let id: UInt64
        let kind: Kind

        init(watcher: FileWatcher, id: UInt64, kind: Kind) {
            self.watcher = watcher
            self.id = id
            self.kind = kind
        }

        func cancel() {
            watcher?.remove(id: id, kind: kind)
        }

        /// For a polled file: looks at it now, whatever its deadline; returns whether it changed
        /// since the last look (its handler is not called).
        func pollNow() -> Bool {
            watcher?.look(at: [id], reportingTo: false) ?? false
        }

        deinit {
            cancel()
        }
    }

    /// A watcher with its own inotify instance (on Linux) and wake-up pipe, not running until `start()`.
    init() {
        var pipeDescriptors: [Int32] = [-1, -1]
        if pipe(&pipeDescriptors) == 0 {
            for descriptor in pipeDescriptors {
                // Not inherited by the processes this one starts; never blocks (a full pipe already
                // holds a wake-up).
                _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
                _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            }
        }
        wakeDescriptors = (pipeDescriptors[0], pipeDescriptors[1])
        #if !canImport(Darwin)
        descriptor = inotify_init1(Int32(IN_CLOEXEC) | Int32(IN_NONBLOCK))
        #endif
    }

    /// Starts the thread that reads events and polls files.
    func start() {
        let shouldStart = lock.withLock {
            defer { isStarted = true }
            return !isStarted
        }
        guard shouldStart else { return }
        let thread = Thread { [self] in
            self.run()
            self.finished.signal()
        }
        thread.name = "ObservableDefaults.FileWatcher"
        thread.start()
    }

    /// Stops the thread and closes its descriptors (the shared watcher is never stopped).
    func stop() {
        let wasStarted = lock.withLock {
            // After this, `remove` must not touch the inotify descriptor: its number may be reused.
            isStopped = true
            return isStarted
        }
        wake()
        if wasStarted { finished.wait() }
        #if !canImport(Darwin)
        if descriptor >= 0 { close(descriptor) }
        #endif
        if wakeDescriptors.read >= 0 {
            close(wakeDescriptors.read)
            close(wakeDescriptors.write)
        }
    }

    private func wake() {
        var byte: UInt8 = 1
        if wakeDescriptors.write >= 0 { _ = write(wakeDescriptors.write, &byte, 1) }
    }

    // MARK: Polling

    /// Looks at the file at `path` every `interval` and reports `.changed` when its identity (inode,
    /// size, modification time; through a symbolic link) differs from the last look.
    func pollFile(at path: String, every interval: Duration, handler: @escaping Handler) -> Subscription {
        let nanoseconds = UInt64(interval.components.seconds) * 1_000_000_000 + UInt64(interval.components.attoseconds / 1_000_000_000)
        let identity = DefaultsFile(path: path).identity()
        let id = lock.withLock {
            nextID += 1
            let every = max(nanoseconds, 1_000_000)
            polled[nextID] = Polled(path: path, interval: every, deadline: Self.now() &+ every, identity: identity, handler: handler)
            return nextID
        }
        // The thread may be sleeping until a later deadline.
        wake()
        return Subscription(watcher: self, id: id, kind: .polled)
    }

    /// Looks at the polled files `ids` (every due one if `nil`), schedules their next look, and
    /// calls the handlers of those that changed if `reportingTo` is true; returns whether any
    /// changed.
    @discardableResult
    private func look(at ids: [UInt64]?, reportingTo report: Bool) -> Bool {
        let now = Self.now()
        let due: [(UInt64, String)] = lock.withLock {
            if let ids { return ids.compactMap { id in polled[id].map { (id, $0.path) } } }
            return polled.compactMap { $0.value.deadline <= now ? ($0.key, $0.value.path) : nil }
        }
        guard !due.isEmpty else { return false }
        // The system calls outside the lock.
        let identities = due.map { ($0.0, DefaultsFile(path: $0.1).identity()) }
        let changed: [Handler] = lock.withLock {
            var changed: [Handler] = []
            for (id, identity) in identities {
                guard var entry = polled[id] else { continue }
                if entry.identity != identity {
                    entry.identity = identity
                    changed.append(entry.handler)
                }
                entry.deadline = now &+ entry.interval
                polled[id] = entry
            }
            return changed
        }
        if report {
            for handler in changed { handler(.changed) }
        }
        return !changed.isEmpty
    }

    /// The `poll` timeout until the next polled file is due, in milliseconds (-1: none).
    private func millisecondsUntilNextLook() -> Int32 {
        let next = lock.withLock { polled.values.lazy.map(\.deadline).min() }
        // Without a wake-up pipe, a new polled file is noticed within 100 ms.
        let cap: UInt64 = wakeDescriptors.read >= 0 ? UInt64(Int32.max) : 100
        guard let next else { return wakeDescriptors.read >= 0 ? -1 : 100 }
        let now = Self.now()
        guard next > now else { return 0 }
        return Int32(min((next - now + 999_999) / 1_000_000, cap))
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    // MARK: The thread

    private func run() {
        #if canImport(Darwin)
        let readsEvents = false
        #else
        let readsEvents = descriptor >= 0
        let bufferSize = 64 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: 8)
        defer { buffer.deallocate() }
        #endif
        var descriptors = [pollfd(fd: wakeDescriptors.read, events: Int16(POLLIN), revents: 0)]
        #if !canImport(Darwin)
        if readsEvents { descriptors.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)) }
        #endif
        while true {
            look(at: nil, reportingTo: true)
            let timeout = millisecondsUntilNextLook()
            for index in descriptors.indices { descriptors[index].revents = 0 }
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if descriptors[0].revents != 0 {
                var bytes = [UInt8](repeating: 0, count: 64)
                while read(wakeDescriptors.read, &bytes, bytes.count) > 0 {}
            }
            if lock.withLock({ isStopped }) { return }
            #if !canImport(Darwin)
            if readsEvents, descriptors[1].revents != 0 {
                let count = read(descriptor, buffer, bufferSize)
                if count > 0 { dispatch(events: UnsafeRawBufferPointer(start: buffer, count: count)) }
            }
            #endif
        }
    }

    #if canImport(Darwin)
    /// Watches `name` in `directory`; `nil` if the directory cannot be watched.
    func watch(directory: String, name: String, handler: @escaping Handler) -> Subscription? {
        guard let watch = DarwinWatch(directory: directory, path: directory + "/" + name, handler: handler) else { return nil }
        let id = lock.withLock {
            nextID += 1
            subscriptions[nextID] = watch
            return nextID
        }
        return Subscription(watcher: self, id: id, kind: .watched(-1))
    }

    private func remove(id: UInt64, kind: Subscription.Kind) {
        let watch = lock.withLock { () -> DarwinWatch? in
            _ = polled.removeValue(forKey: id)
            return subscriptions.removeValue(forKey: id)
        }
        watch?.cancel()
    }
    #else
    /// Watches `name` in `directory`; `nil` if the directory cannot be watched (it does not exist, or
    /// the system's watch limit is reached), in which case the caller polls.
    func watch(directory: String, name: String, handler: @escaping Handler) -> Subscription? {
        guard descriptor >= 0 else { return nil }
        let mask = Self.closeWrite | Self.movedTo | Self.movedFrom | Self.deleted | Self.deletedSelf | Self.movedSelf | Self.onlyDirectory
        return lock.withLock {
            // Under the lock: a `remove` that drops a directory's last subscription must not remove
            // the kernel watch between this add and the registration below.
            guard !isStopped else { return nil }
            let watchDescriptor = inotify_add_watch(descriptor, directory, mask)
            guard watchDescriptor >= 0 else { return nil }
            nextID += 1
            subscriptions[watchDescriptor, default: [:]][nextID] = Entry(name: name, handler: handler)
            return Subscription(watcher: self, id: nextID, kind: .watched(watchDescriptor))
        }
    }

    private func remove(id: UInt64, kind: Subscription.Kind) {
        lock.withLock {
            guard case .watched(let watchDescriptor) = kind else {
                polled.removeValue(forKey: id)
                return
            }
            guard subscriptions[watchDescriptor]?.removeValue(forKey: id) != nil else { return }
            if subscriptions[watchDescriptor]!.isEmpty {
                subscriptions.removeValue(forKey: watchDescriptor)
                if !isStopped { inotify_rm_watch(descriptor, watchDescriptor) }
            }
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
