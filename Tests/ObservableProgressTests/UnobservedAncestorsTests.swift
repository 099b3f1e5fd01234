import KeyValueObserving
import Testing
import TestSupport
@testable import ObservableProgress

/// An update below ancestors nobody observes is not sent up; their fractions are brought up to date
/// when read. These tests use a clock that does not move, so no update is sent up because time
/// passed (see `ancestorsKeepTheirThroughputSamplesWhileNobodyReadsThem`).
@Suite("Ancestors nobody observes")
struct UnobservedAncestorsTests {
    /// A node whose clock does not move.
    private func node(_ totalUnitCount: Int64) -> ObservableProgress {
        ObservableProgress(totalUnitCount: totalUnitCount, clock: _ProgressClock { 1_000_000_000 })
    }

    @Test func anUpdateLeavesAncestorsNobodyObservesUntilTheyAreRead() {
        let root = node(1)
        let middle = node(2)
        let leaf = node(4)
        root.addChild(middle, withPendingUnitCount: 1)
        middle.addChild(leaf, withPendingUnitCount: 1)
        leaf.complete()
        // What the ancestors hold before anyone reads them: nothing was sent up.
        #expect(root.withLock { $0.values.fraction } == 0)
        #expect(middle.withLock { $0.values.fraction } == 0)
        #expect(root.fractionCompleted == 0.125)
        #expect(middle.withLock { $0.values.fraction } == 0.125)
    }

    @Test func anObserverThatStartsWithoutReadingGetsExactValuesOnce() {
        let root = node(2)
        let first = node(10)
        let second = node(4)
        root.addChild(first, withPendingUnitCount: 1)
        root.addChild(second, withPendingUnitCount: 1)
        first.completedUnitCount = 3
        second.completedUnitCount = 1
        let changes = Locked<[String]>([])
        let token = root.observe(\.fractionCompleted, options: [.old, .new]) { _, change in
            changes.append("\(change.oldValue!) to \(change.newValue!)")
        }
        first.completedUnitCount = 5
        // One notification, from the value a read returned just before (both children's changes
        // included) to the new one.
        #expect(changes.current == ["\((0.3 + 0.25) / 2) to \((0.5 + 0.25) / 2)"])
        token.invalidate()
    }

    @Test func anObservedNodeHearsOfItsOwnUpdateWithItsChildrensChangesIncluded() {
        let parent = node(2)
        let child = node(4)
        parent.addChild(child, withPendingUnitCount: 1)
        child.complete()
        let changes = Locked<[String]>([])
        let token = parent.observe(\.fractionCompleted, options: [.old, .new]) { _, change in
            changes.append("\(change.oldValue!) to \(change.newValue!)")
        }
        parent.complete()
        #expect(changes.current == ["0.125 to 0.625"])
        token.invalidate()
    }

    @Test func aDroppedChildLeavesItsLatestContribution() {
        let root = node(2)
        do {
            let child = node(10)
            root.addChild(child, withPendingUnitCount: 1)
            child.completedUnitCount = 3
        }
        #expect(root.fractionCompleted == 0.15)
    }

    @Test func aSubtreeThatJoinsBringsItsDescendantsChanges() {
        let root = node(1)
        let middle = node(2)
        let leaf = node(4)
        middle.addChild(leaf, withPendingUnitCount: 1)
        leaf.complete()
        root.addChild(middle, withPendingUnitCount: 1)
        #expect(root.fractionCompleted == 0.125)
    }

    @Test func ancestorsKeepTheirThroughputSamplesWhileNobodyReadsThem() throws {
        // Slow for 100 s (4 units/s), then fast for 5 s (80 units/s), one update every 250 ms:
        // the root's estimate follows the recent speed, as the child's does, although nothing
        // reads the root before the end.
        let time = Locked<UInt64>(1_000_000_000)
        let clock = _ProgressClock { time.current }
        let root = ObservableProgress(totalUnitCount: 1, clock: clock)
        let child = ObservableProgress(totalUnitCount: 1_000, clock: clock)
        root.addChild(child, withPendingUnitCount: 1)
        for step in 1...420 {
            time.withLock { $0 += 250_000_000 }
            child.complete(count: step <= 400 ? 1 : 20)
        }
        let childUnits = try #require(child.throughput)
        let rootUnits = try #require(root.throughput)
        #expect(abs(childUnits - 80) < 1e-9)
        #expect(abs(rootUnits - 0.08) < 1e-9)
    }
}
