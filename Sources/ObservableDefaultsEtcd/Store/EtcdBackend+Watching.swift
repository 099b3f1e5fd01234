import Dispatch
import ObservableDefaults

/// Other writers' changes: one watch of the prefix from the revision of the last complete read + 1,
/// each revision's events applied as one transaction; after a compaction, the prefix read again and
/// the differences applied as one transaction.
extension EtcdBackend {
    /// What a read of the whole prefix found: the values (markers and names that are not UTF-8 left
    /// out), the keys whose value is not JSON (reported and noted in the storage: they keep their
    /// last good value), and the revision of the read.
    struct PrefixRead {
        var values: [String: DefaultsStorage.RevisionedValue] = [:]
        var unreadable: Set<String> = []
        var revision: Int64
    }

    /// Reads the whole prefix.
    func readPrefix(_ storage: DefaultsStorage) throws(EtcdError) -> PrefixRead {
        let (keyValues, revision) = try client.range(prefix: prefixBytes)
        var read = PrefixRead(revision: revision)
        for keyValue in keyValues {
            guard let name = name(of: keyValue.key) else { continue }
            guard let json = json(of: keyValue.value, key: name, revision: keyValue.modRevision, storage: storage) else {
                read.unreadable.insert(name)
                continue
            }
            read.values[name] = (json, keyValue.modRevision)
        }
        return read
    }

    /// Watches the prefix from `revision`, replacing the current watch. The handler holds the storage
    /// weakly: the watch does not keep it alive, and the storage's deinit cancels it (`close()`).
    func watch(_ storage: DefaultsStorage, from revision: Int64) {
        let watch = client.watch(prefix: prefixBytes, startRevision: revision) { [weak self, weak storage] notice in
            guard let self, let storage else { return }
            self.handle(notice, storage: storage)
        }
        let replaced = lock.withLock { () -> EtcdWatch? in
            // Closed meanwhile (the storage is going away): stop the new watch too.
            if state.isClosed { return watch }
            defer { state.watch = watch }
            return state.watch
        }
        replaced?.cancel()
    }

    private func handle(_ notice: EtcdWatchNotice, storage: DefaultsStorage) {
        switch notice {
        case .events(let events, _):
            // One transaction per revision: a remote batch is delivered as one change.
            var index = events.startIndex
            while index < events.endIndex {
                let revision = events[index].modRevision
                var changes: [(key: String, json: JSONValue?)] = []
                while index < events.endIndex, events[index].modRevision == revision {
                    switch events[index] {
                    case .put(let keyValue):
                        // A value that is not JSON is noted (the key keeps its last good value).
                        if let name = name(of: keyValue.key),
                            let json = json(of: keyValue.value, key: name, revision: revision, storage: storage)
                        {
                            changes.append((name, json))
                        }
                    case .delete(let key, _):
                        if let name = name(of: key) { changes.append((name, nil)) }
                    }
                    index += 1
                }
                if !changes.isEmpty { storage.applyRemote(changes, revision: revision) }
            }
        case .compacted:
            // The watch stopped: read everything again (on the queue, in order with the sends).
            queue.async { [weak self, weak storage] in
                if let self, let storage { self.reload(storage, rewatch: true) }
            }
        case .disconnected(let error):
            reportOutage(DefaultsError(error, location: location), to: storage)
            if error.kind == .replyTooLarge {
                // The watch stopped on a line over the cap (it would meet it again): read everything
                // again and watch after it, as after a compaction, so other writers are still seen.
                queue.async { [weak self, weak storage] in
                    if let self, let storage { self.reload(storage, rewatch: true) }
                }
            }
        case .reconnected:
            // Resumed after the last revision delivered.
            noteRecovered(storage)
        }
    }

    /// Reads the prefix again and applies what changed as one transaction; with `rewatch` (the watch
    /// stopped: compacted), watches from the read's revision + 1. If the read fails, reports it once
    /// and tries again after a delay (doubling, up to `maximumRetryDelay`). Runs on the queue.
    func reload(_ storage: DefaultsStorage, rewatch: Bool, failures: Int = 0) {
        do throws(EtcdError) {
            let read = try readPrefix(storage)
            storage.applyReload(read.values, unreadable: read.unreadable, revision: read.revision)
            if rewatch { watch(storage, from: read.revision + 1) }
            noteRecovered(storage, revision: read.revision)
        } catch {
            reportOutage(DefaultsError(error, location: location), to: storage)
            let delay = min(Self.firstRetryDelay * (1 << min(failures, 16)), Self.maximumRetryDelay)
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay / .nanoseconds(1)))) { [weak self, weak storage] in
                if let self, let storage { self.reload(storage, rewatch: rewatch, failures: failures + 1) }
            }
        }
    }
}
