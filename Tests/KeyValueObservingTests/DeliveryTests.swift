import KeyValueObserving
import Testing

@Suite("Delivery: synchronous, on the setting thread, in registration order")
struct DeliveryTests {
    @Test func deliveryIsSynchronousOnTheThreadThatMadeTheChange() {
        let player = AudioPlayer()
        let handlerThread = Locked<UInt?>(nil)
        let token = player.observe(\.volume, options: [.new]) { _, _ in
            handlerThread.withLock { $0 = currentThreadID() }
        }
        let setterThread = Locked<UInt?>(nil)
        let seenBeforeSetReturned = Locked<Bool>(false)
        let thread = TestThread {
            setterThread.withLock { $0 = currentThreadID() }
            player.volume = 0.8
            // Synchronous: the handler has run by the time the assignment returns.
            seenBeforeSetReturned.withLock { $0 = handlerThread.current != nil }
        }
        thread.join()
        #expect(seenBeforeSetReturned.current)
        #expect(handlerThread.current != nil)
        #expect(handlerThread.current == setterThread.current)
        #expect(handlerThread.current != currentThreadID())
        token.invalidate()
    }

    @Test func observersAreCalledInRegistrationOrder() {
        let player = AudioPlayer()
        let order = Locked<[Int]>([])
        let tokens = (0..<6).map { index in
            player.observe(\.volume) { _, _ in order.append(index) }
        }
        player.volume = 1
        #expect(order.current == [0, 1, 2, 3, 4, 5])
        // Removing one keeps the others' order; a new one goes last.
        tokens[2].invalidate()
        let late = player.observe(\.volume) { _, _ in order.append(6) }
        order.withLock { $0 = [] }
        player.volume = 2
        #expect(order.current == [0, 1, 3, 4, 5, 6])
        tokens.forEach { $0.invalidate() }
        late.invalidate()
    }

    @Test func priorNotificationsOfAllObserversPrecedeTheChange() {
        let player = AudioPlayer()
        let log = Locked<[String]>([])
        let a = player.observe(\.volume, options: [.prior]) { _, change in log.append("a\(change.isPrior ? "-prior" : "")") }
        let b = player.observe(\.volume, options: [.prior]) { _, change in log.append("b\(change.isPrior ? "-prior" : "")") }
        player.volume = 0
        #expect(log.current == ["a-prior", "b-prior", "a", "b"])
        a.invalidate()
        b.invalidate()
    }

    @Test func observingOneKeyDoesNotNotifyForAnother() {
        let player = AudioPlayer()
        let calls = Counter(0)
        let token = player.observe(\.volume) { _, _ in calls.increment() }
        player.isMuted = true
        #expect(calls.current == 0)
        player.volume = 0.1
        #expect(calls.current == 1)
        token.invalidate()
    }

    @Test func observersOfOneObjectAreNotCalledForAnother() {
        let first = AudioPlayer()
        let second = AudioPlayer()
        let calls = Counter(0)
        let token = first.observe(\.volume) { _, _ in calls.increment() }
        // Give the second object a registry of its own, so its set takes the observed path.
        let other = second.observe(\.isMuted) { _, _ in }
        second.volume = 0.9
        #expect(calls.current == 0)
        first.volume = 0.8
        #expect(calls.current == 1)
        token.invalidate()
        other.invalidate()
    }
}
