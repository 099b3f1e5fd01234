import KeyValueObserving
import Testing

@Suite("Tracked observation: options, duplicates, batches and nested changes")
struct TrackedOptionsAndBatchesTests {
    /// Observes `x * 10` on `meter` with `options`, runs `body`, and returns what was delivered.
    private func changes(
        _ meter: TrackedMeter, _ options: KeyValueObservingOptions, _ body: () -> Void
    ) -> [KeyValueObservedChange<Int>] {
        let changes = Locked<[KeyValueObservedChange<Int>]>([])
        let token = meter.observeTracking(options: options) {
            $0.x * 10
        } changeHandler: { _, change in
            changes.append(change)
        }
        body()
        token.invalidate()
        return changes.current
    }

    // MARK: Options

    @Test func eachOptionFillsWhatItNames() {
        let meter = TrackedMeter()
        #expect(changes(meter, [.initial, .old, .new]) { meter.x = 1 } == [KeyValueObservedChange(newValue: 0), trackedChange(0, 10)])
        #expect(changes(meter, [.new]) { meter.x = 2 } == [KeyValueObservedChange(newValue: 20)])
        #expect(changes(meter, [.old]) { meter.x = 3 } == [KeyValueObservedChange(oldValue: 20)])
        #expect(changes(meter, []) { meter.x = 4 } == [KeyValueObservedChange()])
        #expect(changes(meter, [.initial]) {} == [KeyValueObservedChange()])
        #expect(
            changes(meter, [.initial, .new]) { meter.x = 5 } == [
                KeyValueObservedChange(newValue: 40), KeyValueObservedChange(newValue: 50),
            ])
        // An input the expression does not read notifies nothing.
        #expect(changes(meter, [.new]) { meter.y = 1 }.isEmpty)
    }

    @Test func theOldValueIsThePreviousEvaluationsResult() {
        // Two inputs: the old value of each delivery is what the expression returned last, whichever
        // input changed.
        let meter = TrackedMeter()
        let changes = Locked<[KeyValueObservedChange<Int>]>([])
        let token = meter.observeTracking(options: [.old, .new]) {
            $0.x * 10 + $0.y
        } changeHandler: { _, change in
            changes.append(change)
        }
        meter.x = 1
        meter.y = 2
        meter.x = 3
        #expect(changes.current == [trackedChange(0, 10), trackedChange(10, 12), trackedChange(12, 32)])
        token.invalidate()
    }

    @Test func priorComesBeforeTheStoreWithTheLastEvaluationsValue() {
        let meter = TrackedMeter()
        meter.x = 1
        let log = Locked<[KeyValueObservedChange<Int>]>([])
        let storedDuringPrior = Locked<[Int]>([])
        let token = meter.observeTracking(options: [.prior, .old, .new]) {
            $0.x * 10
        } changeHandler: { meter, change in
            log.append(change)
            // Read from the object: the store has not happened yet.
            if change.isPrior { storedDuringPrior.append(meter.x) }
        }
        meter.x = 2
        meter.x = 3
        #expect(
            log.current == [
                KeyValueObservedChange(oldValue: 10, isPrior: true),
                trackedChange(10, 20),
                KeyValueObservedChange(oldValue: 20, isPrior: true),
                trackedChange(20, 30),
            ])
        #expect(storedDuringPrior.current == [1, 2])
        token.invalidate()
        #expect(changes(meter, [.prior]) { meter.x = 4 } == [KeyValueObservedChange(isPrior: true), KeyValueObservedChange()])
    }

    @Test func removingDuplicatesSkipsEvaluationsEqualToThePreviousOne() {
        let meter = TrackedMeter()
        let deduplicated = Locked<[KeyValueObservedChange<Int>]>([])
        let every = Locked<[KeyValueObservedChange<Int>]>([])
        let tokens = [
            meter.observeTracking(options: [.old, .new], removingDuplicates: true) {
                $0.x / 10
            } changeHandler: { _, change in
                deduplicated.append(change)
            },
            meter.observeTracking(options: [.old, .new], removingDuplicates: false) {
                $0.x / 10
            } changeHandler: { _, change in
                every.append(change)
            },
        ]
        for x in [1, 12, 15, 20, 20] { meter.x = x }
        #expect(deduplicated.current == [trackedChange(0, 1), trackedChange(1, 2)])
        #expect(
            every.current == [
                trackedChange(0, 0), trackedChange(0, 1), trackedChange(1, 1), trackedChange(1, 2), trackedChange(2, 2),
            ])
        tokens.forEach { $0.invalidate() }
    }

    @Test func theFreeFormRemovesDuplicatesToo() {
        let meter = TrackedMeter()
        let changes = Locked<[KeyValueObservedChange<Bool>]>([])
        let token = KeyValueObservation.tracking(options: [.new], removingDuplicates: true) {
            meter.x > 5
        } changeHandler: { change in
            changes.append(change)
        }
        for x in [1, 6, 7, 2, 3] { meter.x = x }
        #expect(changes.current == [KeyValueObservedChange(newValue: true), KeyValueObservedChange(newValue: false)])
        token.invalidate()
    }

    // MARK: Batches

    @Test func inputsChangedInsideOneBatchGiveOneEvaluationAndOneDelivery() {
        let meter = TrackedMeter()
        let evaluations = Counter(0)
        let changes = Locked<[KeyValueObservedChange<Int>]>([])
        let token = meter.observeTracking(options: [.old, .new]) { meter in
            evaluations.increment()
            return meter.x + meter.y + meter.z
        } changeHandler: { _, change in
            changes.append(change)
        }
        let registered = evaluations.current
        let duringBatch = Locked<[KeyValueObservedChange<Int>]?>(nil)
        meter.coalescingChanges {
            meter.x = 1
            meter.y = 2
            meter.x = 3
            meter.z = 4
            duringBatch.withLock { $0 = changes.current }
        }
        #expect(duringBatch.current == [])
        #expect(changes.current == [trackedChange(0, 9)])
        #expect(evaluations.current == registered + 1)
        // After the batch, each change is delivered again.
        meter.y = 0
        #expect(changes.current == [trackedChange(0, 9), trackedChange(9, 7)])
        token.invalidate()
    }

    @Test func aBatchSendsOnePriorBeforeItsFirstStoreThenOneDelivery() {
        let meter = TrackedMeter()
        let log = Locked<[KeyValueObservedChange<Int>]>([])
        let storedDuringPrior = Locked<[[Int]]>([])
        let token = meter.observeTracking(options: [.prior, .old, .new]) {
            $0.x + $0.y
        } changeHandler: { meter, change in
            log.append(change)
            if change.isPrior { storedDuringPrior.append([meter.x, meter.y]) }
        }
        meter.coalescingChanges {
            meter.x = 1
            meter.y = 2
            meter.x = 3
        }
        #expect(log.current == [KeyValueObservedChange(oldValue: 0, isPrior: true), trackedChange(0, 5)])
        #expect(storedDuringPrior.current == [[0, 0]])
        token.invalidate()
    }

    @Test func aBatchOnAChildObjectCoalescesItsInputs() {
        let holder = TrackedHolder(TrackedMeter())
        let changes = Locked<[KeyValueObservedChange<Int>]>([])
        let token = holder.observeTracking(options: [.old, .new]) {
            $0.meter.x * 10 + $0.meter.y
        } changeHandler: { _, change in
            changes.append(change)
        }
        let meter = holder.meter
        meter.coalescingChanges {
            meter.x = 1
            meter.y = 1
            meter.y = 2
        }
        #expect(changes.current == [trackedChange(0, 12)])
        token.invalidate()
    }

    @Test func aBatchChangingNoTrackedInputDeliversNothing() {
        let meter = TrackedMeter()
        let calls = Counter(0)
        let token = meter.observeTracking {
            $0.x + $0.y
        } changeHandler: { _, _ in
            calls.increment()
        }
        meter.coalescingChanges {
            meter.z = 1
            meter.plain = 1
        }
        #expect(calls.current == 0)
        token.invalidate()
    }

    // MARK: Nested changes

    @Test func aHandlerChangingItsOwnInputGetsTheNestedDeliveryDepthFirst() {
        let meter = TrackedMeter()
        let log = Locked<[String]>([])
        let token = meter.observeTracking(options: [.old, .new]) {
            $0.x
        } changeHandler: { meter, change in
            let step = "\(change.oldValue!)→\(change.newValue!)"
            log.append("begin \(step)")
            if change.newValue! > 10 { meter.x = 10 }
            log.append("end \(step)")
        }
        meter.x = 30
        #expect(meter.x == 10)
        #expect(log.current == ["begin 0→30", "begin 30→10", "end 30→10", "end 0→30"])
        meter.x = 5
        #expect(log.current.suffix(2) == ["begin 10→5", "end 10→5"])
        token.invalidate()
    }

    @Test func aHandlerChangingAnotherTrackedInputDeliversItInsideTheHandler() {
        let meter = TrackedMeter()
        let log = Locked<[String]>([])
        let doubling = meter.observeTracking(options: [.old, .new]) {
            $0.x
        } changeHandler: { meter, change in
            log.append("x begin \(change.oldValue!)→\(change.newValue!)")
            meter.y = change.newValue! * 2
            log.append("x end")
        }
        let watching = meter.observeTracking(options: [.old, .new]) {
            $0.y + 100
        } changeHandler: { _, change in
            log.append("y \(change.oldValue!)→\(change.newValue!)")
        }
        meter.x = 1
        meter.x = 2
        #expect(log.current == ["x begin 0→1", "y 100→102", "x end", "x begin 1→2", "y 102→104", "x end"])
        doubling.invalidate()
        watching.invalidate()
    }

    @Test func aSecondObserverOfTheSameInputGetsTheNestedChangeFirstAndAnExactChain() {
        // KVO's order: the nested change reaches every observer before the outer change reaches the
        // second one. The second observer's values stay a chain (each old value is the previous new
        // one) and end at the stored value.
        let meter = TrackedMeter()
        let clamped = Locked<[KeyValueObservedChange<Int>]>([])
        let watched = Locked<[KeyValueObservedChange<Int>]>([])
        let clamp = meter.observeTracking(options: [.old, .new]) {
            $0.x
        } changeHandler: { meter, change in
            clamped.append(change)
            if change.newValue! > 10 { meter.x = 10 }
        }
        let watcher = meter.observeTracking(options: [.old, .new]) {
            $0.x
        } changeHandler: { _, change in
            watched.append(change)
        }
        meter.x = 30
        #expect(clamped.current == [trackedChange(0, 30), trackedChange(30, 10)])
        let seen = watched.current
        #expect(seen.first == trackedChange(0, 10))
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.newValue == $1.oldValue })
        #expect(seen.allSatisfy { $0.newValue == 10 })
        clamp.invalidate()
        watcher.invalidate()
    }
}
