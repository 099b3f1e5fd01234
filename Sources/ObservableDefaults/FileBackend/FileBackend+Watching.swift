import Dispatch
import KeyValueObserving

/// How a storage hears of other processes' writes: the process's file watcher on the file's
/// directory (and on a symbolic link's target's), a re-watch when the directory goes away, or polling.
extension FileBackend {
    /// Starts watching the file: the process's inotify (kqueue) watcher, or polling if that is not
    /// available or `pollingInterval` is given.
    func startWatching(_ storage: DefaultsStorage, pollingInterval: Duration?) {
        if pollingInterval == nil,
            let subscription = FileWatcher.shared.watch(directory: file.directory, name: file.name, handler: watchHandler(storage))
        {
            lock.withLock { self.subscription = subscription }
            watchTarget(storage)
            return
        }
        startPolling(storage, interval: pollingInterval ?? .milliseconds(500))
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

    /// After the watched directory went away: reloads (the file is gone, or elsewhere), then watches
    /// the directory again as soon as it exists (a write of this process or another one creates it),
    /// looking every `rewatchInterval` until then, and reloads once more to catch what was written
    /// meanwhile. Polls instead if the directory exists but cannot be watched. Runs on the queue.
    func watchAgain(_ storage: DefaultsStorage) {
        // The dead subscription is let go outside the lock: its deinit takes the watcher's lock.
        let dead = lock.withLock { () -> FileWatcher.Subscription? in
            defer { subscription = nil }
            return subscription
        }
        if dead != nil { reload(storage) }
        if let subscription = FileWatcher.shared.watch(directory: file.directory, name: file.name, handler: watchHandler(storage)) {
            lock.withLock { self.subscription = subscription }
            reload(storage)
        } else if file.directoryExists() {
            startPolling(storage, interval: .milliseconds(500))
            reload(storage)
        } else {
            queue.asyncAfter(deadline: .now() + Self.rewatchInterval) { [weak self, weak storage] in
                if let self, let storage { self.watchAgain(storage) }
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
