import Dispatch
import KeyValueObserving

/// How a storage hears of other processes' writes: the process's file watcher on the file's
/// directory (and on a symbolic link's target's); while that directory does not exist (not made
/// yet, or removed), on its nearest existing ancestor until it appears; polling where the kernel
/// cannot watch.
extension FileBackend {
    /// How a storage whose directory does not exist awaits it.
    enum AwaitedDirectory {
        /// A kernel watch of the directory's nearest existing ancestor, for the next component of
        /// its path: each component made is an event, and the watch moves down to it.
        case watching(ancestor: String, subscription: FileWatcher.Subscription)
        /// No ancestor can be watched (the system's watch limit, a symbolic link to nowhere on the
        /// path): looking again every `rewatchInterval`.
        case retrying

        var subscription: FileWatcher.Subscription? {
            if case .watching(_, let subscription) = self { subscription } else { nil }
        }
    }

    /// For tests: a way the back end hears of other processes' writes.
    enum WatchMechanism: Hashable, Sendable {
        /// The kernel's watch of the file's directory.
        case directory
        /// The kernel's watch of `ancestor`, the nearest existing ancestor of the missing directory.
        case awaitingDirectory(ancestor: String)
        /// Looking for the missing directory every `rewatchInterval`.
        case retrying
        /// Polling the file.
        case polling
    }

    /// For tests: how the back end hears of other processes' writes now.
    var watchMechanisms: Set<WatchMechanism> {
        lock.withLock {
            var mechanisms: Set<WatchMechanism> = []
            if subscription != nil { mechanisms.insert(.directory) }
            if pollSubscription != nil { mechanisms.insert(.polling) }
            switch awaitedDirectory {
            case .watching(let ancestor, _): mechanisms.insert(.awaitingDirectory(ancestor: ancestor))
            case .retrying: mechanisms.insert(.retrying)
            case nil: break
            }
            return mechanisms
        }
    }

    /// Starts watching the file: the process's inotify (kqueue) watcher on its directory, or on the
    /// directory's nearest existing ancestor until the directory exists; polling if the kernel
    /// cannot watch the directory or `pollingInterval` is given.
    func startWatching(_ storage: DefaultsStorage, pollingInterval: Duration?) {
        if let pollingInterval {
            startPolling(storage, interval: pollingInterval)
        } else if let subscription = FileWatcher.shared.watch(directory: file.directory, name: file.name, handler: watchHandler(storage)) {
            lock.withLock { self.subscription = subscription }
            watchTarget(storage)
        } else if isOnQueue {
            followDirectory(storage, isStarting: true)
        } else {
            // On the queue, where every later step of the wait runs: an event that comes before
            // this returns is handled after it.
            queue.sync { followDirectory(storage, isStarting: true) }
        }
    }

    private func watchHandler(_ storage: DefaultsStorage) -> FileWatcher.Handler {
        { [weak self, weak storage] event in
            guard let self, let storage else { return }
            if event == .lost {
                // The directory was removed or moved away: the watch is gone.
                self.queue.async { [weak self, weak storage] in
                    if let self, let storage { self.watchAgain(storage) }
                }
            } else {
                // A change and an overflow get the same answer: a reload reads the whole file.
                self.scheduleReload(storage)
            }
        }
    }

    /// If the file is a symbolic link: watches the directory of the file it points to as well (a write
    /// there, by another process or an editor, does not touch the link's directory), and moves that
    /// watch when the link is re-pointed (each reload looks). Polling needs none of this: it looks at
    /// the file through the link.
    func watchTarget(_ storage: DefaultsStorage) {
        guard lock.withLock({ self.subscription != nil }) else { return }
        let target = (try? file.writeTarget()).flatMap { $0 == file ? nil : $0 }
        if lock.withLock({ targetWatch?.path == target?.path && (target == nil || targetWatch?.subscription != nil) }) { return }
        let targetSubscription = target.flatMap { target in
            FileWatcher.shared.watch(directory: target.directory, name: target.name) { [weak self, weak storage] event in
                guard let self, let storage else { return }
                // The target's directory went away: watch it again at the next reload.
                if event == .lost { self.lock.withLock { self.targetWatch?.subscription = nil } }
                self.scheduleReload(storage)
            }
        }
        // The replaced subscription is let go outside the lock: its deinit takes the watcher's lock.
        let previous = lock.withLock {
            defer { targetWatch = target.map { ($0.path, targetSubscription) } }
            return targetWatch
        }
        _ = previous
    }

    /// After the watched directory went away: reloads (the file is gone, or elsewhere), then
    /// follows the directory until it exists again (a write of this process or another one makes
    /// it). Runs on the queue.
    func watchAgain(_ storage: DefaultsStorage) {
        // The dead subscription is let go outside the lock: its deinit takes the watcher's lock.
        let dead = lock.withLock { () -> FileWatcher.Subscription? in
            defer { subscription = nil }
            return subscription
        }
        if dead != nil { reload(storage) }
        followDirectory(storage)
    }

    /// Watches the file's directory if it exists now; polls the file if the directory exists but
    /// cannot be watched. Else awaits the directory: watches its nearest existing ancestor for the
    /// next component of its path, and comes back here at each event there (that component made or
    /// moved in, the ancestor removed), or, where no ancestor can be watched, every
    /// `rewatchInterval`. Then reloads (not while the storage is being made, whose load follows;
    /// not after a look of `rewatchInterval` that found nothing, which would report an unreadable
    /// path each time): what was written before the watch began, or, after an event, if the
    /// directory that appeared is gone again, the absence of every key (a file this process wrote
    /// there meanwhile went with it). Does nothing once the directory is watched. Runs on the queue.
    private func followDirectory(_ storage: DefaultsStorage, isStarting: Bool = false, afterEvent: Bool = true) {
        guard lock.withLock({ subscription == nil && pollSubscription == nil }) else { return }
        var isWatched = false
        defer {
            if !isStarting, afterEvent || isWatched { reload(storage) }
        }
        var hasTriedExistingDirectory = false
        // Each turn goes one component further down, or finds the directory: a bound for a path
        // whose components are made and removed as fast as they are looked at.
        for _ in 0..<64 {
            if let subscription = FileWatcher.shared.watch(directory: file.directory, name: file.name, handler: watchHandler(storage)) {
                let awaited = lock.withLock { () -> AwaitedDirectory? in
                    self.subscription = subscription
                    defer { awaitedDirectory = nil }
                    return awaitedDirectory
                }
                // Let go outside the lock: a subscription's deinit takes the watcher's lock.
                _ = awaited
                isWatched = true
                watchTarget(storage)
                return
            }
            guard let entry = file.awaitedEntry() else {
                // The directory exists (made since the watch was tried: try once more, then poll),
                // or cannot be awaited by a watch.
                if file.directoryExists(), !hasTriedExistingDirectory {
                    hasTriedExistingDirectory = true
                    continue
                }
                break
            }
            guard
                let watch = FileWatcher.shared.watch(
                    directory: entry.ancestor, name: entry.name, for: .appearance, handler: appearanceHandler(storage))
            else { break }
            replaceAwaitedDirectory(with: .watching(ancestor: entry.ancestor, subscription: watch))
            // A component made between the look and the watch sent the watch no event: look again.
            guard DefaultsFile.isDirectory(entry.ancestor + "/" + entry.name) else { return }
        }
        if file.directoryExists() {
            replaceAwaitedDirectory(with: nil)
            startPolling(storage, interval: .milliseconds(500))
            isWatched = true
            return
        }
        replaceAwaitedDirectory(with: .retrying)
        queue.asyncAfter(deadline: .now() + Self.rewatchInterval) { [weak self, weak storage] in
            if let self, let storage { self.followDirectory(storage, afterEvent: false) }
        }
    }

    /// Sets what the store awaits its directory with; the one it replaces is let go after the lock
    /// is released (a subscription's deinit takes the watcher's lock).
    private func replaceAwaitedDirectory(with new: AwaitedDirectory?) {
        let previous = lock.withLock {
            defer { awaitedDirectory = new }
            return awaitedDirectory
        }
        _ = previous
    }

    /// What an event of the awaited directory's ancestor does: follows the directory from there, on
    /// the queue.
    private func appearanceHandler(_ storage: DefaultsStorage) -> FileWatcher.Handler {
        { [weak self, weak storage] _ in
            guard let self, let storage else { return }
            self.queue.async { [weak self, weak storage] in
                if let self, let storage { self.followDirectory(storage) }
            }
        }
    }

    /// Polls the file's identity (inode, size, modification time, through a symbolic link) every
    /// `interval`, on the watcher's thread; reloads when it changes. For file systems without change
    /// notification.
    func startPolling(_ storage: DefaultsStorage, interval: Duration) {
        let subscription = FileWatcher.shared.pollFile(at: file.path, every: interval, handler: watchHandler(storage))
        // The replaced subscription is let go outside the lock: its deinit takes the watcher's lock.
        let previous = lock.withLock {
            defer { pollSubscription = subscription }
            return pollSubscription
        }
        _ = previous
    }

    /// One look of the poller now: reloads if the file's identity changed since the last look. Runs
    /// on the queue.
    func poll(_ storage: DefaultsStorage) {
        if lock.withLock({ pollSubscription })?.pollNow() == true { reload(storage) }
    }
}
