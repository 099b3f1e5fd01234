#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Batches (`coalescingChanges`): one per object and thread, in the thread's record; and the lookups of
// the set path's slow path (`_setNotifyingAnyKey`): without the lock for a change recorded in the
// calling thread's batch (`batchShortcut`), else everything under one lock (`slowPathLookup`).

/// What the slow path of a set needs to know, found under one lock (`slowPathLookup`).
@usableFromInline
struct _SlowPathLookup {
    /// The key's observers, or `nil` if it has none (or they are still to be learned: `needsLearning`).
    @usableFromInline var snapshot: _ObserverSnapshot?
    /// The key, if the caller passed it or a slot names it.
    @usableFromInline var key: AnyKeyPath?
    /// Where `snapshot` was found in the registry's slots, or -1.
    @usableFromInline var slotIndex = -1
    /// A slot waits to learn which property it is, and this one may be it: ask `snapshot(forStorageAt:key:)`.
    @usableFromInline var needsLearning = false
    /// The observers of every key, if there are some and the set may have to tell them.
    @usableFromInline var anyKey: _AnyKeySnapshot?
    /// The calling thread's open batch on the object (unretained: the thread's record holds it until
    /// this thread ends it).
    @usableFromInline var batch: Unmanaged<_BatchState>?
    /// The set only stores: its setter is silenced (a to-many mutation sends its own notification), or
    /// its key already changed in the thread's batch.
    @usableFromInline var storesOnly = false

    init(key: AnyKeyPath?) {
        self.key = key
    }
}

/// How a set of a property goes into the calling thread's batch without the lock (`batchShortcut`).
@usableFromInline
enum _BatchShortcutResult {
    /// Not that way: take the locked path (`slowPathLookup`).
    case unavailable
    /// The key already changed in the batch: the set only stores.
    case repeated
    /// The change is recorded: write the value before it into the change's `oldValue`, then store.
    case recorded(UnsafeMutablePointer<_BatchedChange>)
    /// The key has no observers (`slot` is -1), so the class decides whether it notifies, by key; or
    /// the batch has no finisher for the value's type yet. Record it with `_recordBatchedChange`.
    case recordWithKey(Unmanaged<_BatchState>, slot: Int)
}

/// A thread's identity as an integer (0 is no thread).
@inline(__always)
func _threadID(_ thread: pthread_t) -> UInt {
    #if canImport(Glibc)
    UInt(thread)
    #else
    UInt(bitPattern: thread)
    #endif
}

extension _ObserverRegistry {
    /// Whether a set of the `@Observed` property stored at `offset` (not a zero-sized one) goes into
    /// the calling thread's batch without the lock: when that thread owns `ownedBatch` and the
    /// batch's shortcut is valid (no observer needs anything at the first change of a key). Records
    /// the change when it can; the caller writes its old value.
    ///
    /// - Complexity: O(1) for a property whose storage offset class (`_maskBit(forOffset:)`) no
    ///   other observed or changed property shares.
    @usableFromInline
    func batchShortcut(offset: Int, storage: UnsafeMutableRawPointer, valueType: ObjectIdentifier, trivialSize: Int, flags: UInt8)
        -> _BatchShortcutResult
    {
        // A silenced setter is recognised by its key, under the lock.
        guard flags & (_SlowPath.batch | _SlowPath.silencedSetter) == _SlowPath.batch,
            batchOwner.load(ordering: .relaxed) == _threadID(pthread_self()),
            let pointer = ownedBatch.load(ordering: .relaxed)
        else { return .unavailable }
        let batch = Unmanaged<_BatchState>.fromOpaque(pointer)
        return batch._withUnsafeGuaranteedRef { state in
            guard state.shortcut.isUsable, state.shortcut.version == stateVersion.load(ordering: .acquiring) else {
                return .unavailable
            }
            if state.hasChanged(offset: offset, key: nil) { return .repeated }
            let slot = state.shortcut.slotIndex(ofPropertyAt: offset)
            let finisher = state.finisher(for: valueType)
            guard slot >= 0, finisher >= 0 else { return .recordWithKey(batch, slot: slot) }
            return .recorded(
                state.append(offset: offset, storage: storage, slotIndex: slot, finisher: finisher, extra: -1, trivialSize: trivialSize))
        }
    }

    /// What the slow path of a set of the property stored at `offset` needs (for a zero-sized property,
    /// `offset` is -1 and `key` names it), with one lock round trip. `flags` is the value of
    /// `slowPathFlags` the caller read; `key` must be passed when it has the silenced-setter bit.
    ///
    /// - Complexity: O(*k*) in the number of observed keys, plus O(*c*) in the keys changed so far in
    ///   the thread's batch, by integer comparison.
    @usableFromInline
    func slowPathLookup(offset: Int, key: AnyKeyPath?, flags: UInt8) -> _SlowPathLookup {
        var found = _SlowPathLookup(key: key)
        let thread: pthread_t? = flags & (_SlowPath.batch | _SlowPath.silencedSetter) != 0 ? pthread_self() : nil
        mutex.lock()
        if let thread, let record = state.threads.firstIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
            // Wrapper key paths are plain property key paths: comparing them runs no user code.
            if let key, state.threads[record].silencedKeys.contains(where: { _sameKey($0, key) }) {
                mutex.unlock()
                found.storesOnly = true
                return found
            }
            if let batch = state.threads[record].batch {
                if batch.hasChanged(offset: offset, key: key) {
                    mutex.unlock()
                    found.storesOnly = true
                    return found
                }
                refreshShortcut(of: batch)
                found.batch = Unmanaged.passUnretained(batch)
            }
        }
        let (index, needsLearning) = slotIndex(ofPropertyAt: offset, key: key, hint: -1)
        if index >= 0 {
            found.snapshot = state.slots[index].snapshot
            found.key = state.slots[index].keyPath
            found.slotIndex = index
        }
        found.needsLearning = needsLearning
        // In a batch, observers of every key hear of its first change only.
        let priorSent = found.batch?._withUnsafeGuaranteedRef { $0.anyKeyPriorSent } ?? false
        if !priorSent, !state.anyKeyObservers.observers.isEmpty {
            found.anyKey = state.anyKeyObservers
        }
        mutex.unlock()
        return found
    }

    /// With the lock held: brings `batch.shortcut` up to date with the state.
    private func refreshShortcut(of batch: _BatchState) {
        let version = stateVersion.load(ordering: .relaxed)
        guard batch.shortcut.version != version else { return }
        batch.shortcut.version = version
        batch.shortcut.clear()
        if !state.anyKeyObservers.observers.isEmpty, state.anyKeyObservers.wantsPrior { return }
        for index in state.slots.indices where state.slots[index].kind == .storage {
            // A slot still to learn its offset could be any property's.
            guard let offset = state.slots[index].offset else { return }
            let snapshot = Unmanaged.passUnretained(state.slots[index].snapshot)
            let isSimple = snapshot._withUnsafeGuaranteedRef { !$0.needsWillChange && $0.notifiesAutomatically }
            guard isSimple else { return }
            batch.shortcut.add(offset: offset, slot: index)
        }
        batch.shortcut.isUsable = true
    }

    /// With the lock held: the index of the slot of the `@Observed` property stored at `offset` (or,
    /// for `offset` -1, of the zero-sized one named `key`), trying `hint` first; -1 if none, then
    /// with whether a slot waits to learn its offset and this offset may be it.
    ///
    /// By index, reading only the fields needed: copying a slot, or calling a method of `State`,
    /// would retain what it holds.
    @inline(__always)
    private func slotIndex(ofPropertyAt offset: Int, key: AnyKeyPath?, hint: Int) -> (index: Int, needsLearning: Bool) {
        if offset < 0 {
            guard let key else { return (-1, false) }
            for index in state.slots.indices where state.slots[index].kind == .zeroSizedStorage {
                if _sameKey(state.slots[index].keyPath, key) { return (index, false) }
            }
            return (-1, false)
        }
        if hint >= 0, hint < state.slots.count, state.slots[hint].kind == .storage, state.slots[hint].offset == offset {
            return (hint, false)
        }
        var waiting = false
        for index in state.slots.indices where state.slots[index].kind == .storage {
            let slotOffset = state.slots[index].offset
            if slotOffset == offset { return (index, false) }
            waiting = waiting || slotOffset == nil
        }
        return (-1, waiting && !state.learnedOffsets.contains { $0.offset == offset })
    }

    func beginBatch() {
        let thread = pthread_self()
        mutex.lock()
        // A finished batch is reused: its arrays keep their capacity, its shortcut may still hold.
        let spare = state.spareBatch
        state.spareBatch = nil
        let opened: _BatchState? = state.withRecord(of: thread) { record in
            if let batch = record.batch {
                batch.depth += 1
                return nil
            }
            let batch = spare ?? _BatchState()
            batch.depth = 1
            record.batch = batch
            return batch
        }
        if let opened {
            if batchOwner.load(ordering: .relaxed) == 0 {
                ownedBatch.store(Unmanaged.passUnretained(opened).toOpaque(), ordering: .relaxed)
                batchOwner.store(_threadID(thread), ordering: .relaxed)
            }
            publishSlowPathFlags()
        } else {
            state.spareBatch = spare
        }
        mutex.unlock()
    }

    func endBatch(on object: AnyObject) {
        let thread = pthread_self()
        mutex.lock()
        let finished: _BatchState? = state.withRecord(of: thread) { record in
            guard let batch = record.batch else { return nil }
            batch.depth -= 1
            guard batch.depth == 0 else { return nil }
            record.batch = nil
            return batch
        }
        guard let batch = finished else {
            mutex.unlock()
            return
        }
        if batchOwner.load(ordering: .relaxed) == _threadID(thread) {
            batchOwner.store(0, ordering: .relaxed)
            ownedBatch.store(nil, ordering: .relaxed)
        }
        publishSlowPathFlags()
        // Delivered after the batch is closed: changes made by handlers notify as usual, and the batch
        // is reachable from here only. The observers notified are those of the end of the batch (one
        // may have registered meanwhile).
        let count = batch.changeCount
        let anyKey = count == 0 || state.anyKeyObservers.observers.isEmpty ? nil : state.anyKeyObservers
        var keys: [AnyKeyPath] = []
        var offsets: [Int?] = []
        if anyKey != nil {
            keys.reserveCapacity(count)
            offsets.reserveCapacity(count)
        }
        var learning: [Int] = []
        for index in 0..<count {
            let change = batch.changes[index]
            let extraKey = change.extra < 0 ? nil : batch.extras[change.extra].key
            let (slot, needsLearning) = slotIndex(ofPropertyAt: change.offset, key: extraKey, hint: change.slotIndex)
            if slot >= 0 { batch.changes[index].current = Unmanaged.passRetained(state.slots[slot].snapshot) }
            if needsLearning { learning.append(index) }
            if anyKey != nil {
                // A change is recorded without its key only when a slot knew its offset, which the
                // registry then remembers for good.
                if let key = extraKey ?? (slot < 0 ? nil : state.slots[slot].keyPath)
                    ?? state.learnedOffsets.first(where: { $0.offset == change.offset })?.key
                {
                    keys.append(key)
                    offsets.append(change.offset < 0 ? nil : change.offset)
                }
            }
        }
        mutex.unlock()
        for index in learning {
            // Only changes recorded with their key can be waiting to be learned.
            let extra = batch.changes[index].extra
            guard extra >= 0, let key = batch.extras[extra].key else { continue }
            batch.changes[index].current = snapshot(forStorageAt: batch.changes[index].offset, key: { key }).map { .passRetained($0) }
        }
        // Every final value is read before any handler runs; a trivial one by copying its bytes.
        for index in 0..<count {
            let change = batch.changes + index
            let size = change.pointee.trivialSize
            if size >= 0 {
                withUnsafeMutableBytes(of: &change.pointee.finalValue.words) { $0.baseAddress!.copyMemory(from: change.pointee.storage, byteCount: size) }
            } else {
                batch.finishers[change.pointee.finisher].finish(batch, index, .readFinalValue, object)
            }
        }
        for index in 0..<count {
            batch.finishers[batch.changes[index].finisher].finish(batch, index, .deliver, object)
        }
        anyKey?.didChange(object, keys, storageOffsets: .many(offsets))
        // Recycled for the next batch, emptied first: emptying releases what the changes held.
        guard batch.reset() else { return }
        mutex.lock()
        if state.spareBatch == nil { state.spareBatch = batch }
        mutex.unlock()
    }

    /// Stores `slowPathFlags` from the state, after a change of the threads' records only (a batch
    /// opened or closed): that changes no observer, so `stateVersion` stays. Called with the lock held.
    private func publishSlowPathFlags() {
        slowPathFlags.store(state.slowPathFlags, ordering: .releasing)
    }

    /// The calling thread's open batch on this object, if any.
    @usableFromInline
    func currentBatch() -> _BatchState? {
        guard slowPathFlags.load(ordering: .acquiring) & _SlowPath.batch != 0 else { return nil }
        let thread = pthread_self()
        mutex.lock()
        defer { mutex.unlock() }
        return state.record(of: thread)?.batch
    }
}
