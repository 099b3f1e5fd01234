import KeyValueObserving
import Testing
import TestSupport
@testable import ObservableProgress

@Suite("Progress under concurrent updates", .tags(.stress))
struct ConcurrencyTests {
    @Test func concurrentIncrementsAreNeverLost() {
        let progress = ObservableProgress(totalUnitCount: 800_000)
        TestThread.run(8) { _ in
            for _ in 0..<100_000 { progress.complete() }
        }
        #expect(progress.completedUnitCount == 800_000)
        #expect(progress.isFinished)
    }

    @Test func concurrentLeavesAddUpExactlyAtTheRoot() {
        let root = ObservableProgress(totalUnitCount: 4)
        let leaves = (0..<4).map { _ in ObservableProgress(totalUnitCount: 10_000, parent: root, pendingUnitCount: 1) }
        let finished = Counter(0)
        let token = root.observe(\.isFinished, options: [.new]) { _, change in
            if change.newValue! { finished.increment() }
        }
        TestThread.run(8) { index in
            let leaf = leaves[index % 4]
            for _ in 0..<5_000 { leaf.complete() }
        }
        #expect(root.completedUnitCount == 4)
        #expect(root.fractionCompleted == 1)
        #expect(finished.current == 1)
        token.invalidate()
    }

    @Test func updatesBelowAncestorsNobodyObservesAddUpWhileTheyAreReadAndStartBeingObserved() {
        // Leaves update while nobody observes the tree (their changes are not sent up), readers
        // bring the ancestors up to date concurrently, and an observer arrives half-way (from then
        // on every change is sent up at once). Every change arrives.
        let root = ObservableProgress(totalUnitCount: 2)
        let middles = (0..<2).map { _ in ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1) }
        let leaves = (0..<4).map { index in ObservableProgress(totalUnitCount: 4_000, parent: middles[index % 2], pendingUnitCount: 1) }
        let observed = Locked<[Double]>([])
        let tokens = Locked<[KeyValueObservation]>([])
        let halfWay = Counter(0)
        TestThread.run(6) { index in
            switch index {
            case 0..<4:
                for unit in 0..<3_999 {
                    leaves[index].complete()
                    if unit == 2_000 { halfWay.increment() }
                }
            case 4:
                while halfWay.current < 4 { _ = root.fractionCompleted }
                let token = root.observe(\.fractionCompleted, options: [.new]) { _, change in observed.append(change.newValue!) }
                tokens.append(token)
            default:
                for _ in 0..<2_000 {
                    _ = middles[0].fractionCompleted
                    _ = root.description
                }
            }
        }
        // Each leaf, each middle and the root are 3,999 / 4,000 done.
        #expect(middles.allSatisfy { $0.fractionCompleted == 3_999.0 / 4_000 })
        #expect(root.fractionCompleted == 3_999.0 / 4_000)
        // However the threads ran, the observer hears of the next update, with the value a read
        // returns (the first leaf finishes and credits its unit to its middle).
        leaves[0].complete()
        let expected = ((1 + 3_999.0 / 4_000) / 2 + 3_999.0 / 4_000) / 2
        #expect(root.fractionCompleted == expected)
        #expect(observed.current.last == expected)
        tokens.withLock { $0.forEach { $0.invalidate() } }
    }

    @Test func stressUpdatesAddsCancelsAndObserversTogether() {
        let root = ObservableProgress(totalUnitCount: 1_000)
        let middles = (0..<4).map { _ in ObservableProgress(totalUnitCount: 100, parent: root, pendingUnitCount: 100) }
        let tokens = Locked<[KeyValueObservation]>([])
        let cancelled = Counter(0)
        let underCancelled = Locked<[ObservableProgress]>([])
        // Registered before the threads start, so it hears the workers however the threads are
        // scheduled (the observers that come and go may all be gone before a worker runs).
        let steadyNotifications = Counter(0)
        let steady = root.observe(\.fractionCompleted, options: [.new]) { _, _ in steadyNotifications.increment() }
        TestThread.run(6) { index in
            switch index {
            case 0, 1, 2:
                // Workers: leaves under random middles, updated per unit.
                for round in 0..<200 {
                    let leaf = ObservableProgress(totalUnitCount: 20, parent: middles[(index + round) % 4], pendingUnitCount: 1)
                    // Leaves of the subtree that gets cancelled stop half-way, so they stay in the
                    // tree and must all hear of the cancellation, whenever they were added.
                    let isUnderCancelled = (index + round) % 4 == 3
                    if isUnderCancelled { underCancelled.append(leaf) }
                    for _ in 0..<(isUnderCancelled ? 10 : 20) { leaf.complete() }
                }
            case 3:
                // Observers come and go.
                for round in 0..<300 {
                    let node = round % 2 == 0 ? root : middles[round % 4]
                    let token = node.observe(\.fractionCompleted, options: [.old, .new, .prior]) { _, _ in }
                    tokens.append(token)
                    if round % 3 == 0 { tokens.withLock { $0.removeFirst().invalidate() } }
                }
            case 4:
                // Cancellation and pausing of one subtree while it is updated and grows.
                let token = middles[3].onCancel { cancelled.increment() }
                for _ in 0..<100 { middles[3].pause(); middles[3].resume() }
                middles[3].cancel()
                withExtendedLifetime(token) {}
            default:
                for _ in 0..<2_000 {
                    _ = root.fractionCompleted
                    _ = root.description
                    _ = middles[1].throughput
                }
            }
        }
        // 600 leaves of 1 unit each into middles of 100 units (150 each): three middles finished
        // (100 units each credited to the root); the fourth holds 150 half-done leaves (75 units).
        #expect(middles[0...2].allSatisfy { $0.isFinished })
        #expect(middles[3].fractionCompleted == 0.75)
        #expect(root.completedUnitCount == 300)
        #expect(root.fractionCompleted == 0.375)
        #expect(cancelled.current == 1)
        // Every leaf of the cancelled subtree is cancelled (whenever it was added), and none stays
        // paused after the last resume.
        #expect(underCancelled.current.count == 150)
        #expect(underCancelled.current.allSatisfy { $0.isCancelled && !$0.isPaused })
        #expect(steadyNotifications.current > 0)
        steady.invalidate()
        tokens.withLock { $0.forEach { $0.invalidate() } }
    }
}
