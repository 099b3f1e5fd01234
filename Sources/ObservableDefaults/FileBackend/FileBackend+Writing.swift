import Dispatch
import KeyValueObserving

/// One write of the dirty keys, in steps: take them (`takeDirtyKeys`), merge them into the file under
/// the lock file (`merge`, reading it with `readBase`), apply the result in memory (`commit`), then
/// tell the observers.
extension FileBackend {
    /// A read-modify-write of one key, run by `writeDirtyKeys` under the file lock (see `update`).
    struct Transaction {
        let key: String
        /// Given the key's freshest entry, the entry to write (`nil` removes the key; its JSON must be
        /// set), or `nil` to write nothing (the caller keeps the reason).
        let body: (Entry?) -> Entry??
    }

    /// A broken file seen under the lock file: it may be another program's in-place rewrite
    /// (truncate, then write) caught half-way, which takes no lock. The write lets go of the lock,
    /// waits, and looks again: only the same broken file (same inode, size and modification time)
    /// is taken as broken, or the last one seen after `corruptionConfirmationLooks` looks at a file
    /// that keeps changing. Then the write throws `.corruptFile`, or, when asked to replace it,
    /// copies aside the very bytes that were parsed and replaces it. The caller keeps this across
    /// its tries.
    struct CorruptionSuspicion: Sendable {
        var identity: DefaultsFile.Identity?
        var looks = 0
    }

    /// One try of `writeDirtyKeys(transaction)` on the queue; returns where a broken file was copied
    /// before it was replaced.
    func writeOnQueue(
        _ storage: DefaultsStorage, _ transaction: Transaction?, replacingCorruptFile: Bool, suspicion: inout CorruptionSuspicion
    ) throws(DefaultsError) -> String? {
        if isOnQueue {
            return try writeDirtyKeys(storage, transaction, replacingCorruptFile: replacingCorruptFile, suspicion: &suspicion)
        }
        let result: Result<String?, DefaultsError> = queue.sync {
            do throws(DefaultsError) {
                return .success(try writeDirtyKeys(storage, transaction, replacingCorruptFile: replacingCorruptFile, suspicion: &suspicion))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Merges the dirty keys into the file: with the lock file held, re-read the file, apply only the
    /// keys this process changed (removals included), write a temporary file, fsync, rename, fsync
    /// the directory. Changes another process made meanwhile are applied here too and reported as
    /// theirs. With a `transaction`, its body runs after the re-read, on the key's freshest value,
    /// and its result is written with the dirty keys. Runs on the queue.
    ///
    /// - Parameter replacingCorruptFile: whether a file that does not parse is copied aside and
    ///   replaced by the last good values with the dirty keys (else nothing is written).
    /// - Returns: where a broken file was copied before it was replaced.
    /// - Throws: `suspectedCorruption` if the file is broken and may be another program's rewrite
    ///   caught half-way (nothing was written: try again after `corruptionConfirmationDelay`);
    ///   `.corruptFile` if it is broken and not to be replaced (nothing was written, the transaction's
    ///   body did not run; the changes stay pending); `.encodingFailed` naming a key whose value
    ///   cannot be encoded, after writing the others (it stays pending until it is replaced);
    ///   `.writeFailed` if the file cannot be written.
    @discardableResult
    func writeDirtyKeys(
        _ storage: DefaultsStorage, _ transaction: Transaction? = nil, replacingCorruptFile: Bool = false,
        suspicion: inout CorruptionSuspicion
    ) throws(DefaultsError) -> String? {
        let dirty = takeDirtyKeys(storage)
        guard !dirty.taken.isEmpty || transaction != nil || replacingCorruptFile else { return nil }
        try file.createDirectory()
        let merge: Merge?
        do {
            merge = try file.withExclusiveLock { (file) throws(DefaultsError) -> Merge? in
                try self.merge(
                    storage, dirty.changes, transaction, into: file, replacingCorruptFile: replacingCorruptFile, suspicion: &suspicion)
            }
        } catch {
            // The changes wait for the file to parse: not dropped if the last store goes meanwhile.
            if storage.withBackendSection({ state.waitsForRepair && $0.hasPendingChanges }) { queueState.heldForRepair = storage }
            throw error
        }
        guard let merge else {
            lock.withLock { state.corruptionSuspectedHook }?()
            throw DefaultsError.suspectedCorruption(path: file.path)
        }
        // Reported now that the lock file is unlocked: a handler may flush, which locks it again.
        if let corruption = merge.corruption { storage.report(corruption) }
        let copy = merge.corruption?.kind == .corruptFile ? merge.corruption?.corruptCopyPath : nil
        // The transaction's body wrote nothing: neither did this write.
        if transaction != nil, merge.transactionEntry == nil { return copy }
        // Written (a change made meanwhile is held by its own scheduled write): the wait is over.
        queueState.heldForRepair = nil
        if let replacedAt = merge.replacedAt { queueState.lastReplacement = replacedAt }
        commit(storage, merge, of: dirty, transaction: transaction)
        if let key = dirty.unencodable.min() {
            let count = dirty.unencodable.count
            let others = count > 1 ? " (and \(count - 1) other key\(count > 2 ? "s" : ""))" : ""
            throw DefaultsError(
                .encodingFailed, location: .file(path: file.path), key: key,
                reason: "its value cannot be written as JSON; it stays in memory only until it is replaced\(others)"
            )
        }
        return copy
    }

    /// The dirty keys a write takes.
    private struct DirtyKeys {
        /// Each key's change as taken, with its version: a key set again meanwhile stays dirty after
        /// the write.
        let taken: [PendingWrite.Change]
        /// The JSON to write for each key (`.some(nil)` removes it), except the unencodable ones.
        let changes: [String: JSONValue?]
        /// The keys whose value cannot be encoded (reported when set; they stay dirty).
        let unencodable: [String]
    }

    /// What a merge under the lock file did.
    private struct Merge {
        /// The values the file holds now (written, or as read if nothing needed writing).
        var written: [String: JSONValue] = [:]
        /// The file's values as read, to apply other processes' changes; `nil` if it was broken.
        var fileValues: [String: JSONValue]?
        /// When the file was replaced (`CLOCK_MONOTONIC`), if it was.
        var replacedAt: UInt64?
        /// A broken file or one with a key twice, copied aside: reported after the lock file is unlocked.
        var corruption: DefaultsError?
        /// The transaction's entry as written (outer `nil`: not run, or it wrote nothing).
        var transactionEntry: Entry??
        /// The transaction key's version when its body read it.
        var transactionVersion: UInt64?
    }

    /// The file's values a merge starts from, read under the lock file.
    private struct Base {
        var values: [String: JSONValue]
        /// Whether the file must be written even if the merge changes no value (it is missing, or
        /// broken and copied aside to be replaced).
        var mustWrite = false
        /// The file's values as read; `nil` if it was broken.
        var fileValues: [String: JSONValue]?
        /// A key the file holds twice: its error and the file's bytes, copied aside before a write
        /// drops one of its values.
        var duplicate: (error: DefaultsError, bytes: [UInt8])?
        /// The broken file's error, naming where it was copied.
        var corruption: DefaultsError?
    }

    /// Step 1: takes the dirty keys with their versions and encodes their values. Marks the
    /// scheduled write as started, so that a later set schedules another.
    private func takeDirtyKeys(_ storage: DefaultsStorage) -> DirtyKeys {
        let taken = storage.withBackendSection { $0.takePendingChanges() }
        var changes: [String: JSONValue?] = [:]
        var unencodable: [String] = []
        for change in taken {
            guard let entry = change.entry else {
                changes[change.key] = .some(nil)
                continue
            }
            if let json = DefaultsStorage.json(of: entry) {
                changes[change.key] = json
            } else {
                // Reported when it was set; it stays pending, and `writeDirtyKeys` names it.
                unencodable.append(change.key)
            }
        }
        return DirtyKeys(taken: taken, changes: changes, unencodable: unencodable)
    }

    /// Step 2, with the lock file held: re-reads `file` (the link's target if the file is a symbolic
    /// link), applies the changes and the transaction's entry, and writes the result if it differs
    /// from what the file holds (or the file is missing, or broken and to be replaced). Returns
    /// `nil`, writing nothing, while `suspicion` says to look again at a broken file.
    private func merge(
        _ storage: DefaultsStorage,
        _ changes: [String: JSONValue?],
        _ transaction: Transaction?,
        into file: DefaultsFile,
        replacingCorruptFile: Bool,
        suspicion: inout CorruptionSuspicion
    ) throws(DefaultsError) -> Merge? {
        if !queueState.hasSweptTemporaryFiles {
            // Once per storage: what writers killed mid-write (SIGKILL) left behind.
            queueState.hasSweptTemporaryFiles = true
            file.sweepAbandonedTemporaryFiles()
        }
        guard let base = try readBase(of: file, replacingCorruptFile: replacingCorruptFile, suspicion: &suspicion) else { return nil }
        var merge = Merge(fileValues: base.fileValues, corruption: base.corruption)
        var merged = base.values
        for (key, value) in changes { merged[key] = value }
        var mustWrite = base.mustWrite
        if let transaction {
            guard let entry = runTransaction(storage, transaction, base: base.values, version: &merge.transactionVersion) else {
                return merge
            }
            merge.transactionEntry = entry
            merged[transaction.key] = entry?.json
            mustWrite = true
        }
        if mustWrite || merged != base.values {
            if let (error, bytes) = base.duplicate {
                // The write keeps one value per key: keep the file with all of them first.
                merge.corruption = Self.naming(try copyAside(bytes, of: file, as: "duplicate-keys"), in: error)
            }
            merge.replacedAt = try file.write(merged, isPrivate: lock.withLock { state.createsPrivateFile }).replacedAt
        }
        merge.written = merged
        return merge
    }

    /// Reads the values a merge starts from. Once `suspicion` confirms a broken file (until then,
    /// returns `nil`), throws `.corruptFile`; or, `replacingCorruptFile`, copies it aside and starts
    /// from the last good values, to replace it.
    private func readBase(of file: DefaultsFile, replacingCorruptFile: Bool, suspicion: inout CorruptionSuspicion) throws(DefaultsError)
        -> Base?
    {
        switch try file.read() {
        case .missing:
            return Base(values: [:], mustWrite: true, fileValues: [:])
        case .values(let values, _):
            return Base(values: values, fileValues: values)
        case .duplicateKeys(let values, _, let error, let bytes):
            return Base(values: values, fileValues: values, duplicate: (error, bytes))
        case .corrupt(var error, let identity, let bytes):
            let (confirmed, lastGood) = lock.withLock { (state.confirmedCorruption, state.persisted) }
            if confirmed != identity, suspicion.identity != identity, suspicion.looks < Self.corruptionConfirmationLooks {
                suspicion.identity = identity
                suspicion.looks += 1
                return nil
            }
            lock.withLock {
                state.confirmedCorruption = identity
                if !replacingCorruptFile { state.waitsForRepair = true }
            }
            // A hand-edited file with a typo keeps every key it holds: never replace it unasked. The
            // changes wait for the file to parse again (see `reload`).
            guard replacingCorruptFile else {
                error.keepsLastGoodValues = !lastGood.isEmpty
                throw error
            }
            // Never overwrite a broken file without keeping it: copy it aside, then write the last
            // good values with this process's changes.
            var corruption = Self.naming(try copyAside(bytes, of: file), in: error)
            corruption.keepsLastGoodValues = !lastGood.isEmpty
            return Base(values: lastGood, mustWrite: true, corruption: corruption)
        }
    }

    /// `error`, a parse error of the file (broken, or a key twice), naming `copy`, where the file was
    /// copied aside.
    private static func naming(_ copy: String, in error: DefaultsError) -> DefaultsError {
        DefaultsError(
            error.kind, location: error.location, line: error.line, column: error.column, byteOffset: error.byteOffset,
            corruptCopyPath: copy, reason: error.reason
        )
    }

    /// The kinds of problem a successful write shows are over.
    static let causesGoneAfterWrite: Set<DefaultsError.Kind> = [.writeFailed, .readFailed, .unsupportedFile, .corruptFile]
    /// The causes a read that parses ends (a key found twice only if the file no longer has one).
    static let causesGoneAfterRead: Set<DefaultsError.Kind> = [.readFailed, .unsupportedFile, .corruptFile, .duplicateKey]

    /// Step 3: applies a finished merge in memory (other processes' changes, the file's values, the
    /// written keys that were not set again meanwhile, the transaction's entry), then tells the
    /// observers.
    private func commit(_ storage: DefaultsStorage, _ merge: Merge, of dirty: DirtyKeys, transaction: Transaction?) {
        // The file was read (and written): usable again if it was not.
        storage.markConnected(revision: nil)
        storage.withBackendSection { section in
            // Whether a set of the transaction's key came after its body read it: then that set is
            // the newer value (it stays pending, and is written next).
            let isTransactionCurrent = transaction.map { section.version(of: $0.key) == merge.transactionVersion } ?? false
            if let fileValues = merge.fileValues { applyForeign(fileValues, in: &section) }
            state.persisted = merge.written
            state.failedWrites = 0
            state.waitsForRepair = false
            state.confirmedCorruption = nil
            section.forgetReportedCauses(of: Self.causesGoneAfterWrite)
            if merge.replacedAt != nil { state.fileWrites += 1 }
            for change in dirty.taken where !dirty.unencodable.contains(change.key) {
                section.markWritten(change, as: merge.written[change.key])
            }
            if let transaction, isTransactionCurrent, case .some(let entry) = merge.transactionEntry {
                section.applyUpdate(transaction.key, entry: entry, revision: nil)
            }
        }
    }
}
