import KeyValueObserving
import Synchronization
import TestSupport
import Testing

/// A class that turns automatic notification off for `quiet` and records every key it is asked
/// about. Used by one test only: the record is shared by every instance.
final class QuietKeys: KeyValueObservable, @unchecked Sendable {
    // `@unchecked Sendable` in tests only: the test uses the instance from one thread.
    @Observed var loud = 0
    @Observed var quiet = 0

    static let questions = Locked<[AnyKeyPath]>([])

    override class func automaticallyNotifiesObservers(for key: AnyKeyPath) -> Bool {
        questions.append(key)
        return key == \QuietKeys.quiet ? false : super.automaticallyNotifiesObservers(for: key)
    }
}

/// Like `QuietKeys`, for the test of an offset learned before observers of every key arrive.
final class QuietKeysLearnedEarly: KeyValueObservable, @unchecked Sendable {
    // `@unchecked Sendable` in tests only: the test uses the instance from one thread.
    @Observed var loud = 0
    @Observed var quiet = 0

    override class func automaticallyNotifiesObservers(for key: AnyKeyPath) -> Bool {
        key == \QuietKeysLearnedEarly.quiet ? false : super.automaticallyNotifiesObservers(for: key)
    }
}

/// A set on an object with observers of every key takes the locked set path
/// (`Observed._setSlowPath`): it finds them, the key and the key's own observers under one lock.
@Suite("Observers of every key, told by the locked set path")
struct AnyKeySetPathTests {
    /// An observer of every key registered by a handler during a set hears of the next set only.
    @Test func anObserverOfEveryKeyAddedByAHandlerHearsOfTheNextSetOnly() {
        let object = Counter8()
        let log = Locked<[String]>([])
        let added = Locked<[KeyValueObservation]>([])
        let first = object.observeAnyKey { object, change in
            log.append("first \(change.keyName)")
            guard added.current.isEmpty else { return }
            added.append(object.observeAnyKey { _, change in log.append("second \(change.keyName)") })
        }
        object.k0 = 1
        object.k1 = 1
        #expect(log.current == ["first k0", "first k1", "second k1"])
        withExtendedLifetime((first, added)) {}
    }

    /// The class's answer for a key without observers of its own is asked once per object and kept:
    /// later sets of that key stay silent without asking again; manual notification still reaches
    /// the observers of every key.
    @Test func aKeyTheClassKeepsSilentStaysSilentAndTheClassIsAskedOnce() {
        let object = QuietKeys()
        let seen = Locked<[AnyKeyPath]>([])
        let token = object.observeAnyKey { _, change in seen.append(change.keyPath) }
        for value in 1...3 {
            object.quiet = value
            object.loud = value
        }
        #expect(object.quiet == 3)
        #expect(seen.current == [\QuietKeys.loud, \QuietKeys.loud, \QuietKeys.loud])
        #expect(QuietKeys.questions.current.filter { $0 == \QuietKeys.quiet }.count == 1)
        #expect(QuietKeys.questions.current.filter { $0 == \QuietKeys.loud }.count == 1)
        object.willChangeValue(for: \.quiet)
        object.didChangeValue(for: \.quiet)
        #expect(seen.current.last == \QuietKeys.quiet)
        token.invalidate()
    }

    /// A property whose offset a set revealed while a key-observed property waited to learn its own
    /// (so the registry knows its key but was never asked whether it notifies) is asked about when
    /// observers of every key arrive; the waiting property is resolved by its first set.
    @Test func anOffsetLearnedBeforeObserversOfEveryKeyArriveFollowsTheClassesAnswer() {
        let object = QuietKeysLearnedEarly()
        let loudCount = Counter(0)
        let seen = Locked<[String]>([])
        let loud = object.observe(\.loud) { _, _ in loudCount.increment() }
        object.quiet = 1
        let anyKey = object.observeAnyKey { _, change in seen.append(change.keyName) }
        object.quiet = 2
        object.loud = 1
        object.quiet = 3
        object.loud = 2
        #expect(seen.current == ["loud", "loud"])
        #expect(loudCount.current == 2)
        withExtendedLifetime((loud, anyKey)) {}
    }

    /// A key first set for observers of every key (the table learns it), then observed by key, then
    /// no longer: the order of notifications (`.prior` of every key, the key's own, after the store
    /// the key's own, then every key's) holds throughout, with old values right.
    @Test func aKeyLearnedForObserversOfEveryKeyKeepsTheOrderOnceObservedByKey() {
        let object = Counter8()
        let log = Locked<[String]>([])
        let anyKey = object.observeAnyKey(options: [.prior]) { object, change in
            log.append("any \(change.isPrior ? "will" : "did") \(change.keyName) \(object.k3)")
        }
        object.k3 = 1
        let key = object.observe(\.k3, options: [.prior, .old, .new]) { _, change in
            log.append(change.isPrior ? "k3 will \(change.oldValue!)" : "k3 did \(change.oldValue!)→\(change.newValue!)")
        }
        object.k3 = 2
        key.invalidate()
        object.k3 = 3
        #expect(
            log.current == [
                "any will k3 0", "any did k3 1",
                "any will k3 1", "k3 will 1", "k3 did 1→2", "any did k3 2",
                "any will k3 2", "any did k3 3",
            ])
        anyKey.invalidate()
    }

    /// Threads setting keys without a lock while other threads add and remove observers of every key
    /// and of other keys: every set reaches the observers registered throughout exactly once, and
    /// every table replaced meanwhile is freed once the threads are done.
    @Test(.tags(.stress)) func setsRacingObserversOfEveryKeyComingAndGoingReachTheStableOnesOnce() {
        let shared = Counter8()
        let setters = 2
        let churners = 2
        let sets = 20_000
        let everyKey = Locked<[Int]>(Array(repeating: 0, count: setters))
        let ownKey = Counter(0)
        let stableAny = shared.observeAnyKey { _, change in
            everyKey.withLock { $0[change.keyPath == \Counter8.k0 ? 0 : 1] += 1 }
        }
        let stableKey = shared.observe(\.k0) { _, _ in ownKey.increment() }
        TestThread.run(setters + churners) { me in
            if me < setters {
                let key = Counter8.keys[me]
                for _ in 0..<sets { shared[keyPath: key] += 1 }
            } else {
                for round in 0..<1_000 {
                    let anyKey = shared.observeAnyKey(options: round % 2 == 0 ? [.prior] : []) { _, _ in }
                    // Keys the setters do not write: registering reads the key, and a read racing a
                    // set would be a data race whatever the registry does.
                    let key = shared.observe(Counter8.keys[2 + (me + round) % 6]) { _, _ in }
                    anyKey.invalidate()
                    key.invalidate()
                }
            }
        }
        #expect(everyKey.current == Array(repeating: sets, count: setters))
        #expect(ownKey.current == sets)
        #expect(shared.retiredSetTableCount == 0)
        withExtendedLifetime((stableAny, stableKey)) {}
    }
}
