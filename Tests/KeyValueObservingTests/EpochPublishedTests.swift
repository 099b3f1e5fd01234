import KeyValueObserving
import Synchronization
import TestSupport
import Testing

/// Which tables of each family were freed (`Entry.release(_:)` of a table's extra, once per table).
private let freedTables = Locked<[Int: [Int]]>([:])

/// An entry of the tests' tables: `value` is derived from the key and the table, so a reader can
/// tell a complete element from a torn or foreign one.
private struct Entry: _HashTableElement {
    struct Extra: BitwiseCopyable {
        /// Which test the table belongs to.
        let family: Int
        /// Which table of the family it is.
        let id: Int
        /// How many keys it has: 0..<keys.
        let keys: Int
    }

    let hashKey: Int
    let value: Int

    static var free: Entry { Entry(hashKey: -1, value: 0) }
    var isFree: Bool { hashKey == -1 }
    static func hash(of key: Int) -> UInt { UInt(bitPattern: key) &* _goldenMultiplier }
    func release() {}
    static func release(_ extra: Extra) {
        freedTables.withLock { $0[extra.family, default: []].append(extra.id) }
    }

    static func value(of key: Int, inTable id: Int) -> Int { key &* 7 &+ id }
}

/// Eight hashes for all keys: each search probes past many others.
private struct CollidingEntry: _HashTableElement {
    let hashKey: Int
    static var free: CollidingEntry { CollidingEntry(hashKey: -1) }
    var isFree: Bool { hashKey == -1 }
    static func hash(of key: Int) -> UInt { UInt(key & 7) &* _goldenMultiplier }
    func release() {}
}

private typealias Table = _HashTable<Entry>

/// An `_EpochPublished` and its owner's lock, shared by the test's threads.
private final class Published: @unchecked Sendable {
    // Invariant: `tables` is used by its protocol (writers hold `lock`).
    let tables = _EpochPublished<Table>()
    let lock = PlatformLock()
    let family: Int
    let stop = Atomic<Bool>(false)

    init(family: Int) { self.family = family }

    /// Fills table `id` with keys 0..<(id % 64 + 1) and publishes it.
    func publish(id: Int) {
        let keys = id % 64 + 1
        let table = Table.make(count: keys, extra: .init(family: family, id: id, keys: keys))
        for key in 0..<keys { table.insert(Entry(hashKey: key, value: Entry.value(of: key, inTable: id))) }
        lock.lock()
        tables.publish(table)
        lock.unlock()
        if tables.needsReclaiming { tables.reclaim(lock: lock) }
    }

    /// Checks, inside a read section, that the published table (if any) is complete and not freed.
    func checkPublished() -> Bool {
        let reading = tables.enterReading()
        defer { tables.exitReading(reading) { tables.reclaim(lock: lock) } }
        guard let table = tables.load() else { return true }
        return table._withUnsafeGuaranteedRef { table in
            let (id, keys) = (table.extra.id, table.extra.keys)
            let complete =
                table.count == keys && (0..<keys).allSatisfy { table.element(for: $0)?.value == Entry.value(of: $0, inTable: id) }
            let alive = !freedTables.withLock { $0[family, default: []].contains(id) }
            return complete && alive && table.element(for: keys) == nil
        }
    }

    var retiredCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return tables.retiredCount
    }
}

private func freed(_ family: Int) -> [Int] {
    freedTables.withLock { $0[family, default: []] }.sorted()
}

@Suite("Lock-free publication: _EpochPublished over _HashTable")
struct EpochPublishedTests {
    /// Readers on other threads see every table they load complete, and never one already freed,
    /// while a writer publishes thousands; every replaced table is freed exactly once, the last one
    /// when its owner goes.
    @Test func readersSeeCompleteTablesAndEveryRetiredTableIsFreedOnce() {
        let family = 1
        let publications = 3000
        // In a function of its own, so that the owner is gone when it returns.
        func publishWhileReading() {
            let shared = Published(family: family)
            let failures = Atomic<Int>(0)
            let reads = Atomic<Int>(0)
            let readers = (0..<4).map { _ in
                TestThread {
                    while !shared.stop.load(ordering: .acquiring) {
                        if !shared.checkPublished() { failures.wrappingAdd(1, ordering: .relaxed) }
                        reads.wrappingAdd(1, ordering: .relaxed)
                    }
                }
            }
            for id in 1...publications { shared.publish(id: id) }
            shared.stop.store(true, ordering: .releasing)
            for reader in readers { reader.join() }
            if shared.tables.needsReclaiming { shared.tables.reclaim(lock: shared.lock) }
            #expect(failures.load(ordering: .relaxed) == 0)
            #expect(reads.load(ordering: .relaxed) > 0)
            #expect(shared.retiredCount == 0, "no reader left: every replaced table is freed")
            #expect(freed(family) == Array(1..<publications), "each replaced table freed once, the current one not")
        }
        publishWhileReading()
        #expect(freed(family) == Array(1...publications), "the current table freed with its owner")
    }

    /// The list of retired tables is allocated by the first retirement, not before: an owner whose
    /// first table is never replaced allocates none. Once there, it serves later retirements.
    @Test func theRetiredListIsAllocatedByTheFirstRetirement() {
        let family = 4
        let shared = Published(family: family)
        shared.lock.lock()
        let beforeAny = shared.tables.hasRetiredList
        shared.lock.unlock()
        shared.publish(id: 1)
        shared.lock.lock()
        let afterFirst = shared.tables.hasRetiredList
        shared.lock.unlock()
        #expect(!beforeAny)
        #expect(!afterFirst, "publishing over nothing retires nothing")
        #expect(shared.retiredCount == 0)
        shared.publish(id: 2)
        shared.publish(id: 3)
        shared.lock.lock()
        let afterReplacing = shared.tables.hasRetiredList
        shared.lock.unlock()
        #expect(afterReplacing)
        #expect(shared.retiredCount == 0, "no reader: the replaced tables are freed at once")
        #expect(freed(family) == [1, 2])
    }

    /// A table retired while a reader is inside it waits for that reader, even while other readers
    /// come and go on the other counter and more tables are retired; nested read sections keep it
    /// as long as the outermost.
    @Test func aRetiredTableWaitsForItsReadersIncludingNestedOnes() {
        let family = 2
        let shared = Published(family: family)
        shared.publish(id: 1)
        let outer = shared.tables.enterReading()
        let inner = shared.tables.enterReading()
        #expect(shared.tables.load()?._withUnsafeGuaranteedRef { $0.extra.id } == 1)
        // A writer inside the read section (a handler that registers): it never waits.
        shared.publish(id: 2)
        shared.publish(id: 3)
        #expect(freed(family) == [], "both replaced tables may still be read")
        // Readers on another thread, meanwhile, count elsewhere and free what they can.
        let other = TestThread {
            for _ in 0..<100 { _ = shared.checkPublished() }
        }
        other.join()
        shared.tables.exitReading(inner) { shared.tables.reclaim(lock: shared.lock) }
        #expect(!freed(family).contains(1), "the outer section still reads table 1")
        shared.tables.exitReading(outer) { shared.tables.reclaim(lock: shared.lock) }
        #expect(freed(family) == [1, 2])
        #expect(shared.retiredCount == 0)
    }

    /// The two reader counters each take half of the word, whatever its size: once a table is
    /// retired under a reader of the low counter, new readers count on the high one, and each
    /// counter reads back what was added to it.
    @Test func theTwoReaderCountersEachTakeHalfTheWord() {
        let family = 5
        let shared = Published(family: family)
        shared.publish(id: 1)
        let first = shared.tables.enterReading()
        #expect(first == 1)
        shared.publish(id: 2)
        let second = shared.tables.enterReading()
        #expect(second == 1 << (Int.bitWidth / 2))
        let during = shared.tables.readerCounts
        #expect(during.counts == [1, 1])
        #expect(during.newReadersCounter == 1)
        shared.tables.exitReading(second) { shared.tables.reclaim(lock: shared.lock) }
        #expect(freed(family) == [], "the first reader still reads table 1")
        shared.tables.exitReading(first) { shared.tables.reclaim(lock: shared.lock) }
        #expect(freed(family) == [1])
        #expect(shared.tables.readerCounts.counts == [0, 0])
    }

    /// Growing by copies, from two elements to thousands, with keys colliding (eight hashes for
    /// all): every key is found, absent keys are not, a key is added once.
    @Test func growthFromTwoToThousandsWithForcedCollisions() {
        var table = _HashTable<CollidingEntry>.make(count: 1, extra: ())
        #expect(table.insert(CollidingEntry(hashKey: 0)))
        // One copy per key while small (as the key cache grows), then doubling.
        for key in 1..<4096 {
            if key < 256 || key.nonzeroBitCount == 1 { table = table.copy(reserving: key < 256 ? 1 : key) }
            #expect(table.insert(CollidingEntry(hashKey: key)))
            if key == 1 || key == 255 || key == 4095 {
                #expect((0...key).allSatisfy { table.element(for: $0)?.hashKey == $0 })
                #expect(table.element(for: key + 1) == nil)
            }
        }
        #expect(!table.insert(CollidingEntry(hashKey: 7)), "a key already there is not added again")
        #expect(table.count == 4096)
        #expect(table.element(for: -5) == nil)
    }

    /// Lock-free searches racing insertions, as in the cache of `@Observed` keys: each insertion
    /// fills a copy of the published table and publishes it; a key a reader has found once is found
    /// ever after, with its value, and every key is there at the end.
    @Test func lockFreeSearchesRaceInsertions() {
        let family = 3
        let shared = Published(family: family)
        let insertions = 1500
        let failures = Atomic<Int>(0)
        let readers = (0..<3).map { seed in
            TestThread {
                var known = 0
                var key = seed
                while !shared.stop.load(ordering: .acquiring) {
                    let reading = shared.tables.enterReading()
                    if let table = shared.tables.load() {
                        table._withUnsafeGuaranteedRef { table in
                            // Everything below `known` was found before: it must still be there.
                            if known > 0, table.element(for: known - 1)?.value != Entry.value(of: known - 1, inTable: 0) {
                                failures.wrappingAdd(1, ordering: .relaxed)
                            }
                            key = (key &* 31 &+ 7) % (insertions + 10)
                            if let found = table.element(for: key) {
                                if found.value != Entry.value(of: key, inTable: 0) { failures.wrappingAdd(1, ordering: .relaxed) }
                                known = max(known, key + 1)
                            }
                        }
                    }
                    shared.tables.exitReading(reading) { shared.tables.reclaim(lock: shared.lock) }
                }
            }
        }
        for key in 0..<insertions {
            shared.lock.lock()
            let current = shared.tables.load()
            let next =
                current?._withUnsafeGuaranteedRef { $0.copy(reserving: 1) }
                ?? Table.make(count: 1, extra: .init(family: family, id: 0, keys: 0))
            next.insert(Entry(hashKey: key, value: Entry.value(of: key, inTable: 0)))
            shared.tables.publish(next)
            shared.lock.unlock()
            if shared.tables.needsReclaiming { shared.tables.reclaim(lock: shared.lock) }
        }
        shared.stop.store(true, ordering: .releasing)
        for reader in readers { reader.join() }
        if shared.tables.needsReclaiming { shared.tables.reclaim(lock: shared.lock) }
        #expect(failures.load(ordering: .relaxed) == 0)
        let final = shared.tables.load()!._withUnsafeGuaranteedRef { table in
            (0..<insertions).allSatisfy { table.element(for: $0) != nil } && table.count == insertions
        }
        #expect(final)
        #expect(shared.retiredCount == 0)
        #expect(freed(family).count == insertions - 1)
    }
}
