import Synchronization

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The observers of one object, created on its first registration and owned by the object (one
/// strong reference, released in `KeyValueObservable.deinit`) and by each live token.
///
/// An `@Observed` property is identified by the byte offset of its storage in the object, which the
/// setter computes for free (it folds to a constant), so a set finds its observers by comparing
/// integers, with no key-path object and no hashing. Keys that are not `@Observed` properties (their
/// observers can only be notified manually) are identified by key-path equality.
///
/// All mutable state is guarded by `mutex`. No user code runs under it: handlers are called by the
/// setter after it has taken a snapshot and unlocked, and entries (which own the handlers and what
/// they capture) are released only after unlocking.
@usableFromInline
final class _ObserverRegistry: @unchecked Sendable {
    // Invariant: `slots`, `isTornDown` and `probes` are only accessed with `mutex` held; `probeCount`
    // and `nextID` are atomic; `mutex` is destroyed in deinit, when no one else can reach `self`.
    // The mutex makes every access exclusive, so the dynamic exclusivity checks (a thread-local
    // access set, on every set of an observed property) are redundant: `@exclusivity(unchecked)`.
    private let mutex = LockPrimitive()
    @exclusivity(unchecked) private var slots: ContiguousArray<Slot> = []
    @exclusivity(unchecked) private var isTornDown = false
    @exclusivity(unchecked) private var probes: [Probe] = []
    /// How many registration probes are running on this object, on any thread. The `@Observed`
    /// getter reads it (relaxed) and only takes the lock when it is non-zero.
    @usableFromInline let probeCount = Atomic<Int>(0)
    private let nextID = Atomic<UInt64>(1)

    private struct Slot {
        /// The storage offset of an `@Observed` property, or `Int.min` for a key matched by `keyPath`.
        let offset: Int
        /// The key as the declaring class's accessor names it (for introspection), or the observed
        /// key path of a key that is not `@Observed`.
        let keyPath: AnyKeyPath
        var snapshot: _ObserverSnapshot

        func matches(_ key: _SlotKey) -> Bool {
            switch key {
            case .storage(let offset, _): self.offset == offset
            case .keyPath(let keyPath): self.offset == Int.min && self.keyPath == keyPath
            }
        }
    }

    private struct Probe {
        let thread: pthread_t
        var reads: [ProbedRead]
    }

    /// An `@Observed` property read during a probe: its storage offset, the key path its accessor
    /// received, and the type of its storage (`Observed<Value>`).
    struct ProbedRead {
        let offset: Int
        let key: AnyKeyPath
        let storageType: Any.Type
    }

    init() {}

    deinit {
        mutex.destroy()
    }

    func makeID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    // MARK: The set path

    /// The observers of the `@Observed` property stored at `offset`, or `nil` if it has none.
    ///
    /// - Complexity: O(*k*) in the number of observed keys of this object, by integer comparison.
    @usableFromInline
    func snapshot(forStorageAt offset: Int) -> _ObserverSnapshot? {
        mutex.lock()
        for index in slots.indices where slots[index].offset == offset {
            let snapshot = slots[index].snapshot
            mutex.unlock()
            return snapshot
        }
        mutex.unlock()
        return nil
    }

    // MARK: Registration

    /// Adds `entry` to the observers of `key`. Returns `false` if the object is already gone.
    func add(_ entry: _ObserverEntry, for key: _SlotKey) -> Bool {
        mutex.lock()
        guard !isTornDown else {
            mutex.unlock()
            return false
        }
        var old: _ObserverSnapshot?
        if let index = slots.firstIndex(where: { $0.matches(key) }) {
            old = slots[index].snapshot
            var entries = slots[index].snapshot.entries
            entries.append(entry)
            slots[index].snapshot = _ObserverSnapshot(entries: entries)
        } else {
            let snapshot = _ObserverSnapshot(entries: [entry])
            switch key {
            case .storage(let offset, let keyPath):
                slots.append(Slot(offset: offset, keyPath: keyPath, snapshot: snapshot))
            case .keyPath(let keyPath):
                slots.append(Slot(offset: Int.min, keyPath: keyPath, snapshot: snapshot))
            }
        }
        mutex.unlock()
        withExtendedLifetime(old) {}
        return true
    }

    /// Removes the registration `id`, if it is still there. After this returns, the entry is inactive:
    /// no delivery to it starts any more.
    func remove(id: UInt64) {
        mutex.lock()
        var removed: _ObserverEntry?
        var oldSnapshot: _ObserverSnapshot?
        search: for slotIndex in slots.indices {
            let entries = slots[slotIndex].snapshot.entries
            for entryIndex in entries.indices where entries[entryIndex].id == id {
                removed = entries[entryIndex]
                oldSnapshot = slots[slotIndex].snapshot
                removed!.deactivate()
                if entries.count == 1 {
                    slots.remove(at: slotIndex)
                } else {
                    var remaining = entries
                    remaining.remove(at: entryIndex)
                    slots[slotIndex].snapshot = _ObserverSnapshot(entries: remaining)
                }
                break search
            }
        }
        mutex.unlock()
        // The handler and what it captured are released here, outside the lock: their deinit may
        // run user code that registers or invalidates.
        withExtendedLifetime((removed, oldSnapshot)) {}
    }

    /// Called once, from the object's deinit: every observer goes quiet and is released.
    func tearDown() {
        mutex.lock()
        isTornDown = true
        let gone = slots
        slots = []
        for slot in gone {
            for entry in slot.snapshot.entries { entry.deactivate() }
        }
        mutex.unlock()
        withExtendedLifetime(gone) {}
    }

    // MARK: Introspection

    /// The observed keys (as the `@Observed` accessors name them) and how many observers each has.
    func observerCounts() -> [(key: AnyKeyPath, count: Int)] {
        mutex.lock()
        defer { mutex.unlock() }
        return slots.map { ($0.keyPath, $0.snapshot.entries.count) }
    }

    // MARK: Registration probe

    /// Runs `read` (which reads the observed key once) and returns the `@Observed` keys of this object
    /// that it read on this thread, in order, duplicates included.
    func probe(_ read: () -> Void) -> [ProbedRead] {
        let thread = pthread_self()
        mutex.lock()
        probes.append(Probe(thread: thread, reads: []))
        mutex.unlock()
        probeCount.add(1, ordering: .relaxed)
        read()
        probeCount.subtract(1, ordering: .relaxed)
        mutex.lock()
        let index = probes.lastIndex { pthread_equal($0.thread, thread) != 0 }!
        let reads = probes.remove(at: index).reads
        mutex.unlock()
        return reads
    }

    /// Called by the `@Observed` getter while a probe runs somewhere on this object.
    @usableFromInline
    func recordRead(offset: Int, key: () -> AnyKeyPath, storageType: Any.Type) {
        let key = key()
        let thread = pthread_self()
        mutex.lock()
        if let index = probes.lastIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
            probes[index].reads.append(ProbedRead(offset: offset, key: key, storageType: storageType))
        }
        mutex.unlock()
    }
}

/// Where a registration goes in the registry.
enum _SlotKey {
    /// The `@Observed` property stored at `offset` (named `keyPath` by its declaring class).
    case storage(offset: Int, keyPath: AnyKeyPath)
    /// A key that is not an `@Observed` property, matched by key-path equality.
    case keyPath(AnyKeyPath)
}
