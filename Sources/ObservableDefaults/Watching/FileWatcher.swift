import Dispatch
import Foundation
import KeyValueObserving

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// Reports changes of named files in watched directories, and of polled files.
///
/// One thread serves the whole process, however many stores it has: it waits for the kernel's
/// events (`KernelWatches`: inotify on Linux, in `InotifyWatches.swift`; kqueue on Darwin, in
/// `KqueueWatches.swift`) and looks at the polled files when they are due. The *directory* is
/// watched, not only the file: a file replaced by rename is a new inode, and a watch on the old one
/// would go blind after the first atomic write. A directory that does not exist yet is awaited the
/// same way: a subscription `for: .appearance` to the next component of its path, in its nearest
/// existing ancestor (the storage moves it down as components appear). Where the kernel cannot watch
/// (an `inotify_add_watch` error, a network file system), the storage polls instead: the thread
/// compares the file's identity (inode, size, modification time) at each interval.
///
/// Handlers run on the watcher's thread (on Darwin, on the kqueue sources' queue) and must return
/// quickly (the storage only schedules a reload on its own queue).
final class FileWatcher: @unchecked Sendable {
    // Invariant: `polled`, `nextID`, `isStarted` and `isStopped` are only accessed with `lock` held;
    // `wakeDescriptors` are set in init and closed only by `stop()` after the thread has ended;
    // `kernel` guards its own state.
    enum Event: Sendable, Hashable {
        /// The watched file was replaced, rewritten or deleted.
        case changed
        /// These entries of a directory watched `.everyEntry` were created, replaced, rewritten
        /// (and closed), removed or renamed. Only the kernel watches of Linux name them; elsewhere
        /// such a subscription hears `.changed`, and reads the whole directory again.
        case entriesChanged(Set<String>)
        /// The kernel's event queue overflowed: events were lost, reload everything.
        case overflow
        /// The watched directory was removed or moved away: the subscription is over (it gets no
        /// more events); reload, and watch again once the directory exists again.
        case lost
    }

    typealias Handler = @Sendable (Event) -> Void

    /// What a subscription to a name in a directory hears of.
    enum EntryEvents: Sendable, Hashable {
        /// The file of that name replaced, rewritten, removed or renamed away.
        case file
        /// An entry of that name created or moved in: a missing directory's nearest existing
        /// ancestor, watched for the next component of the directory's path to appear.
        case appearance
        /// Every entry of the directory created, replaced, rewritten, removed or renamed (the name
        /// is ignored): a directory layer's files and Kubernetes' `..data` symlink swap.
        case everyEntry
    }

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
    /// The platform's directory watches.
    private let kernel = KernelWatches()

    /// A polled file: its path, how often to look, when to look next, and what it was last time.
    private struct Polled {
        let path: String
        let interval: UInt64
        var deadline: UInt64
        var identity: DefaultsFile.Identity?
        let handler: Handler
    }

    private var polled: [UInt64: Polled] = [:]

    /// A subscription: cancel it (or let it go) to stop receiving events.
    final class Subscription: Sendable {
        enum Kind: Sendable {
            /// A kernel watch of a directory: its inotify watch descriptor (-1 for kqueue).
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

    /// A watcher with its own kernel watches and wake-up pipe, not running until `start()`.
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
            isStopped = true
            return isStarted
        }
        wake()
        if wasStarted { finished.wait() }
        kernel.stop()
        if wakeDescriptors.read >= 0 {
            close(wakeDescriptors.read)
            close(wakeDescriptors.write)
        }
    }

    private func wake() {
        var byte: UInt8 = 1
        if wakeDescriptors.write >= 0 { _ = write(wakeDescriptors.write, &byte, 1) }
    }

    // MARK: Watching

    /// Watches `name` in `directory` (for the `kind` of events); `nil` if the directory cannot be
    /// watched (it does not exist, or the system's watch limit is reached), in which case the caller
    /// polls.
    func watch(directory: String, name: String, for kind: EntryEvents = .file, handler: @escaping Handler) -> Subscription? {
        let id = lock.withLock { () -> UInt64? in
            guard !isStopped else { return nil }
            nextID += 1
            return nextID
        }
        guard let id, let watchDescriptor = kernel.add(id: id, directory: directory, name: name, kind: kind, handler: handler) else {
            return nil
        }
        return Subscription(watcher: self, id: id, kind: .watched(watchDescriptor))
    }

    private func remove(id: UInt64, kind: Subscription.Kind) {
        switch kind {
        case .watched(let watchDescriptor):
            kernel.remove(id: id, watchDescriptor: watchDescriptor)
        case .polled:
            lock.withLock { _ = polled.removeValue(forKey: id) }
        }
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
        let events = kernel.eventDescriptor
        var descriptors = [pollfd(fd: wakeDescriptors.read, events: Int16(POLLIN), revents: 0)]
        if let events { descriptors.append(pollfd(fd: events, events: Int16(POLLIN), revents: 0)) }
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
            if events != nil, descriptors[1].revents != 0 { kernel.readEvents() }
        }
    }
}
