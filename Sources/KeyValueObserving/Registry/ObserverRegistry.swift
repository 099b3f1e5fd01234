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
/// hashing; and `observedMask`, read without the lock, lets sets of properties nobody observes skip
/// the lock altogether. Zero-sized properties share offsets, so they are matched by key path instead.
/// Keys that are not `@Observed` properties (their observers can only be notified manually) never
/// match a setter.
///
/// All mutable state is guarded by `mutex`. No user code runs under it: handlers are called by the
/// setter after it has taken a snapshot and unlocked; entries and user key paths (which own handlers,
/// captures and subscript arguments) are released only after unlocking; user key paths are compared
/// (which may call a subscript argument's `==`) outside it.
@usableFromInline
final class _ObserverRegistry: @unchecked Sendable {
    // Invariant: `slots`, `learnedOffsets`, `keyPathSlotsVersion`, `isTornDown`, `probes`,
    // `deinitHandlers`, `anyKeyObservers`, `batches`, `silencedThreads` and `pendingChanges` are only
    // accessed with `mutex` held; `observedMask`, `probeCount` and `nextID` are atomic; `mutex` is destroyed in deinit, when
    // no one else can reach `self`. The mutex makes every access exclusive, so the dynamic
    // exclusivity checks (a thread-local access set, on every set of an observed property) are
    // redundant: `@exclusivity(unchecked)`.
    private let mutex = LockPrimitive()
    @exclusivity(unchecked) private var slots: ContiguousArray<Slot> = []
    /// The storage offsets of this object's `@Observed` properties that have been set while it had a
    /// registry and something was waiting to learn them, with their keys.
    @exclusivity(unchecked) private var learnedOffsets: ContiguousArray<(offset: Int, key: AnyKeyPath)> = []
    /// Changes whenever a slot of kind `.keyPath` is added or removed.
    @exclusivity(unchecked) private var keyPathSlotsVersion = 0
    @exclusivity(unchecked) private var isTornDown = false
    @exclusivity(unchecked) private var probes: [Probe] = []
    /// The observers of every key of the object (`observeAnyKey`), in registration order.
    @exclusivity(unchecked) private var anyKeyObservers = _AnyKeySnapshot(observers: [])
    /// Threads currently mutating a to-many property through the library (its own notification
    /// replaces the setter's).
    @exclusivity(unchecked) private var silencedThreads: [(thread: pthread_t, key: AnyKeyPath)] = []
    /// Open batches (`coalescingChanges`), one per thread at most.
    @exclusivity(unchecked) private var batches: [_BatchState] = []
    /// What to call when the object is deallocated (async sequences finish), by registration id.
    @exclusivity(unchecked) private var deinitHandlers: [(id: UInt64, handler: @Sendable () -> Void)] = []
    /// `willChangeValue(for:)` calls waiting for their `didChangeValue(for:)`, per thread, innermost last.
    @exclusivity(unchecked) private var pendingChanges: [PendingChange] = []
    /// One bit per storage offset class (`_maskBit(forOffset:)`) that may have observers; all bits
    /// while some observed property's offset is still unknown. Written under the lock (releasing),
    /// read by setters without it (acquiring).
    @usableFromInline let observedMask = Atomic<UInt64>(0)
    /// Whether `silencedThreads` is not empty; read by setters without the lock.
    @usableFromInline let hasSilencedThreads = Atomic<Bool>(false)
    /// Whether `batches` is not empty; read by setters without the lock.
    @usableFromInline let hasBatches = Atomic<Bool>(false)
    /// Whether `anyKeyObservers` is not empty; read by setters without the lock.
    @usableFromInline let hasAnyKeyObservers = Atomic<Bool>(false)
    /// How many registration probes are running on this object, on any thread. The `@Observed`
    /// getter reads it (relaxed) and only takes the lock when it is non-zero.
    @usableFromInline let probeCount = Atomic<Int>(0)
    private let nextID = Atomic<UInt64>(1)

    private struct Slot {
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

    /// A manual change announced by `willChangeValue(for:)`: the observers it will notify, and what
    /// they need from before the change.
    struct PendingChange {
        let thread: pthread_t
        let keyPath: AnyKeyPath
        let fileID: String
        let line: UInt
        let snapshots: [_ObserverSnapshot]
        let oldValue: Any?
        let pending: [ContiguousArray<Any?>?]
    }

    private struct Probe {
        let thread: pthread_t
        var reads: [ProbedRead]
    }

    /// An `@Observed` property read during a probe: the key path its accessor received, the type of
    /// its storage (`Observed<Value>`) and of its value, whether that is zero-sized, and the byte
    /// offset of its storage in the object (for an explicitly notified key, the offset it declares).
    struct ProbedRead {
        let key: AnyKeyPath
        let storageType: Any.Type
        let valueType: Any.Type
        let isZeroSized: Bool
        let offset: Int

        /// Whether the value is an observable object (or an optional one): a path may continue
        /// through it.
        var holdsObservableObject: Bool {
            var type = valueType
            while let wrapped = (type as? any _OptionalType.Type)?._wrappedType { type = wrapped }
            return type is KeyValueObservable.Type
        }
    }

    init() {}

    deinit {
        mutex.destroy()
    }

    @usableFromInline
    func makeID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    // MARK: The set path

    /// Whether the property stored at `offset` may have observers; `false` is definite.
    @inlinable
    func mayHaveObservers(atOffset offset: Int) -> Bool {
        observedMask.load(ordering: .acquiring) & _maskBit(forOffset: offset) != 0
    }

    /// The observers of the `@Observed` property stored at `offset`, or `nil` if it has none.
    /// `key` is called only while this object still has to learn which property `offset` is.
    ///
    /// - Complexity: O(*k*) in the number of observed keys of this object, by integer comparison.
    @usableFromInline
    func snapshot(forStorageAt offset: Int, key: () -> AnyKeyPath) -> _ObserverSnapshot? {
        mutex.lock()
        var needsLearning = false
        // By index, reading only the fields needed: copying a slot would retain its key and snapshot.
        for index in slots.indices where slots[index].kind == .storage {
            let slotOffset = slots[index].offset
            if slotOffset == offset {
                let snapshot = slots[index].snapshot
                mutex.unlock()
                return snapshot
            }
            needsLearning = needsLearning || slotOffset == nil
        }
        needsLearning = needsLearning && !learnedOffsets.contains { $0.offset == offset }
        mutex.unlock()
        return needsLearning ? learn(offset: offset, key: key()) : nil
    }

    /// The observers of a zero-sized `@Observed` property, found by key path.
    @usableFromInline
    func snapshot(forZeroSizedKey key: AnyKeyPath) -> _ObserverSnapshot? {
        mutex.lock()
        defer { mutex.unlock() }
        return slots.first { $0.kind == .zeroSizedStorage && _sameKey($0.keyPath, key) }?.snapshot
    }

    /// Records which key is stored at `offset`, resolves the slot waiting for it, and returns that
    /// slot's observers.
    private func learn(offset: Int, key: AnyKeyPath) -> _ObserverSnapshot? {
        mutex.lock()
        defer { mutex.unlock() }
        if !learnedOffsets.contains(where: { $0.offset == offset }) {
            learnedOffsets.append((offset, key))
        }
        for index in slots.indices where slots[index].kind == .storage && slots[index].offset == nil {
            if _sameKey(slots[index].keyPath, key) {
                slots[index].offset = offset
                updateMask()
                return slots[index].snapshot
            }
        }
        return nil
    }

    /// Records that the explicitly notified key `key` (see `_ExplicitlyNotifiedKeys`) is found at
    /// `offset`, so its slot is resolved from the start and no set ever has to reveal it.
    @usableFromInline
    func declareOffset(_ offset: Int, for key: AnyKeyPath) {
        mutex.lock()
        if !learnedOffsets.contains(where: { $0.offset == offset }) {
            learnedOffsets.append((offset, key))
        }
        mutex.unlock()
    }

    /// Recomputes `observedMask` from the slots. Called with the lock held, after every change.
    private func updateMask() {
        hasAnyKeyObservers.store(!anyKeyObservers.observers.isEmpty, ordering: .releasing)
        guard anyKeyObservers.observers.isEmpty else {
            // Every set must reach the observers of every key.
            observedMask.store(.max, ordering: .releasing)
            return
        }
        var mask: UInt64 = 0
        for slot in slots where slot.kind == .storage {
            guard let offset = slot.offset else {
                mask = .max
                break
            }
            mask |= _maskBit(forOffset: offset)
        }
        observedMask.store(mask, ordering: .releasing)
    }

    // MARK: Registration

    /// Adds `entry` to the observers of `key`. Returns `false` if the object is already gone.
    func add(_ entry: _ObserverEntry, for key: _SlotKey, notifiesAutomatically: Bool = true) -> Bool {
        mutex.lock()
        guard !isTornDown else {
            mutex.unlock()
            return false
        }
        let index: Int
        switch key {
        case .observedProperty(let keyPath, let isZeroSized):
            // `@Observed` keys are plain property key paths: comparing them runs no user code.
            let kind: Slot.Kind = isZeroSized ? .zeroSizedStorage : .storage
            guard let found = slots.firstIndex(where: { $0.kind == kind && _sameKey($0.keyPath, keyPath) }) else {
                let offset = isZeroSized ? nil : learnedOffsets.first { _sameKey($0.key, keyPath) }?.offset
                let snapshot = _ObserverSnapshot(entries: [entry], notifiesAutomatically: notifiesAutomatically)
                slots.append(Slot(kind: kind, offset: offset, keyPath: keyPath, snapshot: snapshot))
                updateMask()
                mutex.unlock()
                return true
            }
            index = found
        case .keyPath(let keyPath):
            guard let found = keyPathSlotIndex(for: keyPath) else {
                let snapshot = _ObserverSnapshot(entries: [entry], notifiesAutomatically: notifiesAutomatically)
                slots.append(Slot(kind: .keyPath, offset: nil, keyPath: keyPath, snapshot: snapshot))
                keyPathSlotsVersion &+= 1
                mutex.unlock()
                return true
            }
            index = found
        }
        let old = slots[index].snapshot
        var entries = old.entries
        entries.append(entry)
        slots[index].snapshot = _ObserverSnapshot(entries: entries, notifiesAutomatically: old.notifiesAutomatically)
        mutex.unlock()
        withExtendedLifetime(old) {}
        return true
    }

    /// The index of the slot of a key that is not `@Observed`, equal to `keyPath`. Called and returns
    /// with the lock held, but compares outside it: a user's key path may have subscript arguments,
    /// whose `==` is user code. Retries if the set of such slots changed meanwhile.
    private func keyPathSlotIndex(for keyPath: AnyKeyPath) -> Int? {
        while true {
            let version = keyPathSlotsVersion
            let candidates = slots.filter { $0.kind == .keyPath }.map(\.keyPath)
            mutex.unlock()
            let match = candidates.first { $0 == keyPath }
            mutex.lock()
            withExtendedLifetime(candidates) {}
            guard version == keyPathSlotsVersion else { continue }
            guard let match else { return nil }
            return slots.firstIndex { $0.kind == .keyPath && $0.keyPath === match }
        }
    }

    /// Removes the registration `id`, if it is still there. After this returns, the entry is inactive:
    /// no delivery to it starts any more.
    func remove(id: UInt64) {
        mutex.lock()
        // An entry of a dependent key sits in one slot per input (arrays allocate only when used).
        var removedSlots: [Slot] = []
        var oldSnapshot: _ObserverSnapshot?
        var moreOldSnapshots: [_ObserverSnapshot] = []
        var slotIndex = slots.startIndex
        while slotIndex < slots.endIndex {
            let entries = slots[slotIndex].snapshot.entries
            guard let entryIndex = entries.firstIndex(where: { $0.id == id }) else {
                slotIndex += 1
                continue
            }
            entries[entryIndex].deactivate()
            if oldSnapshot == nil {
                oldSnapshot = slots[slotIndex].snapshot
            } else {
                moreOldSnapshots.append(slots[slotIndex].snapshot)
            }
            if entries.count == 1 {
                let removed = slots.remove(at: slotIndex)
                if removed.kind == .keyPath { keyPathSlotsVersion &+= 1 }
                removedSlots.append(removed)
            } else {
                var remaining = entries
                remaining.remove(at: entryIndex)
                slots[slotIndex].snapshot = _ObserverSnapshot(
                    entries: remaining,
                    notifiesAutomatically: slots[slotIndex].snapshot.notifiesAutomatically
                )
                slotIndex += 1
            }
        }
        var oldAnyKey: _AnyKeySnapshot?
        if let index = anyKeyObservers.observers.firstIndex(where: { $0.id == id }) {
            oldAnyKey = anyKeyObservers
            anyKeyObservers.observers[index].deactivate()
            var remaining = anyKeyObservers.observers
            remaining.remove(at: index)
            anyKeyObservers = _AnyKeySnapshot(observers: remaining)
            updateMask()
        }
        if !removedSlots.isEmpty { updateMask() }
        let removedHandler = deinitHandlers.firstIndex { $0.id == id }.map { deinitHandlers.remove(at: $0) }
        mutex.unlock()
        withExtendedLifetime((removedHandler, oldAnyKey)) {}
        // The handler, what it captured and the slots' key paths are released here, outside the
        // lock: their deinit may run user code that registers or invalidates.
        withExtendedLifetime((removedSlots, oldSnapshot, moreOldSnapshots)) {}
    }

    /// Called once, from the object's deinit: every observer goes quiet and is released.
    func tearDown() {
        mutex.lock()
        let unfinished = pendingChanges
        pendingChanges = []
        let finishing = deinitHandlers
        deinitHandlers = []
        let goneAnyKey = anyKeyObservers
        goneAnyKey.observers.forEach { $0.deactivate() }
        anyKeyObservers = _AnyKeySnapshot(observers: [])
        isTornDown = true
        let gone = slots
        slots = []
        updateMask()
        for slot in gone {
            for entry in slot.snapshot.entries { entry.deactivate() }
        }
        mutex.unlock()
        withExtendedLifetime((gone, goneAnyKey)) {}
        for (_, handler) in finishing { handler() }
        for change in unfinished {
            KeyValueObservingDiagnosticCenter.report(KeyValueObservingDiagnostic(
                kind: .unbalancedChangeNotification,
                objectType: KeyValueObservable.self,
                keyPath: change.keyPath,
                detail: "willChangeValue(for:) was never followed by didChangeValue(for:) before the object was "
                    + "deallocated; its observers were never notified of that change.",
                fileID: change.fileID,
                line: change.line
            ))
        }
    }

    /// Adds an observer of every key. Returns `false` if the object is already gone.
    func addAnyKeyObserver(_ observer: _AnyKeyObserver) -> Bool {
        mutex.lock()
        guard !isTornDown else {
            mutex.unlock()
            return false
        }
        let old = anyKeyObservers
        anyKeyObservers = _AnyKeySnapshot(observers: old.observers + [observer])
        updateMask()
        mutex.unlock()
        withExtendedLifetime(old) {}
        return true
    }

    /// The observers of every key now, or `nil` if there are none.
    @usableFromInline
    func anyKeySnapshot() -> _AnyKeySnapshot? {
        guard hasAnyKeyObservers.load(ordering: .acquiring) else { return nil }
        mutex.lock()
        defer { mutex.unlock() }
        return anyKeyObservers.observers.isEmpty ? nil : anyKeyObservers
    }

    /// Runs `body` (which sets the `@Observed` property `key`) with that property's setter
    /// notifications silenced on this thread; other properties set meanwhile (by a `didSet`, say)
    /// notify as usual.
    func silencingSetter<Result>(of key: AnyKeyPath, _ body: () throws -> Result) rethrows -> Result {
        let thread = pthread_self()
        mutex.lock()
        silencedThreads.append((thread, key))
        hasSilencedThreads.store(true, ordering: .releasing)
        mutex.unlock()
        defer {
            mutex.lock()
            if let index = silencedThreads.lastIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
                silencedThreads.remove(at: index)
            }
            hasSilencedThreads.store(!silencedThreads.isEmpty, ordering: .releasing)
            mutex.unlock()
        }
        return try body()
    }

    /// Whether the setter of `key` is silenced on this thread.
    @usableFromInline
    func isSilenced(_ key: AnyKeyPath) -> Bool {
        guard hasSilencedThreads.load(ordering: .acquiring) else { return false }
        let thread = pthread_self()
        mutex.lock()
        defer { mutex.unlock() }
        // Wrapper key paths are plain property key paths: comparing them runs no user code.
        return silencedThreads.contains { pthread_equal($0.thread, thread) != 0 && _sameKey($0.key, key) }
    }

    /// Runs `body` on the open batches, with the lock held (`body` runs no user code).
    func withBatches<Result>(_ body: (inout [_BatchState]) -> Result) -> Result {
        mutex.lock()
        let result = body(&batches)
        hasBatches.store(!batches.isEmpty, ordering: .releasing)
        mutex.unlock()
        return result
    }

    /// Calls `handler` when the object is deallocated, unless registration `id` is removed first.
    /// Returns `false` (and does not keep `handler`) if the object is already gone.
    func onObjectDeinit(id: UInt64, _ handler: @escaping @Sendable () -> Void) -> Bool {
        mutex.lock()
        defer { mutex.unlock() }
        guard !isTornDown else { return false }
        deinitHandlers.append((id, handler))
        return true
    }

    // MARK: Manual notification

    /// The observers of `key` now, or `nil` if it has none.
    func snapshot(for key: _SlotKey) -> _ObserverSnapshot? {
        mutex.lock()
        defer { mutex.unlock() }
        switch key {
        case .observedProperty(let keyPath, let isZeroSized):
            let kind: Slot.Kind = isZeroSized ? .zeroSizedStorage : .storage
            return slots.first { $0.kind == kind && _sameKey($0.keyPath, keyPath) }?.snapshot
        case .keyPath(let keyPath):
            return keyPathSlotIndex(for: keyPath).map { slots[$0].snapshot }
        }
    }

    func pushPendingChange(_ change: PendingChange) {
        mutex.lock()
        pendingChanges.append(change)
        mutex.unlock()
    }

    /// The innermost pending change of this thread, left in place.
    func innermostPendingChange() -> PendingChange? {
        let thread = pthread_self()
        mutex.lock()
        defer { mutex.unlock() }
        return pendingChanges.last { pthread_equal($0.thread, thread) != 0 }
    }

    /// Removes the innermost pending change of this thread (the one `innermostPendingChange()` returned).
    func popPendingChange() {
        let thread = pthread_self()
        mutex.lock()
        let removed = pendingChanges.lastIndex { pthread_equal($0.thread, thread) != 0 }.map { pendingChanges.remove(at: $0) }
        mutex.unlock()
        withExtendedLifetime(removed) {}
    }

    // MARK: Introspection

    /// The observed keys and how many registrations each has. Observers of `@Observed` properties
    /// count under the key of the declaring class's accessor; other observers (dependent keys, keys
    /// notified manually) once each, under the key they observed, though they sit in one slot per
    /// input; the internal observers that follow dependent keys' paths through other objects do not
    /// count.
    func observerCounts() -> (keys: [(key: AnyKeyPath, storageOffset: Int?, count: Int)], anyKey: Int, followers: Int) {
        mutex.lock()
        var counts: [(key: AnyKeyPath, storageOffset: Int?, count: Int)] = []
        var seen: Set<UInt64> = []
        var followers: Set<UInt64> = []
        func count(_ key: AnyKeyPath, _ offset: Int?) {
            if let index = counts.firstIndex(where: { $0.key === key }) {
                counts[index].count += 1
            } else {
                counts.append((key, offset, 1))
            }
        }
        for slot in slots {
            for entry in slot.snapshot.entries {
                if entry.isDirect {
                    count(slot.keyPath, slot.kind == .storage ? slot.offset : nil)
                } else if let reading = entry as? _KeyPathObserver, seen.insert(entry.id).inserted {
                    count(reading.observedKey, nil)
                } else if entry is _SignalObserver {
                    followers.insert(entry.id)
                }
            }
        }
        let anyKey = anyKeyObservers.observers.count
        mutex.unlock()
        return (counts, anyKey, followers.count)
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
    func recordRead(
        key: () -> AnyKeyPath,
        storageType: Any.Type,
        valueType: Any.Type,
        isZeroSized: Bool,
        offset: () -> Int
    ) {
        let key = key()
        let read = ProbedRead(key: key, storageType: storageType, valueType: valueType, isZeroSized: isZeroSized, offset: offset())
        if !isZeroSized, storageType != valueType {
            // An `@Observed` property: its name is found by its storage offset (explicitly notified keys
            // are named by their class).
            _KeyNames.learn(key, storageOffset: read.offset)
        }
        let thread = pthread_self()
        mutex.lock()
        if let index = probes.lastIndex(where: { pthread_equal($0.thread, thread) != 0 }) {
            probes[index].reads.append(read)
        }
        mutex.unlock()
    }
}

/// The bit of `_ObserverRegistry.observedMask` for a storage offset. Distinct offsets may share a bit
/// (then a set takes the lock to find out); an offset's bit is always the same.
@inlinable
func _maskBit(forOffset offset: Int) -> UInt64 {
    1 &<< UInt64(truncatingIfNeeded: (offset &>> 3) & 63)
}

/// `Optional`, seen through its wrapped type (a path continues through an optional child).
protocol _OptionalType {
    static var _wrappedType: Any.Type { get }
}

extension Optional: _OptionalType {
    static var _wrappedType: Any.Type { Wrapped.self }
}

/// Where a registration goes in the registry.
enum _SlotKey {
    /// An `@Observed` property, named by the key path its accessor receives.
    case observedProperty(AnyKeyPath, isZeroSized: Bool)
    /// A key that is not an `@Observed` property, matched by key-path equality.
    case keyPath(AnyKeyPath)
}

extension _SlotKey {
    func isSame(as other: _SlotKey) -> Bool {
        switch (self, other) {
        case (.observedProperty(let a, let zeroA), .observedProperty(let b, let zeroB)): zeroA == zeroB && _sameKey(a, b)
        case (.keyPath(let a), .keyPath(let b)): _sameKey(a, b)
        default: false
        }
    }
}

/// Whether two keys name the same property: the same object for uniqued key-path literals, else
/// equal (key paths of generic classes are not uniqued).
func _sameKey(_ a: AnyKeyPath, _ b: AnyKeyPath) -> Bool {
    a === b || a == b
}
