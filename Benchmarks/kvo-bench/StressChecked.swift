import KeyValueObserving

/// A dependent key (`sortName`, from two observed names), a chain through a replaceable child
/// (`item?.title`) and a tracked expression over both, on an object one thread owns, so that what its
/// observers must see is known exactly. String values: see `StressItem`.
///
/// `@unchecked Sendable`: used by one thread at a time.
final class StressContact: KeyValueObservable, @unchecked Sendable {
    @Observed var givenName = ""
    @Observed var familyName = ""
    @Observed var item: StressItem? = StressItem()
    var sortName: String { "\(familyName), \(givenName)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\StressContact.sortName: [\StressContact.givenName, \StressContact.familyName]]
    }
}

/// The tracked expression of `StressContact`: reads the given name, the child and its title.
@Sendable func contactSummary(_ contact: StressContact) -> String {
    "\(contact.givenName)/\(contact.item?.title ?? "-")"
}

extension Stress {
    /// Sets the names, the child and its title of a fresh contact one at a time and in batches, with
    /// an observer of the dependent key, one of the chain and a tracked observation, then checks
    /// each saw exactly the changes it should (one per set of an input, one per batch) and ended on
    /// the value now.
    static func checkChanges(_ tally: Tally) {
        let contact = StressContact()
        let sortNames = Recorder<String>()
        let titles = Recorder<String?>()
        let summaries = Recorder<String>()
        let tokens = [
            contact.observe(\.sortName, options: [.new]) { _, change in sortNames.record(change.newValue) },
            contact.observe(\.item?.title, options: [.new]) { _, change in titles.record(change.newValue ?? nil) },
            contact.observeTracking(options: [.new], contactSummary) { _, change in summaries.record(change.newValue) },
        ]
        tally.add(tally.registrations, tokens.count)
        var expected = (sortNames: 0, titles: 0, summaries: 0)
        for i in 0..<100 {
            switch i % 5 {
            case 0:
                contact.givenName = "g\(i)"
                expected.sortNames += 1
                expected.summaries += 1
            case 1:
                contact.familyName = "f\(i)"
                expected.sortNames += 1
            case 2:
                if let item = contact.item {
                    item.title = "t\(i)"
                    expected.titles += 1
                    expected.summaries += 1
                }
            case 3:
                contact.item = i % 10 == 3 ? nil : StressItem()
                expected.titles += 1
                expected.summaries += 1
            default:
                // One notification per observer for the whole batch.
                contact.coalescingChanges {
                    contact.givenName = "x"
                    contact.familyName = "f\(i)"
                    contact.givenName = "g\(i)"
                    contact.item = StressItem()
                }
                expected.sortNames += 1
                expected.titles += 1
                expected.summaries += 1
            }
        }
        tally.add(tally.sets, 100)
        for token in tokens { token.invalidate() }
        let checks: [(String, Int, Int, Bool)] = [
            ("the dependent key's observer", sortNames.count, expected.sortNames, sortNames.last == contact.sortName),
            ("the chain's observer", titles.count, expected.titles, titles.last == .some(contact.item?.title)),
            ("the tracked observation", summaries.count, expected.summaries, summaries.last == contactSummary(contact)),
        ]
        for (name, count, expected, endsOnTheValue) in checks {
            if count != expected { tally.fail("\(name) saw \(count) changes of \(expected)") }
            if !endsOnTheValue { tally.fail("\(name) did not end on the value now") }
        }
        tally.add(tally.checkedRounds)
    }
}
