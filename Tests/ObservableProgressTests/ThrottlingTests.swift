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
    @Test func aMillionIncrementsDeliverAFewHundredValuesEndingWithTheFinalOne() async {
        let progress = ObservableProgress(totalUnitCount: 1_000_000)
        let queue = DispatchQueue(label: "display")
        let delivered = Locked<[Double]>([])
        let offQueue = Counter(0)
        let updating = Locked<Duration>(.zero)
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        await confirmation("the final value arrives") { finalValue in
            let token = progress.observe(\.fractionCompleted, throttledTo: .milliseconds(10), on: queue) { fraction in
                if DispatchQueue.getSpecific(key: key) != true { offQueue.increment() }
                delivered.append(fraction)
                if fraction == 1 { finalValue() }
            }
            let start = ContinuousClock.now
            for _ in 0..<1_000_000 { progress.complete() }
            updating.withLock { $0 = ContinuousClock.now - start }
            // Wait with a deadline for the final delivery.
            let deadline = ContinuousClock.now.advanced(by: .seconds(10))
            while delivered.current.last != 1, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            token.invalidate()
        }
        let values = delivered.current
        #expect(values.last == 1)
        // At most one delivery per 10 ms while the loop ran, plus the first and the final one:
        // a few dozen in a release build, a few hundred in a debug or sanitizer build; never one
        // per change.
        let intervals = Int(updating.current / .milliseconds(10))
        #expect(values.count <= intervals + 2)
        #expect(values.count < 10_000)
        #expect(values == values.sorted())
        #expect(offQueue.current == 0)
    }

    @Test func withSeveralUpdatingThreadsTheLastDeliveryIsTheFinalValue() async {
        // Notifications of different threads may arrive out of order; the throttle must still end
        // on the value the progress has, not on the last notification it heard.
        for _ in 0..<20 {
            let root = ObservableProgress(totalUnitCount: 4)
            let leaves = (0..<4).map { _ in ObservableProgress(totalUnitCount: 1_000, parent: root, pendingUnitCount: 1) }
            let queue = DispatchQueue(label: "display")
            let last = Locked<Double>(-1)
            let token = root.observe(\.fractionCompleted, throttledTo: .zero, on: queue) { fraction in
                last.withLock { $0 = fraction }
            }
            TestThread.run(4) { index in
                for _ in 0..<1_000 { leaves[index].complete() }
            }
            let deadline = ContinuousClock.now.advanced(by: .seconds(10))
            while last.current != 1, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(2))
            }
            queue.sync {}
            #expect(last.current == 1)
            token.invalidate()
        }
    }

    @Test func aThrottledHandlerNeverRunsTwiceAtOnce() async {
        let progress = ObservableProgress(totalUnitCount: 10_000)
        let concurrent = DispatchQueue(label: "concurrent", attributes: .concurrent)
        let running = Counter(0)
        let overlaps = Counter(0)
        let last = Locked<Double>(-1)
        let token = progress.observe(\.fractionCompleted, throttledTo: .zero, on: concurrent) { fraction in
            if running.withLock({ $0 += 1; return $0 }) > 1 { overlaps.increment() }
            usleep(200)
            last.withLock { $0 = fraction }
            running.withLock { $0 -= 1 }
        }
        TestThread.run(4) { _ in
            for _ in 0..<2_500 { progress.complete() }
        }
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while last.current != 1, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        #expect(last.current == 1)
        #expect(overlaps.current == 0)
        token.invalidate()
    }

    @Test func invalidatingDropsThePendingDelivery() async {
        let progress = ObservableProgress(totalUnitCount: 10)
        let queue = DispatchQueue(label: "display")
        let delivered = Locked<[Double]>([])
        let token = progress.observe(\.fractionCompleted, throttledTo: .milliseconds(20), on: queue) { delivered.append($0) }
        // The initial value goes out at once; the next one 20 ms after it.
        queue.sync {}
        progress.complete()
        token.invalidate()
        // Well past the interval: the dropped delivery would have run by now.
        try? await Task.sleep(for: .milliseconds(300))
        queue.sync {}
        #expect(delivered.current == [0])
    }

    @Test func throttledSequenceEndsWithTheFinalValue() async {
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
        #expect(seen.count < 1_000)
        #expect(seen == seen.sorted())
    }

    @Test func aWakeUpThatFindsTheValueUnchangedDeliversNothing() {
        // The last change can land between one delivery's read and the next wake-up, so a wake-up
        // may find the value already delivered: an equal value is not delivered twice.
        let queue = DispatchQueue(label: "display")
        let delivered = Locked<[Int]>([])
        let throttle = _Throttle<Int>(interval: .zero, queue: queue, isDuplicate: { $0 == $1 }, handler: { delivered.append($0) }) { 5 }
        throttle.wake()
        queue.sync {}
        throttle.wake()
        queue.sync {}
        queue.sync {}
        #expect(delivered.current == [5])
        let plain = _Throttle<Int>(interval: .zero, queue: queue, isDuplicate: nil, handler: { delivered.append($0) }) { 7 }
        plain.wake()
        queue.sync {}
        plain.wake()
        queue.sync {}
        queue.sync {}
        #expect(delivered.current == [5, 7, 7])
    }
}
