import KeyValueObserving
import ObservableProgress
import TestSupport
import Testing

/// A job whose dependent key reads a progress: the input is notified after the fact (the progress
/// notifies after unlocking), so old values come from what the observer computed last.
final class PercentJob: KeyValueObservable, @unchecked Sendable {
    @Observed var progress = ObservableProgress(totalUnitCount: 4)
    var percent: Int { Int(progress.fractionCompleted * 100) }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\PercentJob.percent: [\PercentJob.progress.fractionCompleted]]
    }
}

@Suite("Dependent keys reading a progress")
struct DependentProgressKeyTests {
    @Test func priorAndOldCarryTheValueBeforeTheUpdate() {
        let job = PercentJob()
        let changes = Locked<[String]>([])
        let token = job.observe(\.percent, options: [.prior, .old, .new]) { _, change in
            changes.append(
                "\(change.isPrior ? "prior " : "")\(change.oldValue.map(String.init) ?? "-")→\(change.newValue.map(String.init) ?? "-")")
        }
        job.progress.completedUnitCount = 2
        job.progress.completedUnitCount = 3
        #expect(changes.current == ["prior 0→-", "0→50", "prior 50→-", "50→75"])
        token.invalidate()
    }

    @Test func removingDuplicatesKeepsEveryRealChange() {
        let job = PercentJob()
        let values = Locked<[Int?]>([])
        let token = job.observe(\.percent, options: [.new], removingDuplicates: true) { _, change in values.append(change.newValue) }
        job.progress.completedUnitCount = 1
        job.progress.completedUnitCount = 1
        job.progress.completedUnitCount = 4
        #expect(values.current == [25, 100])
        token.invalidate()
    }

    @Test func replacingTheProgressStillReadsTheOldValueBeforeTheStore() {
        let job = PercentJob()
        job.progress.completedUnitCount = 1
        let changes = Locked<[String]>([])
        let token = job.observe(\.percent, options: [.old, .new]) { _, change in
            changes.append("\(change.oldValue!)→\(change.newValue!)")
        }
        let replacement = ObservableProgress(totalUnitCount: 2)
        replacement.completedUnitCount = 1
        job.progress = replacement
        replacement.completedUnitCount = 2
        #expect(changes.current == ["25→50", "50→100"])
        token.invalidate()
    }

    @Test func progressKeysAreNamedForObserversOfEveryKey() {
        let progress = ObservableProgress(totalUnitCount: 2)
        let names = Locked<[String]>([])
        let token = progress.observeAnyKey { _, change in
            if !change.isPrior { names.append(change.keyName) }
        }
        progress.complete()
        #expect(names.current == ["completedUnitCount", "fractionCompleted"])
        token.invalidate()
    }
}
