#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import KeyValueObserving

extension DefaultsStorage {
    // MARK: Loading

    /// Reads the file for the first time (before any store uses this storage).
    func load() -> [DefaultsError] {
        do {
            switch try file.read() {
            case .missing:
                return []
            case .values(let values, _):
                state.persisted = values
                state.values = values.mapValues { Entry(typed: nil, json: $0) }
                return []
            case .duplicateKeys(let values, let identity, let error, _):
                state.persisted = values
                state.values = values.mapValues { Entry(typed: nil, json: $0) }
                state.reportedCorruption = identity
                return [error]
            case .corrupt(let error, let identity, _):
                state.reportedCorruption = identity
                return [error]
            }
        } catch {
            return [error]
        }
    }

    // MARK: Writing

    /// Writes the dirty keys soon, on the queue, together with the changes made meanwhile.
    func scheduleWrite() {
        queue.asyncAfter(deadline: .now() + Self.coalescingDelay) { [self] in writeScheduled() }
    }

    /// A batched write. A failure is reported once per distinct cause (kind, system error and file,
    /// whatever the temporary file's name), and the write is tried again after a delay that doubles
    /// up to `maximumRetryDelay`, until it succeeds or another write takes its changes. A value that
    /// cannot be encoded was reported when it was set, and writing again would not help. A lock held
    /// by another process is not a failure: the write is tried again a little later.
    private func writeScheduled() {
        do throws(DefaultsError) {
            try writeDirtyKeys()
            lock.withLock { state.lockWaits = 0 }
        } catch {
            guard error.kind != .encodingFailed else { return }
            let isContention = error.isLockContention
            let (isNew, retryDelay) = lock.withLock { () -> (Bool, DispatchTimeInterval?) in
                var isNew = false
                if isContention {
                    state.lockWaits += 1
                } else {
                    isNew = state.reportedWriteFailures.insert(WriteFailure(error)).inserted
                    state.failedWrites += 1
                }
                // A set made meanwhile has scheduled a write already; so has an earlier retry.
                guard !state.isWriteScheduled, !state.dirty.isEmpty else { return (isNew, nil) }
                state.isWriteScheduled = true
                if isContention { return (false, .milliseconds(Self.lockRetryDelay(afterWaits: state.lockWaits))) }
                let doublings = min(state.failedWrites - 1, 16)
                return (isNew, .milliseconds(min(Self.firstRetryDelay << doublings, Self.maximumRetryDelay)))
            }
            if isNew { report(error) }
            if let retryDelay {
                // Weak: retries of a disk that stays full must not keep a storage alive.
                queue.asyncAfter(deadline: .now() + retryDelay) { [weak self] in self?.writeScheduled() }
            }
        }
    }

    /// The delay in milliseconds before trying again for a lock file another process holds: 1 ms,
    /// doubling with each try up to 50 ms.
    static func lockRetryDelay(afterWaits waits: Int) -> Int {
        min(1 << min(max(waits - 1, 0), 6), 50)
    }

    /// Records that `error` was reported (to a new store's handler, at init), so that a write that
    /// fails the same way does not report it again.
    func noteReported(_ error: DefaultsError) {
        guard error.kind == .writeFailed else { return }
        lock.withLock { _ = state.reportedWriteFailures.insert(WriteFailure(error)) }
    }

    /// Reports `error` unless a failure of the same cause was reported since the last successful
    /// write (at init, by a batched write, or at exit).
    func reportOnce(_ error: DefaultsError) {
        let isNew = lock.withLock {
            if error.kind == .encodingFailed, let key = error.key { return state.unencodableKeys.insert(key).inserted }
            return state.reportedWriteFailures.insert(WriteFailure(error)).inserted
        }
        if isNew { report(error) }
    }

    /// Writes this process's changes to the file and waits until they are durable, however long
    /// another process holds the lock file.
    func flush() throws(DefaultsError) {
        try flush(timeout: nil, notice: nil)
    }

    /// Writes this process's changes to the file and waits until they are durable. While another
    /// process holds the lock file, tries again with a growing delay (1 to 50 ms), waiting on the
    /// caller's thread so that the other stores' writes go on meanwhile.
    ///
    /// - Parameters:
    ///   - timeout: how long to wait for the lock at most; `nil` waits as long as it takes.
    ///   - notice: called once if the lock has been waited for `after`.
    /// - Throws: `.writeFailed` with `errno == ETIMEDOUT` when `timeout` expires; any write failure.
    func flush(timeout: Duration?, notice: (after: Duration, call: () -> Void)?) throws(DefaultsError) {
        try waitingForTheLock(timeout: timeout, notice: notice) { () throws(DefaultsError) in try writeOnQueue(nil) }
    }

    /// Runs `attempt` until it does not find the lock file held by another process, waiting a
    /// growing delay (1 to 50 ms) between tries on the caller's thread, so that the other stores'
    /// writes go on meanwhile.
    func waitingForTheLock(
        timeout: Duration? = nil,
        notice: (after: Duration, call: () -> Void)? = nil,
        _ attempt: () throws(DefaultsError) -> Void
    ) throws(DefaultsError) {
        let clock = ContinuousClock()
        let start = clock.now
        var waits = 0
        var noticed = false
        while true {
            do throws(DefaultsError) {
                try attempt()
                return
            } catch {
                guard error.isLockContention else { throw error }
                let waited = clock.now - start
                if let timeout, waited >= timeout {
                    throw DefaultsError(
                        .writeFailed, path: file.path, errno: ETIMEDOUT,
                        reason: "gave up after \(timeout) waiting for another process to release its lock (\(error.reason))"
                    )
                }
                if let notice, !noticed, waited >= notice.after {
                    noticed = true
                    notice.call()
                }
                waits += 1
                // On the caller's thread, or, for a flush from a handler running there, on the writer.
                usleep(UInt32(Self.lockRetryDelay(afterWaits: waits) * 1000))
            }
        }
    }

    /// One try of `writeDirtyKeys(transaction)` on the queue.
    func writeOnQueue(_ transaction: Transaction?) throws(DefaultsError) {
        if isOnQueue {
            try writeDirtyKeys(transaction)
            return
        }
        let result: Result<Void, DefaultsError> = queue.sync {
            do throws(DefaultsError) {
                try writeDirtyKeys(transaction)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// A read-modify-write of one key, run by `writeDirtyKeys` under the file lock (see `update`).
    struct Transaction {
        let key: String
        /// Given the key's freshest entry, the entry to write (`nil` removes the key; its JSON must be
        /// set), or `nil` to write nothing (the caller keeps the reason).
        let body: (Entry?) -> Entry??
    }

    /// Merges the dirty keys into the file: with the lock file held, re-read the file, apply only the
    /// keys this process changed (removals included), write a temporary file, fsync, rename, fsync
    /// the directory. Changes another process made meanwhile are applied here too and reported as
    /// theirs. With a `transaction`, its body runs after the re-read, on the key's freshest value,
    /// and its result is written with the dirty keys. Runs on the queue.
    ///
    /// - Throws: `.encodingFailed` naming a key whose value cannot be encoded, after writing the
    ///   others (it stays pending until it is replaced); `.writeFailed` if the file cannot be written.
    func writeDirtyKeys(_ transaction: Transaction? = nil) throws(DefaultsError) {
        let (pending, entries): ([String: UInt64], [String: Entry?]) = lock.withLock {
            if state.updatingThread != nil { checkNotInUpdateBody() }
            state.isWriteScheduled = false
            return (state.dirty, Dictionary(uniqueKeysWithValues: state.dirty.keys.map { ($0, state.values[$0]) }))
        }
        guard !pending.isEmpty || transaction != nil else { return }

        var changes: [String: JSONValue?] = [:]
        var unencodable: [String] = []
        for (key, entry) in entries {
            guard let entry else {
                changes[key] = .some(nil)
                continue
            }
            if let json = entry.json {
                changes[key] = json
            } else if let json = try? JSONValue(encoding: entry.typed!) {
                changes[key] = json
            } else {
                // Reported when it was set; it stays pending, and the throw below names it.
                unencodable.append(key)
            }
        }

        try file.createDirectory()
        // Reports wait until the lock file is unlocked: a handler may flush, which locks it again.
        var corruption: DefaultsError?
        // A key the file holds twice: its error and bytes, copied aside before a write drops one.
        var duplicate: (DefaultsError, [UInt8])?
        var replacedAt: UInt64?
        // A broken file seen under the lock: it may be another program's in-place rewrite (truncate,
        // then write) caught half-way, which takes no lock. Let go of the lock, wait, and look again:
        // only the same broken file (same inode, size and modification time) is copied aside and
        // replaced, and the copy holds the very bytes that were parsed.
        var suspected: DefaultsFile.Identity?
        var looks = 0
        // The transaction's entry as written (outer `nil`: not run, or it wrote nothing), and the key's
        // version when its body read it.
        var transactionEntry: Entry??
        var transactionVersion: UInt64?
        var outcome: (written: [String: JSONValue], fileValues: [String: JSONValue]?)?
        while outcome == nil {
            outcome = try file.withExclusiveLock { (file) throws(DefaultsError) -> ([String: JSONValue], [String: JSONValue]?)? in
                if !queueState.hasSweptTemporaryFiles {
                    // Once per storage: what writers killed mid-write (SIGKILL) left behind.
                    queueState.hasSweptTemporaryFiles = true
                    file.sweepAbandonedTemporaryFiles()
                }
                var base: [String: JSONValue]
                var fileValues: [String: JSONValue]?
                var mustWrite = false
                switch try file.read() {
                case .missing:
                    base = [:]
                    fileValues = [:]
                    mustWrite = true
                case .values(let values, _):
                    base = values
                    fileValues = values
                case .duplicateKeys(let values, _, let error, let bytes):
                    base = values
                    fileValues = values
                    duplicate = (error, bytes)
                case .corrupt(let error, let identity, let bytes):
                    if suspected != identity, looks < Self.corruptionConfirmationLooks {
                        suspected = identity
                        looks += 1
                        return nil
                    }
                    // Never overwrite a broken file without keeping it: copy it aside, then write the
                    // last good values with this process's changes.
                    let copy = try copyAside(bytes, of: file)
                    corruption = DefaultsError(
                        .corruptFile, path: error.path, line: error.line, column: error.column, byteOffset: error.byteOffset,
                        corruptCopyPath: copy, reason: error.reason
                    )
                    base = lock.withLock { state.persisted }
                    mustWrite = true
                }
                var merged = base
                for (key, value) in changes { merged[key] = value }
                if let transaction {
                    guard let entry = runTransaction(transaction, base: base, version: &transactionVersion) else { return ([:], nil) }
                    transactionEntry = entry
                    merged[transaction.key] = entry?.json
                    mustWrite = true
                }
                if mustWrite || merged != base {
                    if let (error, bytes) = duplicate {
                        // The write keeps one value per key: keep the file with all of them first.
                        let copy = try copyAside(bytes, of: file, as: "duplicate-keys")
                        corruption = DefaultsError(
                            .duplicateKey, path: error.path, line: error.line, column: error.column, byteOffset: error.byteOffset,
                            corruptCopyPath: copy, reason: error.reason
                        )
                    }
                    let replacement = try file.write(merged)
                    replacedAt = replacement.replacedAt
                }
                return (merged, fileValues)
            }
            if outcome == nil {
                lock.withLock { state.corruptionSuspectedHook }?()
                _ = DispatchSemaphore(value: 0).wait(timeout: .now() + Self.corruptionConfirmationDelay)
            }
        }
        let (written, fileValues) = outcome!
        if let corruption { report(corruption) }
        // The transaction's body wrote nothing: neither did this write.
        if transaction != nil, transactionEntry == nil { return }

        let records: [Delivery] = lock.withLock {
            // Whether a set of the transaction's key came after its body read it: then that set is
            // the newer value (it stays pending, and is written next).
            let isTransactionCurrent = transaction.map { state.keyVersions[$0.key] == transactionVersion } ?? false
            var records: [Delivery] = []
            if let fileValues { records = applyForeign(fileValues) }
            state.persisted = written
            state.reportedWriteFailures = []
            state.failedWrites = 0
            if replacedAt != nil { state.fileWrites += 1 }
            for (key, version) in pending where state.dirty[key] == version && !unencodable.contains(key) {
                state.dirty.removeValue(forKey: key)
                if let json = written[key], state.values[key] != nil, state.values[key]!.json == nil {
                    state.values[key]!.json = json
                }
            }
            if let transaction, isTransactionCurrent, case .some(let entry) = transactionEntry {
                records += commitTransaction(key: transaction.key, entry: entry)
            }
            return records
        }
        if let replacedAt { queueState.lastReplacement = replacedAt }
        deliver(records)
        if let key = unencodable.min() {
            let others = unencodable.count > 1 ? " (and \(unencodable.count - 1) other key\(unencodable.count > 2 ? "s" : ""))" : ""
            throw DefaultsError(
                .encodingFailed, path: file.path, key: key,
                reason: "its value cannot be written as JSON; it stays in memory only until it is replaced\(others)"
            )
        }
    }

    // MARK: Reloading

    /// Reloads the file soon, on the queue (called by the file watcher).
    func scheduleReload() {
        let needed = lock.withLock {
            defer { state.isReloadScheduled = true }
            return !state.isReloadScheduled
        }
        guard needed else { return }
        queue.async { [self] in reload() }
    }

    /// Reads the whole file, diffs it against memory and reports each key another process changed,
    /// with old and new values. Keys this process changed and has not written yet keep this
    /// process's value (its next write wins). Runs on the queue.
    func reload() {
        lock.withLock { state.isReloadScheduled = false }
        watchTarget()
        let contents: DefaultsFile.Contents
        do {
            contents = try file.read()
        } catch {
            report(error)
            return
        }
        let fileValues: [String: JSONValue]
        switch contents {
        case .missing:
            fileValues = [:]
        case .values(let values, _):
            fileValues = values
        case .duplicateKeys(let values, let identity, let error, _):
            fileValues = values
            let isNew = lock.withLock {
                defer { state.reportedCorruption = identity }
                return state.reportedCorruption != identity
            }
            if isNew { report(error) }
        case .corrupt(let error, let identity, _):
            // A program that rewrites the file in place (truncate, then write) can be caught half-way
            // by a reload that an earlier event started: look again shortly before calling it broken.
            if queueState.suspectedCorruption != identity {
                queueState.suspectedCorruption = identity
                queue.asyncAfter(deadline: .now() + Self.corruptionConfirmationDelay) { [self] in reload() }
                return
            }
            let isNew = lock.withLock {
                defer { state.reportedCorruption = identity }
                return state.reportedCorruption != identity
            }
            if isNew { report(error) }
            return
        }
        queueState.suspectedCorruption = nil
        let records = lock.withLock {
            let records = applyForeign(fileValues)
            state.persisted = fileValues
            return records
        }
        deliver(records)
    }

    /// Applies the keys whose value in the file differs from the one this process last saw there,
    /// except the keys this process changed since; returns the changes with their versions and
    /// observers, prior notifications first for the observers that asked for them, and the
    /// store-wide notification last. Called with the lock held.
    private func applyForeign(_ fileValues: [String: JSONValue]) -> [Delivery] {
        var records: [Delivery] = []
        var priors: [Delivery] = []
        var changed: Set<String> = []
        for key in Set(fileValues.keys).union(state.persisted.keys) where fileValues[key] != state.persisted[key] {
            guard state.dirty[key] == nil else { continue }
            let old = state.values[key]
            let new = fileValues[key].map { Entry(typed: nil, json: $0) }
            state.values[key] = new
            state.version &+= 1
            state.keyVersions[key] = state.version
            changed.insert(key)
            let observers = (state.observers[key] ?? []) + state.anyKeyObservers
            if state.priorObserverCount > 0 {
                let wantingPrior = observers.filter(\.wantsPrior)
                if !wantingPrior.isEmpty {
                    let prior = Record(key: key, old: old, new: nil, isPrior: true, origin: .anotherProcess)
                    priors.append(.key(KeyDelivery(record: prior, version: state.version, observers: wantingPrior)))
                }
            }
            guard !observers.isEmpty else { continue }
            let record = Record(key: key, old: old, new: new, isPrior: false, origin: .anotherProcess)
            records.append(.key(KeyDelivery(record: record, version: state.version, observers: observers)))
        }
        let change = changeDelivery(keys: changed, origin: .anotherProcess).map { [Delivery.change($0)] } ?? []
        return priors + records + change
    }

    // MARK: Watching

    /// Starts watching the file: the process's inotify (kqueue) watcher, or polling if that is not
    /// available or `pollingInterval` is given.
    func startWatching(pollingInterval: Duration?) {
        if pollingInterval == nil, let subscription = FileWatcher.shared.watch(directory: file.directory, name: file.name, handler: watchHandler()) {
            lock.withLock { self.subscription = subscription }
            watchTarget()
            return
        }
        startPolling(interval: pollingInterval ?? .milliseconds(500))
    }

    private func watchHandler() -> FileWatcher.Handler {
        { [weak self] event in
            guard let self else { return }
            if event == .lost {
                // The directory was removed or moved away: the watch is gone.
                self.queue.async { [weak self] in self?.watchAgain() }
            } else {
                // A change and an overflow get the same answer: a reload reads the whole file.
                self.scheduleReload()
            }
        }
    }

    /// If the file is a symbolic link: watches the directory of the file it points to as well (a write
    /// there, by another process or an editor, does not touch the link's directory), and moves that
    /// watch when the link is re-pointed (each reload looks). Polling needs none of this: it looks at
    /// the file through the link.
    func watchTarget() {
        guard lock.withLock({ self.subscription != nil }) else { return }
        let target = (try? file.writeTarget()).flatMap { $0 == file ? nil : $0 }
        if lock.withLock({ targetWatch?.path == target?.path && (target == nil || targetWatch?.subscription != nil) }) { return }
        let targetSubscription = target.flatMap { target in
            FileWatcher.shared.watch(directory: target.directory, name: target.name) { [weak self] event in
                guard let self else { return }
                // The target's directory went away: watch it again at the next reload.
                if event == .lost { self.lock.withLock { self.targetWatch?.subscription = nil } }
                self.scheduleReload()
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
    func watchAgain() {
        // The dead subscription is let go outside the lock: its deinit takes the watcher's lock.
        let dead = lock.withLock { () -> FileWatcher.Subscription? in
            defer { subscription = nil }
            return subscription
        }
        if dead != nil { reload() }
        if let subscription = FileWatcher.shared.watch(directory: file.directory, name: file.name, handler: watchHandler()) {
            lock.withLock { self.subscription = subscription }
            reload()
        } else if file.directoryExists() {
            startPolling(interval: .milliseconds(500))
            reload()
        } else {
            queue.asyncAfter(deadline: .now() + Self.rewatchInterval) { [weak self] in self?.watchAgain() }
        }
    }

    /// Polls the file's identity (inode, size, modification time, through a symbolic link) every
    /// `interval`, on the watcher's thread; reloads when it changes. For file systems without change
    /// notification.
    func startPolling(interval: Duration) {
        let subscription = FileWatcher.shared.pollFile(at: file.path, every: interval, handler: watchHandler())
        // The replaced subscription is let go outside the lock: its deinit takes the watcher's lock.
        let previous = lock.withLock {
            defer { pollSubscription = subscription }
            return pollSubscription
        }
        _ = previous
    }

    /// One look of the poller now: reloads if the file's identity changed since the last look. Runs
    /// on the queue.
    func poll() {
        if lock.withLock({ pollSubscription })?.pollNow() == true { reload() }
    }
}
