#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension _ObserverRegistry {
    /// Everything the registry knows that can change, guarded by its lock as one value.
    ///
    /// Its methods (here and in the `ObserverRegistry+…` files, one per concern) run no user code
    /// and release nothing that owns user code (entries, snapshots, user key paths, handlers): what a
    /// mutation takes out is returned, for the registry to release or call after unlocking.
    struct State {
        /// The observed keys, each with its current observers.
        var slots: ContiguousArray<Slot> = [] {
            didSet { setTableVersion &+= 1 }
        }
        /// The storage offsets of this object's `@Observed` properties that have been set while it
        /// had a registry and something was waiting to learn them, with their keys.
        var learnedOffsets: ContiguousArray<(offset: Int, key: AnyKeyPath)> = [] {
            didSet { setTableVersion &+= 1 }
        }
        /// Whether a set of the `@Observed` property stored at `offset` notifies when the key has no
        /// observers of its own (`automaticallyNotifiesObservers(for:)`, asked once per key, outside
        /// the lock, for the observers of every key), for offsets in `learnedOffsets`.
        var automaticNotification: ContiguousArray<(offset: Int, notifies: Bool)> = [] {
            didSet { setTableVersion &+= 1 }
        }
        /// Changes with every change of `slots`, `learnedOffsets`, `automaticNotification` or
        /// `anyKeyObservers`: the set table is rebuilt when it differs from `publishedSetTableVersion`
        /// (`ObserverRegistry+ReadPath.swift`).
        var setTableVersion = 0
        var publishedSetTableVersion = 0
        /// Changes whenever a slot of kind `.keyPath` is added or removed.
        var keyPathSlotsVersion = 0
        var isTornDown = false
        /// The observers of every key of the object (`observeAnyKey`), in registration order.
        var anyKeyObservers = _AnyKeySnapshot(observers: []) {
            didSet { setTableVersion &+= 1 }
        }
        /// What to call when the object is deallocated (async sequences finish), by registration id.
        var deinitHandlers: [(id: UInt64, handler: @Sendable () -> Void)] = []
        /// What each thread is in the middle of on this object (silenced setters, a batch, manual
        /// changes); a thread has a record only while it is in the middle of something.
        var threads: [ThreadRecord] = []
        /// The batch of the owner slot (`_ObserverRegistry.ownedBatch` points to it), kept between
        /// batches for reuse (`ObserverRegistry+Batches.swift`).
        var slotBatch: _BatchState?

        /// The value of `_ObserverRegistry.observedMask` for this state.
        // `mutating` here and below: called on the registry's stored state, a non-mutating member
        // would copy the whole state (retaining every field) first.
        var observedMask: UInt64 {
            mutating get {
                // Every set must reach the observers of every key.
                guard anyKeyObservers.observers.isEmpty else { return .max }
                var mask: UInt64 = 0
                for index in slots.indices where slots[index].kind == .storage {
                    guard let offset = slots[index].offset else { return .max }
                    mask |= _maskBit(forOffset: offset)
                }
                return mask
            }
        }

        /// The value of `_ObserverRegistry.slowPathFlags` for this state, but for the owner slot's
        /// bit (`_SlowPath.batch`), which its holder keeps.
        var slowPathFlags: UInt8 {
            // Inlined into `publish()`, which every registration and removal calls (out of line,
            // `tracked-register` measured 34 Ir/op more).
            @inline(__always) mutating get {
                var flags: UInt8 = anyKeyObservers.observers.isEmpty ? 0 : _SlowPath.anyKey
                for record in threads {
                    if record.batch != nil { flags |= _SlowPath.recordedBatch }
                    if !record.silencedKeys.isEmpty { flags |= _SlowPath.silencedSetter }
                }
                return flags
            }
        }

        /// The record of `thread`, if it is in the middle of something on this object.
        mutating func record(of thread: pthread_t) -> ThreadRecord? {
            threads.first { pthread_equal($0.thread, thread) != 0 }
        }

        /// Runs `body` on the record of `thread`, created if needed and dropped once empty.
        mutating func withRecord<Result>(of thread: pthread_t, _ body: (inout ThreadRecord) -> Result) -> Result {
            let index: Int
            if let found = threads.firstIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
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

        let kind: Kind
        var offset: Int?
        /// The key: as the declaring class's accessor names it for an `@Observed` property, else the
        /// observed key path.
        let keyPath: AnyKeyPath
        var snapshot: _ObserverSnapshot
    }

    /// What one thread is in the middle of on this object. One record per thread replaces one list
    /// per concern, so each operation finds its thread with one scan.
    struct ThreadRecord {
        let thread: pthread_t
        /// `@Observed` keys whose setter notifications are silenced (a to-many mutation through the
        /// library, which sends its own notification), innermost last.
        var silencedKeys: [AnyKeyPath] = []
        /// The open batch (`coalescingChanges`).
        var batch: _BatchState?
        /// `willChangeValue(for:)` calls waiting for their `didChangeValue(for:)`, innermost last.
        var pendingChanges: [PendingChange] = []

        init(thread: pthread_t) {
            self.thread = thread
        }

        var isEmpty: Bool {
            silencedKeys.isEmpty && batch == nil && pendingChanges.isEmpty
        }
    }
}
