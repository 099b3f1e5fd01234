import KeyValueObserving
import Testing

@Suite("Thread safety of registration, removal and notification")
struct ConcurrencyTests {
    /// Eight threads, ten thousand operations each, on one shared object: each thread owns one key
    /// and sets it, while all of them register observers on every key and invalidate each other's.
    @Test func registerInvalidateAndNotifyFromManyThreadsAtOnce() {
        let threads = 8
        let operations = 10_000
        let shared = Counter8()
        let pool = Locked<[KeyValueObservation]>([])
        let violations = Locked<[String]>([])
        let deliveries = Counter(0)
        let sets = Locked<[Int]>(Array(repeating: 0, count: threads))
        // `observe` reads the property once per key path (to learn what it observes) and `.initial`
        // reads it too: reading a property while another thread sets it is a data race by Swift's
        // rules, whatever this package does. Let that first read happen before the threads start.
        for key in Counter8.keys {
            shared.observe(key) { _, _ in }.invalidate()
        }

        TestThread.run(threads) { me in
            var generator = SplitMix(seed: UInt64(me + 1))
            let myKey = Counter8.keys[me]
            var mySets = 0
            for step in 0..<operations {
                switch step % 4 {
                case 0:
                    let key = Counter8.keys[Int(generator.next() % UInt64(threads))]
                    let last = Locked<Int>(-1)
                    let token = shared.observe(key, options: [.old, .new]) { _, change in
                        deliveries.increment()
                        let new = change.newValue!
                        let old = change.oldValue!
                        last.withLock { last in
                            // One thread sets each key, so one observer sees its values in order.
                            if new != old + 1 || new <= last {
                                violations.append("key delivered \(old)→\(new) after \(last)")
                            }
                            last = new
                        }
                    }
                    pool.append(token)
                case 1:
                    let victim = pool.withLock { tokens -> KeyValueObservation? in
                        tokens.isEmpty ? nil : tokens.remove(at: Int(generator.next() % UInt64(tokens.count)))
                    }
                    victim?.invalidate()
                default:
                    shared[keyPath: myKey] += 1
                    mySets += 1
                }
            }
            sets.withLock { $0[me] = mySets }
        }

        #expect(violations.current == [])
        #expect(deliveries.current > 0)
        for (index, key) in Counter8.keys.enumerated() {
            #expect(shared[keyPath: key] == sets.current[index])
        }
        let remaining = pool.withLock { tokens in
            defer { tokens = [] }; return tokens
        }
        #expect(shared.observationInfo.observerCountsByKeyPath.values.reduce(0, +) == remaining.count)
        remaining.forEach { $0.invalidate() }
        #expect(shared.observationInfo.observerCountsByKeyPath.isEmpty)
        let before = deliveries.current
        shared.k0 += 1
        #expect(deliveries.current == before)
    }

    /// Objects are created, observed, changed and released on some threads while their tokens are
    /// invalidated on others, so teardown races with removal.
    @Test func objectsDieWhileOtherThreadsInvalidateTheirTokens() {
        let pool = Locked<[KeyValueObservation]>([])
        let deliveries = Counter(0)
        TestThread.run(8) { me in
            var generator = SplitMix(seed: UInt64(100 + me))
            for step in 0..<2_000 {
                if me % 2 == 0 {
                    let player = AudioPlayer()
                    let token = player.observe(\.volume, options: [.new]) { _, _ in deliveries.increment() }
                    player.volume = Double(step)
                    pool.append(token)
                } else {
                    let victim = pool.withLock { tokens -> KeyValueObservation? in
                        tokens.isEmpty ? nil : tokens.remove(at: Int(generator.next() % UInt64(tokens.count)))
                    }
                    victim?.invalidate()
                }
            }
        }
        #expect(deliveries.current == 4 * 2_000)
        pool.withLock { $0 = [] }
    }

    /// The registry is created lazily; threads racing to register first all end up in one registry.
    @Test func concurrentFirstRegistrationsShareOneRegistry() {
        for _ in 0..<100 {
            let player = AudioPlayer()
            let tokens = Locked<[KeyValueObservation]>([])
            let calls = Counter(0)
            TestThread.run(4) { _ in
                tokens.append(player.observe(\.volume) { _, _ in calls.increment() })
            }
            #expect(player.observationInfo.observerCountsByKeyPath == [\AudioPlayer.volume: 4])
            player.volume = 1
            #expect(calls.current == 4)
            tokens.current.forEach { $0.invalidate() }
        }
    }

    /// After `invalidate()` returns no delivery starts, even one for a change that another thread
    /// has already begun to deliver: the first observer holds the setting thread inside the
    /// delivery while the main thread invalidates the second.
    @Test func noDeliveryStartsAfterInvalidateReturns() {
        let player = AudioPlayer()
        let inFirstHandler = Locked(false)
        let mayContinue = Locked(false)
        let secondCalls = Counter(0)
        let first = player.observe(\.volume) { _, _ in
            inFirstHandler.withLock { $0 = true }
            while !mayContinue.current {}
        }
        let second = player.observe(\.volume) { _, _ in secondCalls.increment() }
        let setter = TestThread { player.volume = 1 }
        while !inFirstHandler.current {}
        second.invalidate()
        mayContinue.withLock { $0 = true }
        setter.join()
        #expect(secondCalls.current == 0)
        first.invalidate()
    }
}
