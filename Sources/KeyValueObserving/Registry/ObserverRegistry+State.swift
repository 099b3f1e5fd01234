extension _ObserverRegistry {
    /// Everything the registry knows that can change, guarded by its lock as one value.
    ///
    /// Its methods (here and in the `ObserverRegistry+…` files, one per concern) run no user code
    /// and release nothing that owns user code (entries, snapshots, user key paths, handlers): what a
    /// mutation takes out is returned, for the registry to release or call after unlocking.
    struct State {
        /// The observed keys, each with its current observers.
        var slots: ContiguousArray<Slot> = [] {
            didSet {
                setTableVersion &+= 1
                slotOffsetsAreStale = true
            }
        }
        /// The storage offset of each slot of an `@Observed` property whose offset is known, indexed
        /// like `slots` (`Int.min` for the others), for the locked set path's scan; and whether some
        /// such slot still waits to learn its offset. Rebuilt when a set needs them after a change
        /// of the slots (`indexSlotOffsetsIfNeeded`).
        private(set) var slotOffsets: ContiguousArray<Int> = []
        private(set) var hasSlotWaitingForItsOffset = false
        private var slotOffsetsAreStale = false
        /// The storage offsets of this object's `@Observed` properties that have been set while it
        /// had a registry and something was waiting to learn them, with their keys.
        var learnedOffsets: ContiguousArray<(offset: Int, key: AnyKeyPath)> = [] {
            didSet { setTableVersion &+= 1 }
        }
        /// Whether a set of the `@Observed` property stored at `offset` notifies when its key has no
        /// observers of its own (`automaticallyNotifiesObservers(for:)`, asked once per key and
        /// object, outside the lock, by a set on the locked path), for offsets in `learnedOffsets`.
        var automaticNotification: ContiguousArray<(offset: Int, notifies: Bool)> = []
        /// Changes with every change of `slots` or `learnedOffsets`: the set table is rebuilt when it
        /// differs from `publishedSetTableVersion` (`ObserverRegistry+ReadPath.swift`).
        var setTableVersion = 0
        var publishedSetTableVersion = 0
        /// Changes whenever a slot of kind `.keyPath` is added or removed.
        var keyPathSlotsVersion = 0
        var isTornDown = false
        /// The observers of every key of the object (`observeAnyKey`), in registration order.
        var anyKeyObservers = _AnyKeySnapshot.none {
            didSet { hasAnyKeyObservers = !anyKeyObservers.observers.isEmpty }
        }
        /// Whether `anyKeyObservers` has any, read by the set path without touching the snapshot.
        private(set) var hasAnyKeyObservers = false
        /// What to call when the object is deallocated (async sequences finish), by registration id.
        var deinitHandlers: [(id: UInt64, handler: @Sendable () -> Void)] = []
        /// What each thread is in the middle of on this object (silenced setters, a batch, manual
        /// changes); a thread has a record only while it is in the middle of something.
        var threads: [ThreadRecord] = []
        /// A finished batch, emptied, kept for the next one to open (its buffers keep their capacity).
        var spareBatch: _BatchState?

        @inline(__always)
        mutating func indexSlotOffsetsIfNeeded() {
            if slotOffsetsAreStale { indexSlotOffsets() }
        }

        private mutating func indexSlotOffsets() {
            slotOffsetsAreStale = false
            slotOffsets.removeAll(keepingCapacity: true)
            hasSlotWaitingForItsOffset = false
            for index in slots.indices {
                let isStorage = slots[index].kind == .storage
                slotOffsets.append(isStorage ? slots[index].offset ?? .min : .min)
                hasSlotWaitingForItsOffset = hasSlotWaitingForItsOffset || (isStorage && slots[index].offset == nil)
            }
        }

        /// The snapshot of the slot at `index`, made if it has one observer and none yet. Making it
        /// changes nothing the set table shows (it holds a single observer itself) nor any offset, so
        /// it does not count as a change of the slots.
        mutating func snapshot(ofSlotAt index: Int) -> _ObserverSnapshot {
            if let made = slots[index].made { return made }
            let (version, stale) = (setTableVersion, slotOffsetsAreStale)
            let snapshot = slots[index].makeSnapshot()
            (setTableVersion, slotOffsetsAreStale) = (version, stale)
            return snapshot
        }

        /// The snapshot of the slot at `index`, made as `snapshot(ofSlotAt:)` makes it, unretained:
        /// valid while the slot (or a copy of the slots array) holds it.
        mutating func unretainedSnapshot(ofSlotAt index: Int) -> Unmanaged<_ObserverSnapshot> {
            if !slots[index].hasSnapshot { _ = snapshot(ofSlotAt: index) }
            return slots[index].unretainedSnapshot
        }

        /// The value of `_ObserverRegistry.observedMask` for this state.
        // `mutating` here and below: called on the registry's stored state, a non-mutating member
        // would copy the whole state (retaining every field) first.
        var observedMask: UInt64 {
            mutating get {
                // Every set must reach the observers of every key.
                guard !hasAnyKeyObservers else { return .max }
                var mask: UInt64 = 0
                for index in slots.indices where slots[index].kind == .storage {
                    guard let offset = slots[index].offset else { return .max }
                    mask |= _maskBit(forOffset: offset)
                }
                return mask
            }
        }

        /// The value of `_ObserverRegistry.slowPathFlags` for this state.
        var slowPathFlags: UInt8 {
            // Inlined into `publish()`, which every registration and removal calls.
            @inline(__always) mutating get {
                var flags: UInt8 = hasAnyKeyObservers ? _SlowPath.anyKey : 0
                for record in threads {
                    if record.batch != nil { flags |= _SlowPath.batch }
                    if !record.silencedKeys.isEmpty { flags |= _SlowPath.silencedSetter }
                }
                return flags
            }
        }

        /// The record of `thread`, if it is in the middle of something on this object.
        mutating func record(of thread: _ThreadID) -> ThreadRecord? {
            threads.first { $0.thread.isSame(as: thread) }
        }

        /// Runs `body` on the record of `thread`, created if needed and dropped once empty.
        mutating func withRecord<Result>(of thread: _ThreadID, _ body: (inout ThreadRecord) -> Result) -> Result {
            let index: Int
            if let found = threads.firstIndex(where: { $0.thread.isSame(as: thread) }) {
                index = found
            } else {
                threads.append(ThreadRecord(thread: thread))
                index = threads.endIndex - 1
            }
            let result = body(&threads[index])
            if threads[index].isEmpty { threads.remove(at: index) }
            return result
        }
    }

    /// One observed key and its current observers.
    struct Slot {
        enum Kind {
            /// An `@Observed` property, found by storage offset once a set has revealed it.
            case storage
            /// A zero-sized `@Observed` property, found by key path on every set.
            case zeroSizedStorage
            /// A key that is not `@Observed`: no setter finds it.
            case keyPath
        }

        // The references first, then the optional offset and the one-byte fields together: 40
        // bytes a slot (56 with the kind and the offset first).
        /// The key: as the declaring class's accessor names it for an `@Observed` property, else the
        /// observed key path.
        let keyPath: AnyKeyPath
        /// The key's observer while it has exactly one; `nil` with several (then `made` has them).
        /// A key with one observer has no snapshot unless a path other than the set table asks for
        /// one (`State.snapshot(ofSlotAt:)`, which makes it once): a registration and its removal
        /// then allocate no snapshot, and the set table holds the entry itself.
        private(set) var single: _ObserverEntry? {
            didSet { refreshNeedsWillChange() }
        }
        /// The snapshot of the observers: always there with several, made on demand with one.
        fileprivate var made: _ObserverSnapshot? {
            didSet { refreshNeedsWillChange() }
        }
        var offset: Int?
        let kind: Kind
        /// `false` when the class turned automatic notification off for this key
        /// (`automaticallyNotifiesObservers(for:)`).
        let notifiesAutomatically: Bool

        init(kind: Kind, offset: Int?, keyPath: AnyKeyPath, entry: _ObserverEntry, notifiesAutomatically: Bool) {
            self.kind = kind
            self.offset = offset
            self.keyPath = keyPath
            self.notifiesAutomatically = notifiesAutomatically
            single = entry
            needsWillChange = Self.needsWillChange(entry)
        }

        /// Whether the snapshot exists (always with several observers).
        var hasSnapshot: Bool { made != nil }

        /// The snapshot, which exists (`hasSnapshot`), unretained.
        var unretainedSnapshot: Unmanaged<_ObserverSnapshot> { Unmanaged.passUnretained(made.unsafelyUnwrapped) }

        /// The snapshot, made if the slot has one observer and none yet. Through
        /// `State.snapshot(ofSlotAt:)`, which keeps the making from counting as a change of the
        /// slots (the set table's version).
        fileprivate mutating func makeSnapshot() -> _ObserverSnapshot {
            if let made { return made }
            let snapshot = _ObserverSnapshot.make(
                entries: CollectionOfOne(single.unsafelyUnwrapped), notifiesAutomatically: notifiesAutomatically)
            made = snapshot
            return snapshot
        }

        /// Whether a set can hand the change to the single observer alone, with no snapshot: it
        /// needs nothing before the store and the class lets sets notify.
        var deliversAlone: Bool {
            guard notifiesAutomatically, let single else { return false }
            return single.options.isDisjoint(with: [.old, .prior]) && !single.removesDuplicates
        }

        /// Whether some observer needs work before the change (a snapshot's `needsWillChange`),
        /// kept up to date by every change of the observers: the set path reads it without touching
        /// them.
        private(set) var needsWillChange: Bool

        private mutating func refreshNeedsWillChange() {
            needsWillChange = made?.needsWillChange ?? single.map(Self.needsWillChange) ?? false
        }

        private static func needsWillChange(_ entry: _ObserverEntry) -> Bool {
            entry.options.contains(.prior) || (!entry.isDirect && entry.options.contains(.old))
        }

        /// Adds `entry` after the observers. Returns the snapshot replaced, to release after unlocking.
        mutating func append(_ entry: _ObserverEntry) -> _ObserverSnapshot? {
            if let made {
                self.made = made.appending(entry)
                single = nil
                return made
            }
            made = _ObserverSnapshot.make(single.unsafelyUnwrapped, entry, notifiesAutomatically: notifiesAutomatically)
            single = nil
            return nil
        }

        /// What `remove(at:)` did.
        enum Removal {
            /// The entry was the slot's last: the caller removes the slot.
            case wasLast
            /// The entry is out; `replaced` is the snapshot to release after unlocking.
            case removed(replaced: _ObserverSnapshot)
        }

        /// The index of the entry of registration `id`, if it is here. Not mutating: asking every
        /// slot through a mutation of `slots` would cost each a uniqueness check and count as a
        /// change of the slots.
        func index(ofID id: UInt64) -> Int? {
            if let single { return single.id == id ? 0 : nil }
            return made.unsafelyUnwrapped.index(ofID: id)
        }

        /// Deactivates and removes the entry at `index` (found by `index(ofID:)`).
        mutating func remove(at index: Int) -> Removal {
            if let single {
                single.deactivate()
                return .wasLast
            }
            let snapshot = made.unsafelyUnwrapped
            snapshot.entries[index].deactivate()
            if snapshot.count == 1 { return .wasLast }
            if snapshot.count == 2 {
                single = snapshot.entries[1 - index]
                made = nil
                return .removed(replaced: snapshot)
            }
            made = snapshot.removing(at: index)
            return .removed(replaced: snapshot)
        }

        /// The observers, in registration order.
        var entries: Entries { Entries(single: single, snapshot: made) }

        struct Entries: RandomAccessCollection {
            let single: _ObserverEntry?
            let snapshot: _ObserverSnapshot?
            var startIndex: Int { 0 }
            var endIndex: Int { single == nil ? snapshot.unsafelyUnwrapped.count : 1 }
            subscript(index: Int) -> _ObserverEntry {
                if let single {
                    precondition(index == 0, "Slot.Entries: index out of range")
                    return single
                }
                return snapshot.unsafelyUnwrapped.entries[index]
            }
        }
    }

    /// What one thread is in the middle of on this object. One record per thread replaces one list
    /// per concern, so each operation finds its thread with one scan.
    struct ThreadRecord {
        let thread: _ThreadID
        /// `@Observed` keys whose setter notifications are silenced (a to-many mutation through the
        /// library, which sends its own notification), innermost last.
        var silencedKeys: [AnyKeyPath] = []
        /// The open batch (`coalescingChanges`), retained by the record: one retain taken when the
        /// batch opens (`beginBatch`) and handed to the thread that ends it (`endBatch`), so that the
        /// set path reads it with no retain of its own. A batch is always ended by its thread
        /// (`coalescingChanges` ends it in a `defer`), and the object, which holds this record, lives
        /// at least as long.
        var batch: Unmanaged<_BatchState>?
        /// `willChangeValue(for:)` calls waiting for their `didChangeValue(for:)`, innermost last.
        var pendingChanges: [PendingChange] = []

        init(thread: _ThreadID) {
            self.thread = thread
        }

        var isEmpty: Bool {
            silencedKeys.isEmpty && batch == nil && pendingChanges.isEmpty
        }
    }
}
