import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KeyValueObserving
import Testing
import TestSupport

/// A hot object for throttled observers. Not `Sendable`: every property is set on the test's thread.
final class Meter: KeyValueObservable {
    @Observed var count = 0
    @Observed var samples: [Int] = []
    @Observed var label = "idle"
    /// Where `doubled` was read: a throttled observer must read it only where `count` is set.
    let doubledReads = Locked<[UInt]>([])

    var doubled: Int {
        doubledReads.append(currentThreadID())
        return count * 2
    }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Meter.doubled: [\Meter.count]]
    }
}

/// A value that is not `Equatable`: never deduplicated.
struct Reading: Sendable {
    var value: Int
}

final class Sensor: KeyValueObservable {
    @Observed var reading = Reading(value: 0)
}

@Suite("Throttled observation of any key")
struct ThrottleTests {
    let queue = DispatchQueue(label: "throttled")

    @Test func aHotPropertyIsDeliveredAtMostOncePerIntervalEndingOnItsLastValue() {
        let clock = ManualThrottleScheduler()
        let meter = Meter()
        let delivered = Locked<[Int]>([])
        let token = meter._observe(\.count, throttledTo: .seconds(1), on: queue, isDuplicate: nil, scheduler: clock) {
            delivered.append($0)
        }
        clock.advance()
        #expect(delivered.current == [0])
        for value in 1...1_000 { meter.count = value }
        clock.advance(by: .milliseconds(999))
        #expect(delivered.current == [0])
        clock.advance(by: .milliseconds(1))
        #expect(delivered.current == [0, 1_000])
        meter.count = 1_001
        clock.advance(by: .milliseconds(999))
        #expect(delivered.current == [0, 1_000])
        clock.advance(by: .milliseconds(1))
        #expect(delivered.current == [0, 1_000, 1_001])
        // Quiet: nothing more is scheduled.
        clock.advance(by: .seconds(10))
        #expect(delivered.current == [0, 1_000, 1_001])
        #expect(clock.scheduledCount == 0)
        token.invalidate()
    }

    @Test func theIntervalCountsFromTheEndOfTheLastDelivery() {
        let clock = ManualThrottleScheduler()
        let meter = Meter()
        let delivered = Locked<[Int]>([])
        let token = meter._observe(\.count, throttledTo: .seconds(1), on: queue, isDuplicate: nil, scheduler: clock) { value in
            delivered.append(value)
        }
        clock.advance(by: .seconds(5))  // the first delivery, at 0
        meter.count = 1  // due at 1 s, long past: delivered at once
        clock.advance()
        #expect(delivered.current == [0, 1])
        meter.count = 2  // due 1 s after the previous delivery (at 5 s)
        clock.advance(by: .milliseconds(999))
        #expect(delivered.current == [0, 1])
        clock.advance(by: .milliseconds(1))
        #expect(delivered.current == [0, 1, 2])
        token.invalidate()
    }

    @Test func theValueIsCapturedWhereItIsSetAndNeverReadOnTheQueue() {
        // `doubled` is a dependent key: it is computed where `count` is set (this thread), and the
        // throttle delivers that value on its queue without reading the object there.
        let clock = ManualThrottleScheduler()
        let meter = Meter()
        let delivered = Locked<[Int]>([])
        let token = meter._observe(\.doubled, throttledTo: .seconds(1), on: queue, isDuplicate: nil, scheduler: clock) {
            delivered.append($0)
        }
        meter.count = 1
        meter.count = 2
        clock.advance()
        meter.count = 3
        clock.advance(by: .seconds(1))
        #expect(delivered.current == [4, 6])
        #expect(!meter.doubledReads.current.isEmpty)
        #expect(meter.doubledReads.current.allSatisfy { $0 == currentThreadID() })
        token.invalidate()
    }

    @Test func theHandlerRunsOnTheQueue() {
        let clock = ManualThrottleScheduler()
        let meter = Meter()
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let onQueue = Locked<[Bool]>([])
        let token = meter._observe(\.count, throttledTo: .zero, on: queue, isDuplicate: nil, scheduler: clock) { _ in
            onQueue.append(DispatchQueue.getSpecific(key: key) == true)
        }
        meter.count = 1
        clock.advance()
        #expect(onQueue.current == [true])
        token.invalidate()
    }

    @Test func anEquatableValueIsNeverDeliveredTwiceInARow() {
        let clock = ManualThrottleScheduler()
        let meter = Meter()
        let delivered = Locked<[String]>([])
        let token = meter.observe(\.label, throttledTo: .seconds(1), on: queue, scheduler: clock) { delivered.append($0) }
        clock.advance()
        meter.label = "busy"
        clock.advance(by: .seconds(1))
        meter.label = "idle"
        meter.label = "busy"  // back to the value delivered last
        clock.advance(by: .seconds(1))
        meter.label = "busy"  // an assignment of the same value
        clock.advance(by: .seconds(1))
        #expect(delivered.current == ["idle", "busy"])
        token.invalidate()
    }

    @Test func aValueThatIsNotEquatableIsDeliveredEvenIfItRepeats() {
        let clock = ManualThrottleScheduler()
        let sensor = Sensor()
        let delivered = Locked<[Int]>([])
        let token = sensor._observe(\.reading, throttledTo: .seconds(1), on: queue, isDuplicate: nil, scheduler: clock) {
            delivered.append($0.value)
        }
        clock.advance()
        sensor.reading = Reading(value: 0)
        clock.advance(by: .seconds(1))
        #expect(delivered.current == [0, 0])
        token.invalidate()
    }

    @Test func aToManyChangeDeliversTheWholeArray() {
        let clock = ManualThrottleScheduler()
        let meter = Meter()
        let delivered = Locked<[[Int]]>([])
        let token = meter._observe(\.samples, throttledTo: .zero, on: queue, isDuplicate: nil, scheduler: clock) { delivered.append($0) }
        clock.advance()
        meter.samples = [1, 2]
        meter.insert([3], at: 2, into: \.samples)
        clock.advance()
        meter.remove(at: RangeSet(0..<1), from: \.samples)
        clock.advance()
        #expect(delivered.current == [[], [1, 2, 3], [2, 3]])
        token.invalidate()
    }

    @Test func invalidatingDropsThePendingDelivery() {
        let clock = ManualThrottleScheduler()
        let meter = Meter()
        let delivered = Locked<[Int]>([])
        let token = meter._observe(\.count, throttledTo: .seconds(1), on: queue, isDuplicate: nil, scheduler: clock) {
            delivered.append($0)
        }
        clock.advance()
        meter.count = 1
        token.invalidate()
        clock.advance(by: .seconds(2))
        meter.count = 2
        clock.advance(by: .seconds(2))
        #expect(delivered.current == [0])
    }

    @Test func thePublicFormDeliversOnTheQueueWithTheRealClock() {
        let meter = Meter()
        let done = DispatchSemaphore(value: 0)
        let delivered = Locked<[Int]>([])
        let token = meter.observe(\.count, throttledTo: .milliseconds(1), on: queue) { value in
            delivered.append(value)
            if value == 100 { done.signal() }
        }
        for value in 1...100 { meter.count = value }
        #expect(done.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(delivered.current.last == 100)
        #expect(delivered.current == delivered.current.sorted())
        token.invalidate()
    }

    @Test func aThrottledHandlerNeverRunsTwiceAtOnceOnAConcurrentQueue() {
        let meter = Meter()
        let concurrent = DispatchQueue(label: "concurrent", attributes: .concurrent)
        let running = Counter(0)
        let overlaps = Counter(0)
        let done = DispatchSemaphore(value: 0)
        let token = meter.observe(\.count, throttledTo: .zero, on: concurrent) { value in
            if running.withLock({
                $0 += 1; return $0
            }) > 1 {
                overlaps.increment()
            }
            usleep(50)  // a handler that takes time, so an overlap would be seen
            running.withLock { $0 -= 1 }
            if value == 10_000 { done.signal() }
        }
        for value in 1...10_000 { meter.count = value }
        #expect(done.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(overlaps.current == 0)
        token.invalidate()
    }

    // MARK: Sequences

    @Test func aThrottledSequenceCoalescesChangesAndFinishesWithTheObject() async {
        let clock = ManualThrottleScheduler()
        var meter: Meter? = Meter()
        let values = meter!._values(for: \.count, throttledTo: .seconds(1), isDuplicate: { $0 == $1 }, scheduler: clock)
        let (received, report) = AsyncStream<Int>.makeStream()
        let consumer = Task {
            for await value in values { report.yield(value) }
            report.finish()
        }
        var receivedValues = received.makeAsyncIterator()
        #expect(await receivedValues.next() == 0)  // the current value, at once
        for value in 1...100 { meter!.count = value }
        await clock.waitUntilScheduled()  // the consumer waits for the next value
        clock.advance(by: .milliseconds(999))
        #expect(clock.scheduledCount == 1)  // not due yet
        clock.advance(by: .milliseconds(1))
        #expect(await receivedValues.next() == 100)  // the latest, once
        meter!.count = 100  // equal to the last value: not returned
        meter!.count = 101
        await clock.waitUntilScheduled()
        clock.advance(by: .seconds(1))
        #expect(await receivedValues.next() == 101)
        meter!.count = 102
        meter = nil  // the last value still comes, then the end
        await clock.waitUntilScheduled()
        clock.advance(by: .seconds(1))
        #expect(await receivedValues.next() == 102)
        #expect(await receivedValues.next() == nil)
        await consumer.value
    }

    @Test func aConsumerThatFallsBehindGetsTheLatestValueNotABacklog() async {
        let clock = ManualThrottleScheduler()
        let meter = Meter()
        var values = meter._values(for: \.count, throttledTo: .seconds(1), isDuplicate: nil, scheduler: clock).makeAsyncIterator()
        #expect(await values.next() == 0)
        meter.count = 1
        clock.advance(by: .seconds(5))  // the consumer was busy: nothing was scheduled
        #expect(clock.scheduledCount == 0)
        meter.count = 2
        #expect(await values.next() == 2)  // past the interval: at once, the latest
    }

    @Test func cancellingTheConsumingTaskEndsTheSequence() async {
        let meter = Meter()
        let values = meter.values(for: \.count, throttledTo: .seconds(3600))
        let consumer = Task {
            var seen: [Int] = []
            for await value in values { seen.append(value) }
            return seen
        }
        consumer.cancel()
        let seen = await consumer.value
        #expect(seen.count <= 1)
    }

    @Test func aNegativeIntervalTrapsWithAMessage() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let meter = Meter()
            _ = meter.observe(\.count, throttledTo: .seconds(-1), on: .main) { _ in }
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("the interval must not be negative"))
    }
}

extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// The `Equatable` form on a manual clock.
    func observe<Value: Equatable & Sendable>(
        _ keyPath: KeyPath<Self, Value> & Sendable,
        throttledTo interval: Duration,
        on queue: DispatchQueue,
        scheduler: ManualThrottleScheduler,
        handler: @escaping @Sendable (Value) -> Void
    ) -> KeyValueObservation {
        _observe(keyPath, throttledTo: interval, on: queue, isDuplicate: { $0 == $1 }, scheduler: scheduler, handler: handler)
    }
}
