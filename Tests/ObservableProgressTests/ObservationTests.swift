import KeyValueObserving
import Testing
import TestSupport
@testable import ObservableProgress

@Suite("Progress observation")
struct ObservationTests {
    @Test func referenceScenarioDeliversExactlyTheFractionsOnTheUpdatingThread() {
        let overall = ObservableProgress(totalUnitCount: 2)
        let download = ObservableProgress(totalUnitCount: 100, parent: overall, pendingUnitCount: 1)
        let unpack = ObservableProgress(totalUnitCount: 10, parent: overall, pendingUnitCount: 1)
        let received = Locked<[(fraction: Double, thread: UInt)]>([])
        let token = overall.observe(\.fractionCompleted, options: [.new]) { _, change in
            received.append((change.newValue!, currentThreadID()))
        }
        let worker = Locked<UInt>(0)
        TestThread {
            worker.withLock { $0 = currentThreadID() }
            download.completedUnitCount = 50
            download.completedUnitCount = 100
            unpack.completedUnitCount = 10
        }.join()
        #expect(received.current.map(\.fraction) == [0.25, 0.5, 1.0])
        #expect(received.current.allSatisfy { $0.thread == worker.current })
        #expect(worker.current != currentThreadID())
        token.invalidate()
    }

    @Test func fractionIsNotifiedOnlyWhenItChanges() {
        let root = ObservableProgress(totalUnitCount: 10)
        let child = ObservableProgress(totalUnitCount: -1, parent: root, pendingUnitCount: 5)
        let fractions = Locked<[Double]>([])
        let token = root.observe(\.fractionCompleted, options: [.new]) { _, change in fractions.append(change.newValue!) }
        child.completedUnitCount = 3  // indeterminate child: contributes nothing
        child.completedUnitCount = 4
        root.totalUnitCount = 10  // same total
        root.completedUnitCount = 0  // same count
        #expect(fractions.current.isEmpty)
        root.completedUnitCount = 1
        #expect(fractions.current == [0.1])
        token.invalidate()
    }

    @Test func oldAndPriorCarryTheValueBeforeTheUpdate() {
        let progress = ObservableProgress(totalUnitCount: 4)
        let log = Locked<[String]>([])
        let token = progress.observe(\.completedUnitCount, options: [.old, .new, .prior]) { _, change in
            log.append(change.isPrior ? "prior old=\(change.oldValue!)" : "old=\(change.oldValue!) new=\(change.newValue!)")
        }
        progress.completedUnitCount = 1
        progress.complete(count: 2)
        #expect(log.current == ["prior old=0", "old=0 new=1", "prior old=1", "old=1 new=3"])
        token.invalidate()
    }

    @Test func initialDeliversTheCurrentValue() {
        let progress = ObservableProgress(totalUnitCount: 4)
        progress.completedUnitCount = 1
        let values = Locked<[Double]>([])
        let token = progress.observe(\.fractionCompleted, options: [.initial, .new]) { _, change in values.append(change.newValue!) }
        progress.completedUnitCount = 2
        #expect(values.current == [0.25, 0.5])
        token.invalidate()
    }

    @Test func aGrandchildUpdateNotifiesEveryLevelOnTheWayUp() {
        let root = ObservableProgress(totalUnitCount: 1)
        let middle = ObservableProgress(totalUnitCount: 1, parent: root, pendingUnitCount: 1)
        let leaf = ObservableProgress(totalUnitCount: 2, parent: middle, pendingUnitCount: 1)
        let log = Locked<[String]>([])
        let tokens = [
            root.observe(\.fractionCompleted, options: [.new]) { _, change in log.append("root \(change.newValue!)") },
            middle.observe(\.fractionCompleted, options: [.new]) { _, change in log.append("middle \(change.newValue!)") },
            leaf.observe(\.fractionCompleted, options: [.new]) { _, change in log.append("leaf \(change.newValue!)") },
            root.observe(\.isFinished, options: [.new]) { _, change in log.append("root finished \(change.newValue!)") },
            root.observe(\.completedUnitCount, options: [.old, .new]) { _, change in
                log.append("root completed \(change.oldValue!)→\(change.newValue!)")
            },
        ]
        leaf.complete()
        #expect(log.current == ["leaf 0.5", "middle 0.5", "root 0.5"])
        log.withLock { $0.removeAll() }
        leaf.complete()
        #expect(
            log.current == [
                "leaf 1.0", "middle 1.0", "root completed 0→1", "root 1.0", "root finished true",
            ])
        tokens.forEach { $0.invalidate() }
    }

    @Test func everyKeyIsObservable() {
        let progress = ObservableProgress(totalUnitCount: 0)
        let log = Locked<[String]>([])
        var tokens = [
            progress.observe(\.totalUnitCount, options: [.new]) { _, change in log.append("total \(change.newValue!)") },
            progress.observe(\.isIndeterminate, options: [.new]) { _, change in log.append("indeterminate \(change.newValue!)") },
            progress.observe(\.isCancelled, options: [.new]) { _, change in log.append("cancelled \(change.newValue!)") },
            progress.observe(\.isPaused, options: [.new]) { _, change in log.append("paused \(change.newValue!)") },
        ]
        tokens.append(progress.observe(\.isCancellable, options: [.new]) { _, change in log.append("cancellable \(change.newValue!)") })
        tokens.append(progress.observe(\.isPausable, options: [.new]) { _, change in log.append("pausable \(change.newValue!)") })
        progress.totalUnitCount = 3
        progress.isPausable = true
        progress.isCancellable = false
        progress.pause()
        progress.resume()
        progress.cancel()
        #expect(
            log.current == [
                "total 3", "indeterminate false", "pausable true", "cancellable false", "paused true", "paused false", "cancelled true",
            ])
        tokens.forEach { $0.invalidate() }
    }

    @Test func valuesSequenceDeliversTheFractions() async {
        let progress = ObservableProgress(totalUnitCount: 4)
        let values = progress.values(for: \.fractionCompleted)
        progress.complete()
        progress.complete()
        var seen: [Double] = []
        for await value in values {
            seen.append(value)
            if seen.count == 3 { break }
        }
        #expect(seen == [0, 0.25, 0.5])
    }

    @Test func aProgressHeldByAnObservedPropertyIsObservableThroughAChain() {
        final class Job: KeyValueObservable {
            @Observed var progress = ObservableProgress(totalUnitCount: 2)
        }
        let job = Job()
        let values = Locked<[Double]>([])
        let token = job.observe(\.progress.fractionCompleted, options: [.new]) { _, change in values.append(change.newValue!) }
        job.progress.complete()
        let replacement = ObservableProgress(totalUnitCount: 4)
        job.progress = replacement
        replacement.complete(count: 3)
        #expect(values.current == [0.5, 0, 0.75])
        token.invalidate()
    }

    @Test func aDependentKeyMayReadAProgress() {
        final class Job: KeyValueObservable {
            @Observed var progress = ObservableProgress(totalUnitCount: 4)
            var percent: Int { Int(progress.fractionCompleted * 100) }
            override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
                [\Job.percent: [\Job.progress.fractionCompleted]]
            }
        }
        let job = Job()
        let values = Locked<[Int]>([])
        let token = job.observe(\.percent, options: [.new]) { _, change in values.append(change.newValue!) }
        job.progress.complete()
        job.progress.complete(count: 3)
        #expect(values.current == [25, 100])
        token.invalidate()
    }

    @Test func anyKeyObserversHearOfProgressChanges() {
        let progress = ObservableProgress(totalUnitCount: 2)
        let keys = Locked<[AnyKeyPath]>([])
        let token = progress.observeAnyKey { _, change in
            if !change.isPrior { keys.append(change.keyPath) }
        }
        progress.complete()
        #expect(keys.current == [\ObservableProgress.completedUnitCount, \ObservableProgress.fractionCompleted])
        token.invalidate()
    }

    @Test func anUpdateChangingSeveralKeysPairsEachKeysPriorWithItsChange() {
        // Foundation sends every key's prior first, then the changes in reverse order; here each key's
        // prior comes right before its change, key after key, the node before its parent.
        let root = ObservableProgress(totalUnitCount: 1)
        let child = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1)
        child.complete()
        let log = Locked<[String]>([])
        func record<Value>(_ node: ObservableProgress, _ name: String, _ key: KeyPath<ObservableProgress, Value> & Sendable)
            -> KeyValueObservation
        {
            node.observe(key, options: [.prior, .new]) { _, change in
                log.append("\(node === root ? "root" : "child") \(change.isPrior ? "prior " : "")\(name)")
            }
        }
        let anyKey = root.observeAnyKey(options: [.prior]) { _, change in
            let name =
                switch change.keyPath {
                case \ObservableProgress.completedUnitCount: "completed"
                case \ObservableProgress.fractionCompleted: "fraction"
                case \ObservableProgress.isFinished: "finished"
                default: "\(change.keyPath)"
                }
            log.append("root \(change.isPrior ? "will" : "did") \(name)")
        }
        let tokens = [child, root].flatMap { node in
            [
                record(node, "finished", \.isFinished), record(node, "fraction", \.fractionCompleted),
                record(node, "completed", \.completedUnitCount),
            ]
        }
        child.complete()
        #expect(
            log.current == [
                "child prior completed", "child completed",
                "child prior fraction", "child fraction",
                "child prior finished", "child finished",
                "root will completed", "root prior completed", "root completed", "root did completed",
                "root will fraction", "root prior fraction", "root fraction", "root did fraction",
                "root will finished", "root prior finished", "root finished", "root did finished",
            ])
        for token in tokens { token.invalidate() }
        anyKey.invalidate()
    }

    @Test func anInvalidatedObserverIsNotCalled() {
        let progress = ObservableProgress(totalUnitCount: 2)
        let count = Counter(0)
        let token = progress.observe(\.fractionCompleted, options: [.new]) { _, _ in count.increment() }
        progress.complete()
        token.invalidate()
        progress.complete()
        #expect(count.current == 1)
    }

    @Test func anObserverMayUpdateTheTreeFromInsideANotification() {
        // Handlers run with no lock held: updating a leaf and adding a child from a root observer
        // (in the middle of the walk up) neither deadlocks nor loses the nested updates.
        let root = ObservableProgress(totalUnitCount: 2)
        let leaf = ObservableProgress(totalUnitCount: 4, parent: root, pendingUnitCount: 1)
        let extra = Locked<ObservableProgress?>(nil)
        let fractions = Locked<[Double]>([])
        let token = root.observe(\.fractionCompleted, options: [.new]) { root, change in
            fractions.append(change.newValue!)
            if change.newValue! == 0.125 {
                leaf.complete()
                extra.withLock { $0 = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1) }
                extra.current?.complete()
            }
        }
        leaf.complete()
        #expect(fractions.current == [0.125, 0.25, 0.5])
        #expect(root.fractionCompleted == 0.5)
        token.invalidate()
    }
}
