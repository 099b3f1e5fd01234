import Synchronization

/// An immutable table published to lock-free readers, with epoch-based reclamation: readers use
/// the current table without a lock and without reference counting; a table replaced by a writer
/// is freed once no reader can still be using it. The set path's observers
/// (`_ObserverRegistry.setTables`) and the process-wide cache of `@Observed` keys
/// (`_ObservedKeyCache`) are published this way.
///
/// Writers call `publish` and `load` with the owner's lock held (the lock they pass to
/// `exitReading` and `reclaim`, which take it): it guards the retired tables. A published table
/// must never be written again: a writer that wants to change it fills a new one and publishes that
/// (`_HashTable.copy(reserving:)`). A writer never waits for readers, it only defers the free, so
/// readers may nest and a reader may write (a handler that registers inside a set's read section).
///
/// Protocol, with acquire/release atomics only (so the thread sanitizer checks it exactly):
/// - A reader loads `readerEpochShift` (0 or `counterBits`), adds `1 << shift` to `readers` (one
///   counter of half the word's bits per epoch in one word: 32 bits on 64-bit platforms, 16 on
///   32-bit ones), loads `current` (acquiring), uses the table and what it holds (borrowed), and
///   subtracts what it added (releasing).
/// - A writer exchanges the next table (or `nil`) into `current` (releasing: everything it wrote into
///   the table before is seen by any reader that loads it) and appends the old table to the retired
///   ones: from then on no reader can load it.
/// - `reclaim()` reads `readers` with a read-modify-write (adding 0), never a plain load; each counter
///   seen at zero then marks every retired table: every reader counted there when the table was
///   retired has left. A table marked by both counters is freed (after unlocking: freeing releases
///   what the table holds, which may own user code). While tables remain, it flips the epoch so that
///   new readers count on the other counter and the current one drains; the reader that brings a
///   counter to zero while tables remain calls `reclaim()`, so every table is freed once its readers
///   have left.
///
/// Why no reader uses a freed table. Every modification of `readers` is a read-modify-write with
/// acquire and release, so each one reads the value of the one just before it in the word's
/// modification order and continues its release sequence: of any two, the earlier synchronizes with
/// the later. Take a reader R that loaded table T, and a `reclaim()` C after T's retirement (under
/// the lock, so the retirement happens before C) that saw R's counter at zero. If C came before R's
/// increment in the order of `readers`, C synchronizes with that increment, so T's retirement
/// happens before R's load of `current`, which by coherence then cannot return T. So C came after
/// R's increment; as it saw zero, it came after R's decrement too, and synchronizes with it: R's last
/// use of T happens before C, and before the free. With a plain load in C instead, C could read a
/// count that misses R's increment while R still reads T (a store-load reordering): the
/// read-modify-write is the whole point.
///
/// Why every table is freed. A reader whose decrement brings a counter to zero loads
/// `hasRetiredTables` after it. The retirement stores `true` before the writer's `reclaim()`, whose
/// read-modify-write either comes after the decrement (then it sees the counter at zero itself) or
/// before it (then the decrement synchronizes with it, and the reader sees `true` or a later value).
@usableFromInline
package struct _EpochPublished<Table: AnyObject>: ~Copyable, @unchecked Sendable {
    // Invariant (@unchecked Sendable): the retired list (`retiredList`) is allocated on the first
    // retirement, freed in deinit, and it and its pointee are only accessed with the owner's lock
    // held (the lock passed to `reclaim`), or in deinit; every other stored property is an atomic
    // that follows the protocol above.

    /// The published table, or `nil`; one reference is owned here.
    @usableFromInline let current = Atomic<Unmanaged<Table>?>(nil)
    /// The readers in flight: two counters of `counterBits` bits in one word, one per epoch. Only
    /// ever changed by read-modify-writes (the proof above needs it).
    @usableFromInline let readers = Atomic<Int>(0)
    /// The shift (0 or `counterBits`) of the unit that new readers add to `readers`: which counter
    /// they use.
    @usableFromInline let readerEpochShift = Atomic<Int>(0)
    /// Whether retired tables wait to be freed. Written with the lock held.
    @usableFromInline let hasRetiredTables = Atomic<Bool>(false)
    /// The tables unpublished and not freed yet, each with the counters seen at zero since (bit 0:
    /// the low counter, bit 1: the high one): a `RetiredList`, allocated when the first table is
    /// retired (an observed object whose table is never replaced allocates none: 32 bytes). An
    /// atomic only to be mutable in place; every access is relaxed, with the lock held.
    private let retiredList = Atomic<UnsafeMutableRawPointer?>(nil)

    private typealias RetiredList = [(table: Unmanaged<Table>, quietCounters: UInt8)]

    /// The bits of one reader counter: half of `readers`' word, whatever the platform's word size.
    @usableFromInline static var counterBits: Int { Int.bitWidth / 2 }
    /// The low counter's bits of `readers`.
    @usableFromInline static var lowCounterMask: Int { (1 &<< counterBits) &- 1 }

    package init() {}

    deinit {
        // No reader can exist: the owner is going away.
        current.load(ordering: .acquiring)?.release()
        if let retired = retiredList.load(ordering: .relaxed)?.assumingMemoryBound(to: RetiredList.self) {
            for entry in retired.pointee { entry.table.release() }
            retired.deinitialize(count: 1)
            retired.deallocate()
        }
    }

    /// The retired list, allocated if it is not yet. Lock held.
    private func retired() -> UnsafeMutablePointer<RetiredList> {
        if let retired = retiredList.load(ordering: .relaxed) { return retired.assumingMemoryBound(to: RetiredList.self) }
        let retired = UnsafeMutablePointer<RetiredList>.allocate(capacity: 1)
        retired.initialize(to: [])
        retiredList.store(UnsafeMutableRawPointer(retired), ordering: .relaxed)
        return retired
    }

    // MARK: Readers

    /// Enters a read section; returns what to pass to `exitReading`.
    @inlinable
    @inline(__always)
    package func enterReading() -> Int {
        let unit = 1 &<< readerEpochShift.load(ordering: .acquiring)
        readers.wrappingAdd(unit, ordering: .acquiringAndReleasing)
        return unit
    }

    /// The published table, borrowed: valid until the read section ends (or, for a writer with the
    /// lock held, until it publishes another).
    @inlinable
    @inline(__always)
    package func load() -> Unmanaged<Table>? {
        current.load(ordering: .acquiring)
    }

    /// Leaves a read section: after this, nothing loaded in it may be used. If this was the last
    /// reader some retired table waited for, calls `reclaim` (the owner's: it takes its lock and
    /// runs `takeReclaimable()`, then releases what that returned; see `reclaim(lock:)`).
    @inlinable
    @inline(__always)
    package func exitReading(_ unit: Int, reclaim: () -> Void) {
        let remaining = readers.wrappingSubtract(unit, ordering: .acquiringAndReleasing).newValue
        // This counter's bits: `unit` times the low counter's mask.
        if _slowPath(remaining & (unit &* Self.lowCounterMask) == 0 && hasRetiredTables.load(ordering: .acquiring)) {
            reclaim()
        }
    }

    // MARK: Writers

    /// Publishes `table` (or none) in place of the current one, which is retired: freed once no
    /// reader can be using it. Lock held; reclaim after unlocking (`needsReclaiming`).
    @inline(__always)
    package func publish(_ table: Table?) {
        let new = table.map { Unmanaged.passRetained($0) }
        guard let old = current.exchange(new, ordering: .acquiringAndReleasing) else { return }
        retire(old)
    }

    /// Queues `table`, just unpublished, to be freed once no reader can be using it. Out of line: a
    /// registration's `publish(nil)` with nothing published then costs its caller no registers
    /// (the gate's `register-invalidate`).
    @inline(never)
    private func retire(_ table: Unmanaged<Table>) {
        retired().pointee.append((table, 0))
        hasRetiredTables.store(true, ordering: .releasing)
    }

    /// Whether retired tables wait to be freed: the owner then reclaims (`takeReclaimable()` with its
    /// lock held, the releases after unlocking). Called without the lock.
    @inlinable
    @inline(__always)
    package var needsReclaiming: Bool {
        hasRetiredTables.load(ordering: .acquiring)
    }

    /// Frees the retired tables no reader can be using, taking `lock` for `takeReclaimable()`: for an
    /// owner whose lock is only this table's (the registry takes its own, in one place).
    package func reclaim(lock: borrowing PlatformLock) {
        lock.lock()
        let freed = takeReclaimable()
        lock.unlock()
        for table in freed { table.release() }
    }

    /// The transition of a reclamation, with the owner's lock held: takes the retired tables no
    /// reader can be using out of the queue and returns them, to be released after unlocking
    /// (releasing a table may run user code).
    package func takeReclaimable() -> [Unmanaged<Table>] {
        // Nothing was ever retired: nothing to free, and no reader to wait for.
        guard let retiredRaw = retiredList.load(ordering: .relaxed) else { return [] }
        let retired = retiredRaw.assumingMemoryBound(to: RetiredList.self)
        // A read-modify-write, not a load (see the proof above).
        let counts = readers.wrappingAdd(0, ordering: .acquiringAndReleasing).oldValue
        let quiet: UInt8 = (counts & Self.lowCounterMask == 0 ? 1 : 0) | (counts &>> Self.counterBits == 0 ? 2 : 0)
        var freed: [Unmanaged<Table>] = []
        var waiting: [(table: Unmanaged<Table>, quietCounters: UInt8)] = []
        var awaited: UInt8 = 0
        for var entry in retired.pointee {
            entry.quietCounters |= quiet
            if entry.quietCounters == 3 {
                freed.append(entry.table)
            } else {
                waiting.append(entry)
                awaited |= 3 & ~entry.quietCounters
            }
        }
        retired.pointee = waiting
        if waiting.isEmpty {
            hasRetiredTables.store(false, ordering: .releasing)
        } else {
            // New readers count on a counter every waiting table has seen at zero, so that the one
            // they still wait for drains; if both are still awaited, on the other counter than now.
            let shift: Int
            switch awaited {
            case 1: shift = Self.counterBits
            case 2: shift = 0
            default: shift = Self.counterBits &- readerEpochShift.load(ordering: .acquiring)
            }
            readerEpochShift.store(shift, ordering: .releasing)
        }
        return freed
    }

    // MARK: Introspection (tests)

    /// How many retired tables wait to be freed. Lock held.
    package var retiredCount: Int { retiredList.load(ordering: .relaxed)?.assumingMemoryBound(to: RetiredList.self).pointee.count ?? 0 }

    /// Whether the retired list is allocated (on the first retirement). Lock held.
    package var hasRetiredList: Bool { retiredList.load(ordering: .relaxed) != nil }

    /// The readers on each of the two counters, and which counter (0 or 1) new readers count on.
    package var readerCounts: (counts: [Int], newReadersCounter: Int) {
        let counts = readers.load(ordering: .acquiring)
        let newReadersCounter = readerEpochShift.load(ordering: .acquiring) / Self.counterBits
        return ([counts & Self.lowCounterMask, counts &>> Self.counterBits], newReadersCounter)
    }
}
