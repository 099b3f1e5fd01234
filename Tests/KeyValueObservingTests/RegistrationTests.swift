import KeyValueObserving
import TestSupport
import Testing

/// Counts its live instances, for tests that prove what a registry releases.
private final class Tracked: Sendable {
    let live: Locked<Int>

    init(_ live: Locked<Int>) {
        self.live = live
        live.withLock { $0 += 1 }
    }

    deinit {
        live.withLock { $0 -= 1 }
    }
}

@Suite("Registration and removal: the snapshots and tables they build")
struct RegistrationTests {
    /// A key's snapshot holds its observers in registration order; removing one releases it (and what
    /// its handler captured) while the others stay, in order; removing the last releases everything.
    @Test func removingObserversOfAKeyReleasesExactlyTheirHandlers() {
        let counter = Counter8()
        let live = Locked(0)
        let seen = Locked<[String]>([])
        var tokens: [KeyValueObservation] = []
        for name in ["a", "b", "c"] {
            let tracked = Tracked(live)
            tokens.append(
                counter.observe(\.k0, options: [.new]) { _, change in
                    _ = tracked
                    seen.append("\(name) \(change.newValue!)")
                })
        }
        #expect(live.current == 3)
        counter.k0 = 1
        tokens[1].invalidate()
        #expect(live.current == 2, "the removed observer's handler and its capture are released")
        counter.k0 = 2
        #expect(seen.current == ["a 1", "b 1", "c 1", "a 2", "c 2"])
        tokens[0].invalidate()
        tokens[2].invalidate()
        #expect(live.current == 0, "the last removal releases the key's snapshot and its entries")
        counter.k0 = 3
        #expect(seen.current.count == 5)
    }

    /// Dropping the object releases every observer its snapshots held, while the tokens live on.
    @Test func deallocatingTheObjectReleasesEveryObserverOfEveryKey() {
        let live = Locked(0)
        var tokens: [KeyValueObservation] = []
        do {
            let counter = Counter8()
            for key in Counter8.keys.prefix(3) {
                for _ in 0..<3 {
                    let tracked = Tracked(live)
                    tokens.append(counter.observe(key) { _, _ in _ = tracked })
                }
            }
            #expect(live.current == 9)
        }
        #expect(live.current == 0)
        withExtendedLifetime(tokens) {}
    }

    /// A registration builds no set table (a request-scoped observer that sees no change costs no
    /// table); the first set builds it, and delivers; a later registration unpublishes it again.
    @Test func theSetTableIsBuiltByTheFirstSetAfterARegistrationNotByTheRegistration() {
        let counter = Counter8()
        let seen = Locked<[String]>([])
        let first = counter.observe(\.k0, options: [.new]) { _, change in seen.append("k0 \(change.newValue!)") }
        counter.k0 = 1
        #expect(counter.hasPublishedSetTable)
        first.invalidate()
        // The offset of `k0` is known now: a registration could build the table at once, and does not.
        let second = counter.observe(\.k0, options: [.new]) { _, change in seen.append("again \(change.newValue!)") }
        #expect(!counter.hasPublishedSetTable)
        let other = counter.observe(\.k1, options: [.new]) { _, change in seen.append("k1 \(change.newValue!)") }
        #expect(!counter.hasPublishedSetTable)
        counter.k0 = 2
        #expect(counter.hasPublishedSetTable)
        counter.k1 = 3
        counter.k2 = 4
        #expect(seen.current == ["k0 1", "again 2", "k1 3"])
        second.invalidate()
        #expect(!counter.hasPublishedSetTable)
        #expect(counter.retiredSetTableCount == 0)
        counter.k0 = 5
        counter.k1 = 6
        #expect(seen.current == ["k0 1", "again 2", "k1 3", "k1 6"])
        withExtendedLifetime(other) {}
    }

    /// A thread setting a key without the lock while other threads register and invalidate observers
    /// of that same key (each registration replaces the key's snapshot and unpublishes the table the
    /// setter reads): the observer registered throughout gets every set exactly once, and every
    /// churned observer (with what its handler captured) is released by the end.
    @Test(.tags(.stress)) func observersOfTheKeyBeingSetComeAndGoSafely() {
        let counter = Counter8()
        let sets = 20_000
        let churners = 2
        let live = Locked(0)
        let stableDeliveries = Locked(0)
        let stable = counter.observe(\.k0) { _, _ in stableDeliveries.withLock { $0 += 1 } }
        TestThread.run(1 + churners) { me in
            if me == 0 {
                for value in 1...sets { counter.k0 = value }
            } else {
                for _ in 0..<2_000 {
                    let tracked = Tracked(live)
                    let token = counter.observe(\.k0) { _, _ in _ = tracked }
                    token.invalidate()
                }
            }
        }
        #expect(stableDeliveries.current == sets)
        #expect(counter.retiredSetTableCount == 0)
        #expect(live.current == 0, "every churned observer and its capture is released")
        withExtendedLifetime(stable) {}
    }

    /// After `invalidate()` returns on another thread, no delivery to that observer starts, even while
    /// a set that began before the invalidation (and read the table that listed it) is still running.
    @Test func anInvalidationOnAnotherThreadStopsDeliveriesThatStartAfterIt() {
        let counter = Counter8()
        let deliveries = Locked(0)
        let invalidated = Locked(false)
        let token = Locked<KeyValueObservation?>(nil)
        token.withLock { $0 = counter.observe(\.k0) { _, _ in deliveries.withLock { $0 += 1 } } }
        let setter = counter.observe(\.k1) { object, change in
            // Inside the set of k1, on the setter thread: another thread invalidates the observer
            // of k0 and returns; the sets of k0 that follow must not reach it.
            let thread = TestThread {
                token.current?.invalidate(); invalidated.withLock { $0 = true }
            }
            thread.join()
            for value in 0..<10 { object.k0 = value }
        }
        counter.k0 = 100
        counter.k1 = 1
        #expect(invalidated.current)
        #expect(deliveries.current == 1, "only the set before the invalidation reached the observer")
        withExtendedLifetime(setter) {}
    }
}
