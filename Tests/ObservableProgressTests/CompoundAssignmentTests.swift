import KeyValueObserving
import Testing
import TestSupport
@testable import ObservableProgress

@Suite("Compound assignment of the unit counts")
struct CompoundAssignmentTests {
    @Test(.tags(.stress)) func concurrentCompoundIncrementsAreExact() {
        let progress = ObservableProgress(totalUnitCount: 800_000)
        TestThread.run(8) { _ in
            for _ in 0..<100_000 { progress.completedUnitCount += 1 }
        }
        #expect(progress.completedUnitCount == 800_000)
        #expect(progress.isFinished)
    }

    @Test(.tags(.stress)) func concurrentAdditionsAndSubtractionsOfBothCountsAreExact() {
        let progress = ObservableProgress(totalUnitCount: 1_000_000)
        TestThread.run(8) { index in
            for _ in 0..<20_000 {
                if index < 4 {
                    progress.completedUnitCount += 3
                    progress.totalUnitCount -= 1
                } else {
                    progress.completedUnitCount -= 1
                    progress.totalUnitCount += 2
                }
            }
        }
        #expect(progress.completedUnitCount == 4 * 20_000 * 3 - 4 * 20_000)
        #expect(progress.totalUnitCount == 1_000_000 - 4 * 20_000 + 4 * 20_000 * 2)
    }

    @Test func everyConcurrentIncrementIsObservedWithItsOwnOldAndNewValues() {
        // Each `+= 1` is one locked update: its notification carries the count just before that
        // update and just after it (not the value the thread read before its addition), so the
        // observer sees every value from 1 to the total exactly once.
        let progress = ObservableProgress(totalUnitCount: 40_000)
        let changes = Locked<[(old: Int64, new: Int64)]>([])
        let token = progress.observe(\.completedUnitCount, options: [.old, .new]) { _, change in
            changes.append((change.oldValue!, change.newValue!))
        }
        TestThread.run(4) { _ in
            for _ in 0..<10_000 { progress.completedUnitCount += 1 }
        }
        token.invalidate()
        let seen = changes.current
        #expect(seen.count == 40_000)
        #expect(seen.allSatisfy { $0.new == $0.old + 1 })
        // Forty thousand values, consecutive, from 1: each value exactly once.
        let values = seen.map(\.new).sorted()
        #expect(values.first == 1)
        #expect(zip(values, values.dropFirst()).allSatisfy { $1 == $0 + 1 })
    }

    @Test(.timeLimit(.minutes(1))) func swappingTheCountsHoldsNoLockAcrossTheAccess() {
        // Both accesses are open at once: a lock held across the first would deadlock the second.
        let progress = ObservableProgress(totalUnitCount: 10)
        progress.completedUnitCount = 3
        swap(&progress.completedUnitCount, &progress.totalUnitCount)
        #expect(progress.completedUnitCount == 10)
        #expect(progress.totalUnitCount == 3)
        #expect(progress.isFinished)
        // Exact at the extremes too, where the difference of the two values overflows.
        progress.completedUnitCount = -5
        progress.totalUnitCount = .max
        swap(&progress.completedUnitCount, &progress.totalUnitCount)
        #expect(progress.completedUnitCount == .max)
        #expect(progress.totalUnitCount == -5)
        // And between two nodes of one tree: one lock at a time, never two.
        let parent = ObservableProgress(totalUnitCount: 4)
        let child = ObservableProgress(totalUnitCount: 8, parent: parent, pendingUnitCount: 2)
        child.completedUnitCount = 2
        swap(&parent.totalUnitCount, &child.totalUnitCount)
        #expect(parent.totalUnitCount == 8)
        #expect(child.totalUnitCount == 4)
        #expect(parent.fractionCompleted == 0.5 * 2 / 8)
    }

    @Test func aMutationInPlaceIsAppliedAsTheDifferenceItMadeToTheValueItRead() {
        // Another change lands between the read and the write-back (here made inside the access,
        // as a concurrent thread would): the doubling adds what it added to the value it read (10),
        // and the other change is kept.
        let progress = ObservableProgress(totalUnitCount: 100)
        progress.completedUnitCount = 10
        func doubleWhileAnotherAdds(_ value: inout Int64) {
            progress.complete(count: 5)
            value *= 2
        }
        doubleWhileAnotherAdds(&progress.completedUnitCount)
        #expect(progress.completedUnitCount == 25)
        // A plain assignment inside an in-place access is a difference too (−22 from 25 here)…
        func assignWhileAnotherAdds(_ value: inout Int64) {
            progress.complete(count: 1)
            value = 3
        }
        assignWhileAnotherAdds(&progress.completedUnitCount)
        #expect(progress.completedUnitCount == 4)
        // …while `=` itself sets the value, whatever it was.
        progress.completedUnitCount = 7
        #expect(progress.completedUnitCount == 7)
    }

    @Test func aChangeWhoseDifferenceAloneOverflowsIsAppliedWhenTheResultFits() {
        // From -1 to .max is a difference of 2^63, which no Int64 holds; applied to -2 (another
        // change landed in between) it gives .max - 1, which fits.
        let progress = ObservableProgress(totalUnitCount: -1)
        progress.completedUnitCount = -1
        func setToMaximumWhileAnotherSubtracts(_ value: inout Int64) {
            progress.completedUnitCount = -2
            value = .max
        }
        setToMaximumWhileAnotherSubtracts(&progress.completedUnitCount)
        #expect(progress.completedUnitCount == .max - 1)
    }

    @Test func aChangeThatOverflowsWhenAppliedTrapsWithAMessage() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let progress = ObservableProgress(totalUnitCount: 10)
            func addWhileAnotherSetsTheMaximum(_ value: inout Int64) {
                progress.completedUnitCount = .max
                value += 1
            }
            addWhileAnotherSetsTheMaximum(&progress.completedUnitCount)
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("ObservableProgress.completedUnitCount: an in-place change from 0 to 1"), "\(message)")
        #expect(message.contains("overflows"), "\(message)")
    }

    @Test func aMutationThatThrowsKeepsWhatItChanged() {
        struct Failure: Error {}
        func addThenThrow(_ value: inout Int64) throws {
            value += 2
            throw Failure()
        }
        let progress = ObservableProgress(totalUnitCount: 10)
        #expect(throws: Failure.self) { try addThenThrow(&progress.completedUnitCount) }
        #expect(progress.completedUnitCount == 2)
    }

    @Test func aHandlerMayIncrementTheCountItObserves() {
        let progress = ObservableProgress(totalUnitCount: 10)
        let token = progress.observe(\.completedUnitCount, options: [.new]) { progress, change in
            if change.newValue! < 5 { progress.completedUnitCount += 1 }
        }
        progress.completedUnitCount += 1
        #expect(progress.completedUnitCount == 5)
        token.invalidate()
    }
}
