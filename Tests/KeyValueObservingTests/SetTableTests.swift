import Dispatch
import KeyValueObserving
import TestSupport
import Testing

/// Sixteen one-byte properties (adjacent offsets, so several share a hash slot of the set table),
/// two doubles and a string between them.
final class Flags16: KeyValueObservable, @unchecked Sendable {
    @Observed var f0: UInt8 = 0
    @Observed var f1: UInt8 = 0
    @Observed var f2: UInt8 = 0
    @Observed var f3: UInt8 = 0
    @Observed var d0 = 0.0
    @Observed var f4: UInt8 = 0
    @Observed var f5: UInt8 = 0
    @Observed var f6: UInt8 = 0
    @Observed var f7: UInt8 = 0
    @Observed var s0 = ""
    @Observed var f8: UInt8 = 0
    @Observed var f9: UInt8 = 0
    @Observed var f10: UInt8 = 0
    @Observed var f11: UInt8 = 0
    @Observed var d1 = 0.0
    @Observed var f12: UInt8 = 0
    @Observed var f13: UInt8 = 0
    @Observed var f14: UInt8 = 0
    @Observed var f15: UInt8 = 0

    static var flags: [ReferenceWritableKeyPath<Flags16, UInt8>] {
        [\.f0, \.f1, \.f2, \.f3, \.f4, \.f5, \.f6, \.f7, \.f8, \.f9, \.f10, \.f11, \.f12, \.f13, \.f14, \.f15]
    }
}

@Suite("The set path's table of observers by storage offset")
struct SetTableTests {
    /// Every property is found by its own offset, whatever the collisions in the table, and a
    /// property without observers is told apart from its neighbours.
    @Test func eachOfManyAdjacentPropertiesReachesOnlyItsOwnObservers() {
        let flags = Flags16()
        let seen = Locked<[String]>([])
        var tokens: [KeyValueObservation] = []
        // Every other flag observed, so that unobserved ones sit between observed ones.
        for (index, key) in Flags16.flags.enumerated() where index % 2 == 0 {
            tokens.append(
                flags.observe(key, options: [.old, .new]) { _, change in seen.append("f\(index): \(change.oldValue!)→\(change.newValue!)") }
            )
        }
        tokens.append(flags.observe(\.d1, options: [.new]) { _, change in seen.append("d1: \(change.newValue!)") })
        for (index, key) in Flags16.flags.enumerated() {
            flags[keyPath: key] = UInt8(index + 1)
        }
        flags.d0 = 1
        flags.s0 = "x"
        flags.d1 = 2
        // A second round: the offsets are known by now and the table answers without the lock.
        for (index, key) in Flags16.flags.enumerated() {
            flags[keyPath: key] = UInt8(index + 101)
        }
        let expected =
            Flags16.flags.indices.filter { $0 % 2 == 0 }.map { "f\($0): 0→\($0 + 1)" } + ["d1: 2.0"]
            + Flags16.flags.indices.filter { $0 % 2 == 0 }.map { "f\($0): \($0 + 1)→\($0 + 101)" }
        #expect(seen.current == expected)
        withExtendedLifetime(tokens) {}
    }

    /// While replaced tables wait for one reader counter only (a set blocked on another thread counts
    /// there), new sets count on the other one, whatever happens meanwhile: so the awaited counter
    /// drains even under a steady stream of sets, and the tables are freed as soon as the blocked
    /// set ends.
    @Test func newSetsAvoidTheReaderCounterThatWaitingTablesStillAwait() {
        let counter = Counter8()
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let blocker = counter.observe(\.k0) { _, _ in
            entered.signal()
            proceed.wait()
        }
        let checks = Locked<[Bool]>([])
        let blocked = Locked(-1)
        let checker = counter.observe(\.k1) { object, _ in
            // Inside this set's read section, after registrations and sets replaced the table the
            // blocked set reads.
            checks.append(object.setTableReaders.newReadersCounter != blocked.current)
        }
        let thread = TestThread { counter.k0 = 1 }
        entered.wait()
        let readers = counter.setTableReaders.counts
        blocked.withLock { $0 = readers[0] > 0 ? 0 : 1 }
        for round in 0..<4 {
            let token = counter.observe(\.k2) { _, _ in }
            counter.k1 = round
            token.invalidate()
            counter.k1 = round
        }
        proceed.signal()
        thread.join()
        #expect(checks.current == Array(repeating: true, count: 8))
        #expect(counter.retiredSetTableCount == 0)
        withExtendedLifetime((blocker, checker)) {}
    }

    /// A handler that replaces observers of the key being set, and sets it again, works on the
    /// table it started with while the registry publishes new ones; they are freed once it is done.
    @Test func aHandlerReplacingObserversDuringItsOwnDeliveryIsSafeAndTheOldTablesAreFreed() {
        let counter = Counter8()
        let events = Locked<[String]>([])
        let replacements = Locked<[KeyValueObservation]>([])
        var first: KeyValueObservation?
        first = counter.observe(\.k0, options: [.new]) { object, change in
            events.append("first \(change.newValue!)")
            guard change.newValue == 1 else { return }
            replacements.append(object.observe(\.k0, options: [.new]) { _, change in events.append("second \(change.newValue!)") })
            replacements.append(object.observe(\.k1, options: [.new]) { _, change in events.append("k1 \(change.newValue!)") })
            // Still inside the set of k0 = 1: the new observers are there for this nested set.
            object.k0 = 2
            object.k1 = 5
            #expect(object.retiredSetTableCount > 0, "the tables replaced during a set wait for it to end")
        }
        counter.k0 = 1
        #expect(events.current == ["first 1", "first 2", "second 2", "k1 5"])
        #expect(counter.retiredSetTableCount == 0, "every replaced table is freed once no set is running")
        first?.invalidate()
        counter.k0 = 3
        #expect(events.current.last == "second 3")
        #expect(counter.retiredSetTableCount == 0)
        withExtendedLifetime(replacements) {}
    }

    /// Threads setting keys without a lock while other threads register and invalidate: every set
    /// reaches the observers registered throughout, exactly once, and every table replaced meanwhile
    /// is freed once the threads are done.
    @Test(.tags(.stress)) func setsRacingRegistrationsReachStableObserversAndLeaveNoTableBehind() {
        let shared = Counter8()
        let setters = 2
        let churners = 2
        let sets = 20_000
        let deliveries = Locked<[Int]>(Array(repeating: 0, count: setters))
        var stable: [KeyValueObservation] = []
        for setter in 0..<setters {
            stable.append(shared.observe(Counter8.keys[setter], options: [.new]) { _, _ in deliveries.withLock { $0[setter] += 1 } })
        }
        TestThread.run(setters + churners) { me in
            if me < setters {
                let key = Counter8.keys[me]
                for _ in 0..<sets { shared[keyPath: key] += 1 }
            } else {
                // Keys the setters do not write: registering reads the key, and a read racing a set
                // would be a data race whatever the registry does.
                for round in 0..<2_000 {
                    let key = Counter8.keys[2 + (me + round) % 6]
                    let token = shared.observe(key) { _, _ in }
                    token.invalidate()
                }
            }
        }
        #expect(deliveries.current == Array(repeating: sets, count: setters))
        #expect(shared.retiredSetTableCount == 0)
        withExtendedLifetime(stable) {}
    }
}

@Suite("A key with one observer: no snapshot, the set table holds the observer")
struct SingleObserverTests {
    /// A registration and its sets make no snapshot; a second observer does, and removing it goes
    /// back to none; a batch's delivery makes one (it reads the snapshots after unlocking).
    @Test func aKeyWithOneObserverHasNoSnapshotUntilAPathBeyondTheSetTableAsks() {
        let counter = Counter8()
        let seen = Locked<[String]>([])
        let first = counter.observe(\.k0, options: [.new]) { _, change in seen.append("first \(change.newValue!)") }
        counter.k0 = 1
        #expect(counter.hasPublishedSetTable)
        #expect(counter.observedKeysWithSnapshot == 0)
        let second = counter.observe(\.k0, options: [.new]) { _, change in seen.append("second \(change.newValue!)") }
        #expect(counter.observedKeysWithSnapshot == 1)
        counter.k0 = 2
        second.invalidate()
        #expect(counter.observedKeysWithSnapshot == 0)
        counter.k0 = 3
        counter.coalescingChanges {
            counter.k0 = 4
            counter.k0 = 5
        }
        #expect(counter.observedKeysWithSnapshot == 1)
        counter.k0 = 6
        #expect(seen.current == ["first 1", "first 2", "second 2", "first 3", "first 5", "first 6"])
        withExtendedLifetime(first) {}
    }

    /// A single observer that needs the value before the store, removes duplicates or observes a
    /// key its class notifies by hand is delivered from its snapshot, exactly as before.
    @Test func aSingleObserverThatNeedsMoreThanTheNewValueGetsAllOfIt() {
        let counter = Counter8()
        let seen = Locked<[String]>([])
        let priorAndOld = counter.observe(\.k0, options: [.old, .new, .prior]) { _, change in
            seen.append(change.isPrior ? "prior old \(change.oldValue!)" : "\(change.oldValue!)→\(change.newValue!)")
        }
        let unique = counter.observe(\.k1, options: [.new], removingDuplicates: true) { _, change in
            seen.append("k1 \(change.newValue!)")
        }
        counter.k0 = 1
        counter.k1 = 7
        counter.k1 = 7
        counter.k1 = 8
        #expect(seen.current == ["prior old 0", "0→1", "k1 7", "k1 8"])
        let settings = Settings()
        let balances = Locked<[Int]>([])
        let balance = settings.observe(\.balance, options: [.new]) { _, change in balances.append(change.newValue!) }
        // `balance` does not notify automatically: only the deposit's own notification counts.
        settings.balance = 5
        settings.deposit(10)
        #expect(balances.current == [15])
        withExtendedLifetime((priorAndOld, unique, balance)) {}
    }

    /// Inside a batch, a key drops from two observers to one and another key gets its first
    /// observer: the batch's end, whose slot indices went stale, delivers from snapshots it makes
    /// first, exactly to the observers there at the end.
    @Test func aBatchWhoseKeysLoseOrGainTheirOnlyObserverDeliversExactly() {
        let counter = Counter8()
        let seen = Locked<[String]>([])
        let first = counter.observe(\.k0, options: [.new]) { _, change in seen.append("first \(change.newValue!)") }
        let second = counter.observe(\.k0, options: [.new]) { _, change in seen.append("second \(change.newValue!)") }
        counter.k0 = 1
        var late: KeyValueObservation?
        counter.coalescingChanges {
            counter.k0 = 2
            second.invalidate()
            late = counter.observe(\.k1, options: [.new]) { _, change in seen.append("late \(change.newValue!)") }
            counter.k1 = 5
            counter.k2 = 7
        }
        #expect(seen.current == ["first 1", "second 1", "first 2", "late 5"])
        withExtendedLifetime((first, late)) {}
    }

    /// Batches and plain sets on two threads while a third registers and removes the only observers
    /// of other keys (slots made and dropped, snapshots made by batches): every set of a stable
    /// observer's key is delivered once.
    @Test func batchesAndSetsRacingSlotsThatComeAndGoReachTheStableObservers() {
        let counter = Counter8()
        let batched = Locked(0)
        let plain = Locked(0)
        let stableBatched = counter.observe(\.k0, options: [.new]) { _, _ in batched.withLock { $0 += 1 } }
        let stablePlain = counter.observe(\.k4, options: [.new]) { _, _ in plain.withLock { $0 += 1 } }
        let rounds = 3_000
        TestThread.run(3) { me in
            switch me {
            case 0:
                for value in 1...rounds {
                    counter.coalescingChanges {
                        counter.k0 = value
                        counter.k1 = value
                        counter.k2 = value
                    }
                }
            case 1:
                for value in 1...rounds {
                    counter.k4 = value
                    counter.coalescingChanges { counter.k3 = value }
                }
            default:
                // Keys the other threads write: registering reads no value without `.initial`.
                for _ in 0..<rounds {
                    let tokens = [
                        counter.observe(\.k1) { _, _ in }, counter.observe(\.k2, options: [.old, .new]) { _, _ in },
                        counter.observe(\.k5) { _, _ in },
                    ]
                    for token in tokens { token.invalidate() }
                }
            }
        }
        #expect(batched.current == rounds)
        #expect(plain.current == rounds)
        withExtendedLifetime((stableBatched, stablePlain)) {}
    }

    /// A key whose observers go from one to two and back while another thread sets it: the stable
    /// observer gets every set, whether the set found it alone or in a snapshot.
    @Test func setsRacingAKeyGoingFromOneObserverToTwoAndBackReachTheStableOne() {
        let counter = Counter8()
        let deliveries = Locked(0)
        let lastSeen = Locked(0)
        let stable = counter.observe(\.k0, options: [.new]) { _, change in
            deliveries.withLock { $0 += 1 }
            lastSeen.withLock { $0 = change.newValue! }
        }
        let sets = 20_000
        TestThread.run(2) { me in
            if me == 0 {
                for value in 1...sets { counter.k0 = value }
            } else {
                for _ in 0..<2_000 {
                    let token = counter.observe(\.k0) { _, _ in }
                    token.invalidate()
                }
            }
        }
        #expect(deliveries.current == sets)
        #expect(lastSeen.current == sets)
        #expect(counter.retiredSetTableCount == 0)
        withExtendedLifetime(stable) {}
    }
}

class DirectBase: KeyValueObservable, @unchecked Sendable {
    @Observed var x = 0
}

final class DirectSub: DirectBase, @unchecked Sendable {}

final class DirectBox<T: Sendable>: KeyValueObservable, @unchecked Sendable {
    @Observed var value: T
    init(_ value: T) { self.value = value }
}

@Suite("Direct delivery to the user's handler")
struct DirectDeliveryTests {
    /// The set path calls a handler registered with the declaring class directly, and one
    /// registered through a subclass's key path through its adapter: both get the object.
    @Test func handlersRegisteredWithTheDeclaringClassOrASubclassGetTheObject() {
        let sub = DirectSub()
        let seen = Locked<[String]>([])
        let base: DirectBase = sub
        let direct = base.observe(\.x, options: [.new]) { object, change in
            seen.append("base \(object === sub) \(change.newValue!)")
        }
        let inherited = sub.observe(\.x, options: [.new]) { object, change in
            seen.append("sub \(object === sub) \(change.newValue!)")
        }
        sub.x = 1
        #expect(seen.current == ["base true 1", "sub true 1"])
        withExtendedLifetime((direct, inherited)) {}
    }

    @Test func aGenericClassDeliversToItsHandlers() {
        let ints = DirectBox(1)
        let strings = DirectBox("a")
        let seen = Locked<[String]>([])
        let tokens = [
            ints.observe(\.value, options: [.old, .new]) { _, change in seen.append("\(change.oldValue!)→\(change.newValue!)") },
            strings.observe(\.value, options: [.new]) { object, change in seen.append("\(object.value) \(change.newValue!)") },
        ]
        ints.value = 2
        strings.value = "b"
        #expect(seen.current == ["1→2", "b b"])
        withExtendedLifetime(tokens) {}
    }
}
