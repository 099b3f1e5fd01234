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
/// Keys are the key-path objects the `@Observed` accessors receive. Key-path literals are uniqued by
/// the runtime, so a setter finds its key by pointer identity, without hashing; key paths of generic
/// classes are not uniqued, and their slots are marked to be matched by equality instead.
///
/// All mutable state is guarded by `mutex`. No user code runs under it: handlers are called by the
/// setter after it has taken a snapshot and unlocked, and entries (which own the handlers and what
/// they capture) are released only after unlocking.
@usableFromInline
final class _ObserverRegistry: @unchecked Sendable {
    // Invariant: `slots`, `isTornDown` and `probes` are only accessed with `mutex` held; `probeCount`
    // and `nextID` are atomic; `mutex` is destroyed in deinit, when no one else can reach `self`.
    private let mutex = LockPrimitive()
    private var slots: ContiguousArray<Slot> = []
    private var equalitySlotCount = 0
    private var isTornDown = false
    private var probes: [Probe] = []
    /// How many registration probes are running on this object, on any thread. The `@Observed`
    /// getter reads it (relaxed) and only takes the lock when it is non-zero.
    @usableFromInline let probeCount = Atomic<Int>(0)
    private let nextID = Atomic<UInt64>(1)

    private struct Slot {
        let key: AnyKeyPath
        let matchesByEquality: Bool
        var snapshot: _ObserverSnapshot
    }

    private struct Probe {
        let thread: pthread_t
        var reads: [ProbedRead]
    }

    /// An `@Observed` key read during a probe, with its storage key path (`\Type._name`), whose
    /// description names the property.
    struct ProbedRead {
        let key: AnyKeyPath
        let storage: AnyKeyPath
    }

    init() {}

    deinit {
        mutex.destroy()
    }

    func makeID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    // MARK: The set path

    /// The observers of `key` now, or `nil` if it has none.
    ///
    /// - Complexity: O(*k*) in the number of observed keys of this object, by pointer comparison.
    @usableFromInline
    func snapshot(for key: AnyKeyPath) -> _ObserverSnapshot? {
        mutex.lock()
        let id = ObjectIdentifier(key)
        for index in slots.indices where ObjectIdentifier(slots[index].key) == id {
            let snapshot = slots[index].snapshot
            mutex.unlock()
            return snapshot
        }
        if equalitySlotCount > 0 {
            for index in slots.indices where slots[index].matchesByEquality && slots[index].key == key {
                let snapshot = slots[index].snapshot
                mutex.unlock()
                return snapshot
            }
        }
        mutex.unlock()
        return nil
    }

    // MARK: Registration

    /// Adds `entry` to the observers of `key`. Returns `false` if the object is already gone.
    func add(_ entry: _ObserverEntry, for key: AnyKeyPath, matchesByEquality: Bool) -> Bool {
        mutex.lock()
        guard !isTornDown else {
            mutex.unlock()
            return false
        }
        let index = slots.firstIndex { slot in
            slot.key === key || ((slot.matchesByEquality || matchesByEquality) && slot.key == key)
        }
        var old: _ObserverSnapshot?
        if let index {
            old = slots[index].snapshot
            var entries = slots[index].snapshot.entries
            entries.append(entry)
            slots[index].snapshot = _ObserverSnapshot(entries: entries)
        } else {
            slots.append(Slot(key: key, matchesByEquality: matchesByEquality, snapshot: _ObserverSnapshot(entries: [entry])))
            if matchesByEquality { equalitySlotCount += 1 }
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
                    if slots[slotIndex].matchesByEquality { equalitySlotCount -= 1 }
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
        equalitySlotCount = 0
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
        return slots.map { ($0.key, $0.snapshot.entries.count) }
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
    func recordRead(_ key: AnyKeyPath, storage: AnyKeyPath) {
        let thread = pthread_self()
        mutex.lock()
        if let index = probes.lastIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
            probes[index].reads.append(ProbedRead(key: key, storage: storage))
        }
        mutex.unlock()
    }
}
