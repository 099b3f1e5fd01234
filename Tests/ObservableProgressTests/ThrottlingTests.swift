import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KeyValueObserving
import Testing
import TestSupport
@testable import ObservableProgress

@Suite("Throttled progress observation")
struct ThrottlingTests {
    @Test(.tags(.stress)) func aMillionIncrementsDeliverOneValuePerIntervalEndingWithTheFinalOne() {
        let clock = ManualThrottleScheduler()
        let progress = ObservableProgress(totalUnitCount: 1_000_000)
        let queue = DispatchQueue(label: "display")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let delivered = Locked<[Double]>([])
        let offQueue = Counter(0)
        let token = progress.observe(
            \.fractionCompleted, throttledTo: .milliseconds(10), on: queue, isDuplicate: { $0 == $1 }, scheduler: clock
        ) { fraction in
            if DispatchQueue.getSpecific(key: key) != true { offQueue.increment() }
            delivered.append(fraction)
        }
        clock.advance()  // the current value, at once
        // A million updates over 1 s of the manual clock: the clock moves 1 ms every 1,000 updates.
        for update in 1...1_000_000 {
            progress.complete()
            if update % 1_000 == 0 { clock.advance(by: .milliseconds(1)) }
        }
        clock.advance(by: .milliseconds(10))
        let values = delivered.current
        #expect(values.first == 0)
        #expect(values.last == 1)
        // One at 0, then one per 10 ms; never one per change.
        #expect(values.count <= 102)
        #expect(values == values.sorted())
        #expect(offQueue.current == 0)
        token.invalidate()
    }

    @Test func withSeveralUpdatingThreadsTheLastDeliveryIsTheCurrentValue() {
        // Notifications of different threads may arrive out of order; a delivery reads the value the
        // progress has, so the throttle ends on it, not on the last notification it heard.
        for _ in 0..<20 {
            let clock = ManualThrottleScheduler()
            let root = ObservableProgress(totalUnitCount: 4)
            let leaves = (0..<4).map { _ in ObservableProgress(totalUnitCount: 1_000, parent: root, pendingUnitCount: 1) }
            let queue = DispatchQueue(label: "display")
            let delivered = Locked<[Double]>([])
            let token = root.observe(\.fractionCompleted, throttledTo: .zero, on: queue, isDuplicate: { $0 == $1 }, scheduler: clock) {
                fraction in
                delivered.append(fraction)
            }
            let finished = Counter(0)
            let threads = (0..<4).map { index in
                TestThread {
                    for _ in 0..<1_000 { leaves[index].complete() }
                    finished.increment()
                }
            }
            // Deliveries run on this thread while the others update.
            while finished.current < 4 { clock.advance() }
            for thread in threads { thread.join() }
            clock.advance()
            #expect(delivered.current.last == 1)
            token.invalidate()
        }
    }

    @Test func aThrottledHandlerNeverRunsTwiceAtOnce() {
        let progress = ObservableProgress(totalUnitCount: 10_000)
        let concurrent = DispatchQueue(label: "concurrent", attributes: .concurrent)
        let running = Counter(0)
        let overlaps = Counter(0)
        let done = DispatchSemaphore(value: 0)
        let token = progress.observe(\.fractionCompleted, throttledTo: .zero, on: concurrent) { fraction in
            if running.withLock({
                $0 += 1; return $0
            }) > 1 {
                overlaps.increment()
            }
            usleep(200)  // a handler that takes time, so an overlap would be seen
            running.withLock { $0 -= 1 }
            if fraction == 1 { done.signal() }
        }
        TestThread.run(4) { _ in
            for _ in 0..<2_500 { progress.complete() }
        }
        #expect(done.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(overlaps.current == 0)
        token.invalidate()
    }

    @Test func invalidatingDropsThePendingDelivery() {
        let clock = ManualThrottleScheduler()
        let progress = ObservableProgress(totalUnitCount: 10)
        let queue = DispatchQueue(label: "display")
        let delivered = Locked<[Double]>([])
        let token = progress.observe(\.fractionCompleted, throttledTo: .milliseconds(20), on: queue, isDuplicate: nil, scheduler: clock) {
            delivered.append($0)
        }
        clock.advance()  // the initial value goes out at once; the next one 20 ms after it
        progress.complete()
        token.invalidate()
        clock.advance(by: .seconds(1))
        #expect(delivered.current == [0])
    }

    @Test func aThrottledSequenceReturnsTheLatestValueEachTimeItIsAsked() async {
        let clock = ManualThrottleScheduler()
        let progress = ObservableProgress(totalUnitCount: 100_000)
        var values = progress.values(for: \.fractionCompleted, throttledTo: .milliseconds(10), isDuplicate: { $0 == $1 }, scheduler: clock)
            .makeAsyncIterator()
        #expect(await values.next() == 0)
        for step in 1...100 {
            for _ in 0..<1_000 { progress.complete() }
            clock.advance(by: .milliseconds(10))
            // Asked after the interval: the value the progress has now, at once.
            #expect(await values.next() == Double(step) / 100)
        }
    }

    @Test func thePublicSequenceEndsWithTheFinalValue() async {
        let progress = ObservableProgress(totalUnitCount: 100_000)
        let values = progress.values(for: \.fractionCompleted, throttledTo: .milliseconds(10))
        let worker = Task.detached {
            for _ in 0..<100_000 { progress.complete() }
        }
        var seen: [Double] = []
        for await value in values {
            seen.append(value)
            if value == 1 { break }
        }
        await worker.value
        #expect(seen.last == 1)
        #expect(seen == seen.sorted())
    }

    @Test func aDeliveryThatFindsTheValueUnchangedDeliversNothing() {
        // The last change can land between one delivery's read and the next notification, so a
        // delivery may find the value already delivered: an equal value is not delivered twice.
        let clock = ManualThrottleScheduler()
        let queue = DispatchQueue(label: "display")
        let delivered = Locked<[Int]>([])
        let throttle = _Throttle<Int>(
            interval: .zero, queue: queue, scheduler: clock, isDuplicate: { $0 == $1 }, read: { 5 },
            target: .handler { delivered.append($0) })
        throttle.notify(0)
        clock.advance()
        throttle.notify(0)
        clock.advance()
        #expect(delivered.current == [5])
        let plain = _Throttle<Int>(
            interval: .zero, queue: queue, scheduler: clock, isDuplicate: nil, read: { 7 }, target: .handler { delivered.append($0) })
        plain.notify(0)
        clock.advance()
        plain.notify(0)
        clock.advance()
        #expect(delivered.current == [5, 7, 7])
    }

    @Test func aGoneProgressDeliversTheValueLastNotified() {
        let clock = ManualThrottleScheduler()
        let queue = DispatchQueue(label: "display")
        let delivered = Locked<[Double]>([])
        var progress: ObservableProgress? = ObservableProgress(totalUnitCount: 4)
        let token = progress!.observe(\.fractionCompleted, throttledTo: .seconds(1), on: queue, isDuplicate: { $0 == $1 }, scheduler: clock)
        {
            delivered.append($0)
        }
        clock.advance()
        progress!.complete()
        progress = nil
        clock.advance(by: .seconds(1))
        #expect(delivered.current == [0, 0.25])
        token.invalidate()
    }
}
