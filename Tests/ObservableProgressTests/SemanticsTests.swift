import Testing
@testable import ObservableProgress

@Suite("Progress semantics (Foundation's)")
struct SemanticsTests {
    @Test(arguments: [
        // (total, completed, indeterminate, finished, fraction), as measured on swift-corelibs-foundation
        (Int64(0), Int64(0), true, false, 0.0),
        (-1, 0, true, false, 0.0),
        (-1, 5, true, false, 0.0),
        (10, -1, true, false, 0.0),
        (0, 5, false, true, 1.0),
        (5, 0, false, false, 0.0),
        (4, 1, false, false, 0.25),
        (5, 5, false, true, 1.0),
        (10, 15, false, true, 1.5),
    ])
    func countsFollowFoundationsRules(total: Int64, completed: Int64, indeterminate: Bool, finished: Bool, fraction: Double) {
        let progress = ObservableProgress(totalUnitCount: total)
        progress.completedUnitCount = completed
        #expect(progress.isIndeterminate == indeterminate)
        #expect(progress.isFinished == finished)
        #expect(progress.fractionCompleted == fraction)
    }

    @Test func parentFractionCountsChildrenByTheirPendingUnits() {
        let root = ObservableProgress(totalUnitCount: 10)
        let child = ObservableProgress(totalUnitCount: 4, parent: root, pendingUnitCount: 5)
        root.completedUnitCount = 1
        child.completedUnitCount = 2
        // (1 + 2/4 × 5) / 10
        #expect(root.fractionCompleted == 0.35)
        #expect(root.completedUnitCount == 1)
    }

    @Test func changingTheTotalRescales() {
        let root = ObservableProgress(totalUnitCount: 10)
        let child = ObservableProgress(totalUnitCount: 4, parent: root, pendingUnitCount: 5)
        child.completedUnitCount = 2
        #expect(root.fractionCompleted == 0.25)
        root.totalUnitCount = 20
        #expect(root.fractionCompleted == 0.125)
        child.totalUnitCount = 8
        #expect(root.fractionCompleted == 0.0625)
    }

    @Test func finishedChildCreditsItsPendingUnitsAndLeavesTheTree() {
        let root = ObservableProgress(totalUnitCount: 20)
        let child = ObservableProgress(totalUnitCount: 4, parent: root, pendingUnitCount: 5)
        child.completedUnitCount = 4
        #expect(root.completedUnitCount == 5)
        #expect(root.fractionCompleted == 0.25)
        // It left: its later changes no longer reach the parent.
        child.completedUnitCount = 1
        #expect(root.completedUnitCount == 5)
        #expect(root.fractionCompleted == 0.25)
        child.completedUnitCount = 4
        #expect(root.completedUnitCount == 5)
    }

    @Test func overCompletedChildCreditsOnlyItsPendingUnits() {
        let root = ObservableProgress(totalUnitCount: 20)
        let child = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 2)
        child.completedUnitCount = 3
        #expect(child.fractionCompleted == 1.5)
        #expect(root.completedUnitCount == 2)
        #expect(root.fractionCompleted == 0.1)
    }

    @Test func indeterminateChildContributesNothing() {
        let root = ObservableProgress(totalUnitCount: 10)
        let child = ObservableProgress(totalUnitCount: -1, parent: root, pendingUnitCount: 5)
        child.completedUnitCount = 3
        #expect(root.fractionCompleted == 0)
        child.totalUnitCount = 6
        #expect(root.fractionCompleted == 0.25)
        child.totalUnitCount = -1
        #expect(root.fractionCompleted == 0)
    }

    @Test func childAddedAlreadyFinishedCreditsAtOnce() {
        let root = ObservableProgress(totalUnitCount: 4)
        let done = ObservableProgress(totalUnitCount: 1)
        done.completedUnitCount = 1
        root.addChild(done, withPendingUnitCount: 2)
        #expect(root.completedUnitCount == 2)
        #expect(root.fractionCompleted == 0.5)
    }

    @Test func childAddedHalfDoneCountsAtOnce() {
        let root = ObservableProgress(totalUnitCount: 4)
        let half = ObservableProgress(totalUnitCount: 10)
        half.completedUnitCount = 5
        root.addChild(half, withPendingUnitCount: 2)
        #expect(root.fractionCompleted == 0.25)
    }

    @Test func grandchildrenReachTheRoot() {
        let root = ObservableProgress(totalUnitCount: 1)
        let middle = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1)
        let leaf = ObservableProgress(totalUnitCount: 4, parent: middle, pendingUnitCount: 1)
        leaf.completedUnitCount = 1
        #expect(middle.fractionCompleted == 0.125)
        #expect(root.fractionCompleted == 0.125)
        leaf.completedUnitCount = 4
        #expect(middle.completedUnitCount == 1)
        #expect(root.fractionCompleted == 0.5)
        middle.completedUnitCount = 2
        #expect(root.completedUnitCount == 1)
        #expect(root.isFinished)
    }

    @Test func manyUpdatesDoNotDriftTheSum() {
        // Contributions are fixed-point integers: after any number of updates, a child's last
        // contribution is exactly what the parent holds.
        let root = ObservableProgress(totalUnitCount: 3)
        let children = (0..<3).map { _ in ObservableProgress(totalUnitCount: 3, parent: root, pendingUnitCount: 1) }
        for round in 0..<10_000 {
            for child in children { child.completedUnitCount = Int64(round % 3) }
        }
        for child in children { child.completedUnitCount = 0 }
        #expect(root.fractionCompleted == 0)
    }

    @Test func completeAddsUnits() {
        let progress = ObservableProgress(totalUnitCount: 10)
        progress.complete()
        progress.complete(count: 4)
        #expect(progress.completedUnitCount == 5)
        #expect(progress.fractionCompleted == 0.5)
    }

    @Test func aTreeNobodyHoldsIsFreedEvenUnfinished() {
        weak var weakRoot: ObservableProgress?
        weak var weakLeaf: ObservableProgress?
        do {
            let root = ObservableProgress(totalUnitCount: 2)
            let leaf = ObservableProgress(totalUnitCount: 10, parent: root, pendingUnitCount: 1)
            leaf.completedUnitCount = 3
            weakRoot = root
            weakLeaf = leaf
        }
        #expect(weakRoot == nil)
        #expect(weakLeaf == nil)
    }

    @Test func aChildKeepsItsParentAlive() {
        weak var weakRoot: ObservableProgress?
        weak var weakLeaf: ObservableProgress?
        do {
            let leaf: ObservableProgress
            do {
                let root = ObservableProgress(totalUnitCount: 2)
                leaf = ObservableProgress(totalUnitCount: 10, parent: root, pendingUnitCount: 1)
                weakRoot = root
                weakLeaf = leaf
            }
            #expect(weakRoot != nil)
            leaf.completedUnitCount = 10
            #expect(weakRoot?.completedUnitCount == 1)
        }
        #expect(weakLeaf == nil)
        #expect(weakRoot == nil)
    }

    @Test func misuseTrapsWithAMessage() async {
        let adoption = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let root = ObservableProgress(totalUnitCount: 1)
            let child = ObservableProgress(totalUnitCount: 1, parent: root, pendingUnitCount: 1)
            ObservableProgress(totalUnitCount: 1).addChild(child, withPendingUnitCount: 1)
        }
        let adoptionMessage = String(decoding: adoption?.standardErrorContent ?? [], as: UTF8.self)
        #expect(adoptionMessage.contains("already has a parent"))
        let cycle = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let root = ObservableProgress(totalUnitCount: 1)
            let child = ObservableProgress(totalUnitCount: 1, parent: root, pendingUnitCount: 1)
            child.addChild(root, withPendingUnitCount: 1)
        }
        let cycleMessage = String(decoding: cycle?.standardErrorContent ?? [], as: UTF8.self)
        #expect(cycleMessage.contains("cannot have cycles"))
        let negative = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ObservableProgress(totalUnitCount: 1).addChild(ObservableProgress(totalUnitCount: 1), withPendingUnitCount: -1)
        }
        let negativeMessage = String(decoding: negative?.standardErrorContent ?? [], as: UTF8.self)
        #expect(negativeMessage.contains("must not be negative (got -1)"))
    }
}
