import KeyValueObserving
import Testing

@Suite("Options and change contents")
struct OptionsTests {
    @Test func initialDeliversCurrentValueBeforeObserveReturns() {
        let player = AudioPlayer()
        let values = Locked<[Double?]>([])
        let token = player.observe(\.volume, options: [.initial, .new]) { _, change in
            values.append(change.newValue)
        }
        #expect(values.current == [0.5])
        player.volume = 0.7
        #expect(values.current == [0.5, 0.7])
        token.invalidate()
    }

    @Test func withoutInitialNothingArrivesUntilAChange() {
        let player = AudioPlayer()
        let calls = Counter(0)
        let token = player.observe(\.volume, options: [.new]) { _, _ in calls.increment() }
        #expect(calls.current == 0)
        player.volume = 0.6
        #expect(calls.current == 1)
        token.invalidate()
    }

    @Test func everyAssignmentNotifiesEqualValuesIncluded() {
        let player = AudioPlayer()
        let values = Locked<[Double?]>([])
        let token = player.observe(\.volume, options: [.new]) { _, change in values.append(change.newValue) }
        player.volume = 0.7
        player.volume = 0.7
        player.volume = 0.5
        #expect(values.current == [0.7, 0.7, 0.5])
        token.invalidate()
    }

    @Test func newAndOldFillTheirValues() {
        let player = AudioPlayer()
        let changes = Locked<[KeyValueObservedChange<Double>]>([])
        let token = player.observe(\.volume, options: [.old, .new]) { _, change in changes.append(change) }
        player.volume = 0.7
        player.volume = 0.9
        #expect(
            changes.current == [
                KeyValueObservedChange(kind: .setting, newValue: 0.7, oldValue: 0.5),
                KeyValueObservedChange(kind: .setting, newValue: 0.9, oldValue: 0.7),
            ])
        token.invalidate()
    }

    @Test func onlyOldFillsOnlyOldValue() {
        let player = AudioPlayer()
        let changes = Locked<[KeyValueObservedChange<Double>]>([])
        let token = player.observe(\.volume, options: [.old]) { _, change in changes.append(change) }
        player.volume = 0.7
        #expect(changes.current == [KeyValueObservedChange(oldValue: 0.5)])
        token.invalidate()
    }

    @Test func withNoOptionsTheHandlerRunsWithBothValuesNil() {
        let player = AudioPlayer()
        let changes = Locked<[KeyValueObservedChange<Double>]>([])
        let token = player.observe(\.volume) { _, change in changes.append(change) }
        player.volume = 0.7
        #expect(changes.current.count == 1)
        #expect(changes.current.first?.newValue == nil)
        #expect(changes.current.first?.oldValue == nil)
        #expect(changes.current.first?.kind == .setting)
        #expect(changes.current.first?.isPrior == false)
        #expect(changes.current.first?.indexes == nil)
        token.invalidate()
    }

    @Test func priorNotifiesBeforeTheChangeWithTheOldValueStillStored() {
        let player = AudioPlayer()
        let log = Locked<[String]>([])
        let token = player.observe(\.volume, options: [.prior, .old, .new]) { player, change in
            log.append(
                "prior=\(change.isPrior) old=\(change.oldValue.map { "\($0)" } ?? "nil") new=\(change.newValue.map { "\($0)" } ?? "nil") stored=\(player.volume)"
            )
        }
        player.volume = 0.9
        #expect(
            log.current == [
                "prior=true old=0.5 new=nil stored=0.5",
                "prior=false old=0.5 new=0.9 stored=0.9",
            ])
        token.invalidate()
    }

    @Test func priorWithoutOldCarriesNoValues() {
        let player = AudioPlayer()
        let changes = Locked<[KeyValueObservedChange<Double>]>([])
        let token = player.observe(\.volume, options: [.prior]) { _, change in changes.append(change) }
        player.volume = 0.9
        #expect(changes.current == [KeyValueObservedChange(isPrior: true), KeyValueObservedChange()])
        token.invalidate()
    }

    @Test func handlerReadsTheNewStateNotAStaleOne() {
        // @Published fires in willSet, so a derived property read in its sink is stale. Here the
        // notification follows the store.
        let person = Person()
        let seen = Locked<[String]>([])
        let token = person.observe(\.firstName, options: [.new]) { person, _ in seen.append(person.fullName) }
        person.firstName = "Grace"
        #expect(seen.current == ["Grace Lovelace"])
        token.invalidate()
    }

    @Test func observersWithDifferentOptionsOnOneKeyEachGetTheirOwn() {
        let player = AudioPlayer()
        let plain = Locked<[KeyValueObservedChange<Double>]>([])
        let rich = Locked<[KeyValueObservedChange<Double>]>([])
        let t1 = player.observe(\.volume, options: [.new]) { _, change in plain.append(change) }
        let t2 = player.observe(\.volume, options: [.old, .prior]) { _, change in rich.append(change) }
        player.volume = 0.1
        #expect(plain.current == [KeyValueObservedChange(newValue: 0.1)])
        #expect(rich.current == [KeyValueObservedChange(oldValue: 0.5, isPrior: true), KeyValueObservedChange(oldValue: 0.5)])
        t1.invalidate()
        t2.invalidate()
    }
}
