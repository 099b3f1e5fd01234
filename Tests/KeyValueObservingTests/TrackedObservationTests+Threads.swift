import KeyValueObserving
import Testing

@Suite("Tracked observation: root death, invalidation and other threads")
struct TrackedLifetimeAndThreadsTests {
    // MARK: Root death

    @Test func theTokenDoesNotKeepTheRootAliveAndItsDeathIsQuiet() {
        let meter = TrackedMeter()
        var root: TrackedHolder? = TrackedHolder(meter)
        weak var weakRoot: TrackedHolder?
        weakRoot = root
        let changes = Locked<[KeyValueObservedChange<Int>]>([])
        let token = root!.observeTracking(options: [.prior, .old, .new]) {
            $0.meter.x
        } changeHandler: { _, change in
            changes.append(change)
        }
        meter.x = 1
        root = nil
        #expect(weakRoot == nil)
        // The root's death calls nothing, and the inputs it read no longer notify.
        meter.x = 2
        meter.x = 3
        #expect(changes.current == [KeyValueObservedChange(oldValue: 0, isPrior: true), trackedChange(0, 1)])
        token.invalidate()
    }

    @Test(.timeLimit(.minutes(1))) func theSequenceFinishesWhenTheRootDies() async {
        let meter = TrackedMeter()
        var root: TrackedHolder? = TrackedHolder(meter)
        let values = root!.values(tracking: { $0.meter.x })
        meter.x = 1
        root = nil
        meter.x = 2
        var received: [Int] = []
        for await value in values { received.append(value) }
        // The loop ended: the sequence finished, with nothing after the root's death.
        #expect(received == [0, 1])
    }

    @Test(.timeLimit(.minutes(1))) func aSequenceOverAnUnobservedChildFinishesWhenTheRootDies() async {
        // The root itself has no observable property the expression reads: only its child's.
        var root: TrackedSwitch? = TrackedSwitch()
        let left = root!.left
        let values = root!.values(tracking: { $0.left.x })
        left.x = 1
        root = nil
        left.x = 2
        var received: [Int] = []
        for await value in values { received.append(value) }
        #expect(received == [0, 1])
    }

    // MARK: Invalidation

    @Test func invalidatingReleasesTheClosuresAndWhatTheyCaptured() {
        // KVO's rule for a token: `invalidate()` releases the handler (and what it captured), even
        // while the token itself is kept.
        let meter = TrackedMeter()
        weak var weakInExpression: Canary?
        weak var weakInHandler: Canary?
        let token: KeyValueObservation
        do {
            let inExpression = Canary()
            let inHandler = Canary()
            weakInExpression = inExpression
            weakInHandler = inHandler
            token = meter.observeTracking { meter in
                _ = inExpression
                return meter.x
            } changeHandler: { _, _ in
                _ = inHandler
            }
        }
        #expect(weakInExpression != nil)
        #expect(weakInHandler != nil)
        token.invalidate()
        #expect(weakInExpression == nil)
        #expect(weakInHandler == nil)
        withExtendedLifetime(token) {}
    }

    @Test func aHandlerMayInvalidateItsOwnToken() {
        let meter = TrackedMeter()
        let calls = Counter(0)
        let holder = Locked<KeyValueObservation?>(nil)
        holder.withLock { slot in
            slot = meter.observeTracking {
                $0.x
            } changeHandler: { _, _ in
                calls.increment()
                holder.withLock { $0 }?.invalidate()
            }
        }
        meter.x = 1
        meter.x = 2
        #expect(calls.current == 1)
        #expect(meter.observationInfo.isEmpty)
    }

    @Test func aHandlerInvalidatingItsTokenDuringANestedChangeStopsTheOuterDeliveries() {
        // The handler changes its input (a nested delivery) and invalidates its token in it: the
        // nested call is the last one.
        let meter = TrackedMeter()
        let log = Locked<[Int]>([])
        let holder = Locked<KeyValueObservation?>(nil)
        holder.withLock { slot in
            slot = meter.observeTracking(options: [.new]) {
                $0.x
            } changeHandler: { meter, change in
                log.append(change.newValue!)
                if change.newValue! == 1 {
                    meter.x = 2
                } else {
                    holder.withLock { $0 }?.invalidate()
                }
            }
        }
        meter.x = 1
        meter.x = 3
        #expect(log.current == [1, 2])
        #expect(meter.x == 3)
    }

    @Test func invalidatingFromAnotherThreadStopsDeliveries() {
        let meter = TrackedMeter()
        let calls = Counter(0)
        let token = meter.observeTracking {
            $0.x + $0.y
        } changeHandler: { _, _ in
            calls.increment()
        }
        meter.x = 1
        TestThread.run(1) { _ in token.invalidate() }
        meter.x = 2
        meter.y = 2
        #expect(calls.current == 1)
        #expect(meter.observationInfo.isEmpty)
    }

    /// After `invalidate()` returns on one thread, no delivery starts, even for a change another
    /// thread has begun to deliver: the first tracked observation holds the setting thread inside
    /// its handler while the main thread invalidates the second.
    @Test func noDeliveryStartsAfterInvalidateReturnsOnAnotherThread() {
        let meter = TrackedMeter()
        let inFirstHandler = Locked(false)
        let mayContinue = Locked(false)
        let secondCalls = Counter(0)
        let first = meter.observeTracking {
            $0.x
        } changeHandler: { _, _ in
            inFirstHandler.withLock { $0 = true }
            while !mayContinue.current {}
        }
        let second = meter.observeTracking {
            $0.x * 2
        } changeHandler: { _, _ in
            secondCalls.increment()
        }
        let setter = TestThread { meter.x = 1 }
        while !inFirstHandler.current {}
        second.invalidate()
        mayContinue.withLock { $0 = true }
        setter.join()
        #expect(secondCalls.current == 0)
        first.invalidate()
    }

    /// The deliveries run on the thread that made the change, after the store.
    @Test func aChangeOnAnotherThreadIsDeliveredOnThatThreadAfterTheStore() {
        let meter = TrackedMeter()
        let seen = Locked<[String]>([])
        let setterThread = Locked<UInt>(0)
        let token = meter.observeTracking(options: [.new]) {
            $0.x
        } changeHandler: { meter, change in
            seen.append("\(change.newValue!) stored \(meter.x) on setter \(currentThreadID() == setterThread.current)")
        }
        TestThread.run(1) { _ in
            setterThread.withLock { $0 = currentThreadID() }
            meter.x = 7
        }
        #expect(seen.current == ["7 stored 7 on setter true"])
        token.invalidate()
    }
}
