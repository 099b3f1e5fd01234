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
/// Registrations name an `@Observed` property by the key path its accessor receives (learned by the
/// registration probe). The setter names it by the byte offset of its storage, which costs nothing
/// (it folds to a constant), and hands over the key path only lazily, in a closure: the first set of
/// each property on this object calls it, and the registry learns which offset is which key path.
/// From then on a set finds its observers by comparing integers, with no key-path object and no
/// hashing. Keys that are not `@Observed` properties (their observers can only be notified
/// manually) never match a setter.
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
    /// The storage offsets of this object's `@Observed` properties that have been set while it had a
    /// registry, with their keys.
    @exclusivity(unchecked) private var learnedOffsets: ContiguousArray<(offset: Int, key: AnyKeyPath)> = []
    @exclusivity(unchecked) private var isTornDown = false
    @exclusivity(unchecked) private var probes: [Probe] = []
    /// How many registration probes are running on this object, on any thread. The `@Observed`
    /// getter reads it (relaxed) and only takes the lock when it is non-zero.
    @usableFromInline let probeCount = Atomic<Int>(0)
    private let nextID = Atomic<UInt64>(1)

    private struct Slot {
        /// For an `@Observed` property, the storage offset once a set has revealed it; `nil` before,
        /// and always for a key that is not `@Observed`.
        var offset: Int?
        /// The key: as the declaring class's accessor names it for an `@Observed` property, else the
        /// observed key path.
        let keyPath: AnyKeyPath
        let isObservedProperty: Bool
        var snapshot: _ObserverSnapshot

        func matches(_ key: _SlotKey) -> Bool {
            switch key {
            case .observedProperty(let keyPath): isObservedProperty && _sameKey(self.keyPath, keyPath)
            case .keyPath(let keyPath): !isObservedProperty && self.keyPath == keyPath
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
    /// `key` is called only the first time this object sees `offset`.
    ///
    /// - Complexity: O(*k*) in the number of observed keys of this object, by integer comparison.
    @usableFromInline
    func snapshot(forStorageAt offset: Int, key: () -> AnyKeyPath) -> _ObserverSnapshot? {
        mutex.lock()
        for index in slots.indices where slots[index].offset == offset {
            let snapshot = slots[index].snapshot
            mutex.unlock()
            return snapshot
        }
        if learnedOffsets.contains(where: { $0.offset == offset }) {
            mutex.unlock()
            return nil
        }
        mutex.unlock()
        return learn(offset: offset, key: key())
    }

    /// Records which key is stored at `offset`, resolves the slot waiting for it, and returns that
    /// slot's observers.
    private func learn(offset: Int, key: AnyKeyPath) -> _ObserverSnapshot? {
        mutex.lock()
        defer { mutex.unlock() }
        if !learnedOffsets.contains(where: { $0.offset == offset }) {
            learnedOffsets.append((offset, key))
        }
        for index in slots.indices where slots[index].isObservedProperty && slots[index].offset == nil {
            if _sameKey(slots[index].keyPath, key) {
                slots[index].offset = offset
                return slots[index].snapshot
            }
        }
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
            case .observedProperty(let keyPath):
                let offset = learnedOffsets.first { _sameKey($0.key, keyPath) }?.offset
                slots.append(Slot(offset: offset, keyPath: keyPath, isObservedProperty: true, snapshot: snapshot))
            case .keyPath(let keyPath):
                slots.append(Slot(offset: nil, keyPath: keyPath, isObservedProperty: false, snapshot: snapshot))
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
    func recordRead(key: () -> AnyKeyPath, storageType: Any.Type) {
        let key = key()
        let thread = pthread_self()
        mutex.lock()
        if let index = probes.lastIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
            probes[index].reads.append(ProbedRead(key: key, storageType: storageType))
        }
        mutex.unlock()
    }
}

/// Where a registration goes in the registry.
enum _SlotKey {
    /// An `@Observed` property, named by the key path its accessor receives.
    case observedProperty(AnyKeyPath)
    /// A key that is not an `@Observed` property, matched by key-path equality.
    case keyPath(AnyKeyPath)
}

/// Whether two keys name the same property: the same object for uniqued key-path literals, else
/// equal (key paths of generic classes are not uniqued).
func _sameKey(_ a: AnyKeyPath, _ b: AnyKeyPath) -> Bool {
    a === b || a == b
}
