import KeyValueObserving
import Testing

final class ConstantChildState: KeyValueObservable, @unchecked Sendable {
    let settings = UserSettings()
    var greeting: String { "Hi \(settings.username)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\ConstantChildState.greeting: [\ConstantChildState.settings.username]]
    }
}

final class OptionalChildState: KeyValueObservable, @unchecked Sendable {
    @Observed var settings: UserSettings? = nil
    var greeting: String { "Hi \(settings?.username ?? "guest")" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\OptionalChildState.greeting: [\OptionalChildState.settings?.username]]
    }
}

final class Profile: KeyValueObservable, @unchecked Sendable {
    @Observed var username = "ada"
    @Observed var email = "ada@example.com"
}

final class Account: KeyValueObservable, @unchecked Sendable {
    @Observed var profile = Profile()
    var card: String { "\(profile.username) <\(profile.email)>" }
    var badge: String { profile.username }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [
            \Account.card: [\Account.profile.username, \Account.profile.email],
            \Account.badge: [\Account.profile, \Account.profile.username],
        ]
    }
}

class NameBase: KeyValueObservable {
    @Observed var given = "Ada"
    @Observed var middle = "King"
    var full: String { "\(given) \(middle)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\NameBase.full: [\NameBase.given]]
    }
}

final class NameSub: NameBase {
    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\NameSub.full: [\NameSub.middle]]
    }
}

final class Doubler: KeyValueObservable {
    @Observed var count = 1
    var doubled: Int { count * 2 }
    var label: String { "\(doubled)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Doubler.label: [\Doubler.doubled]]
    }
}

/// Transitive through keys that only manual notification changes: without expanding `middle`,
/// nothing would connect `top` to `raw`.
final class Layers: KeyValueObservable {
    private var storage = 1
    var raw: Int { storage }
    var middle: Int { raw * 2 }
    var top: Int { middle + 1 }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Layers.middle: [\Layers.raw], \Layers.top: [\Layers.middle]]
    }

    override class func automaticallyNotifiesObservers(for key: AnyKeyPath) -> Bool {
        key == \Layers.raw ? false : super.automaticallyNotifiesObservers(for: key)
    }

    func setRaw(_ value: Int) {
        willChangeValue(for: \.raw)
        storage = value
        didChangeValue(for: \.raw)
    }
}

final class Wallet: KeyValueObservable {
    let settings = Settings()
    var label: String { "balance \(settings.balance)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Wallet.label: [\Wallet.settings.balance]]
    }
}

/// Reads `settings.username` but declares only `settings`: a new username leaves it stale.
final class ViaChildState: KeyValueObservable, @unchecked Sendable {
    @Observed var settings = UserSettings()
    var viaChild: String { settings.username }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\ViaChildState.viaChild: [\ViaChildState.settings]]
    }

    override class var keyPathNames: [AnyKeyPath: String] {
        [\ViaChildState.viaChild: "viaChild"]
    }
}

/// The same key declared with the path it reads: nothing to report.
final class ViaChildDeclaredState: KeyValueObservable, @unchecked Sendable {
    @Observed var settings = UserSettings()
    var viaChild: String { settings.username }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\ViaChildDeclaredState.viaChild: [\ViaChildDeclaredState.settings.username]]
    }
}

/// Reads through a constant child, then through its `@Observed` child, declaring nothing there.
final class ViaGrandchildState: KeyValueObservable, @unchecked Sendable {
    let account = Account()
    @Observed var title = "Dr"
    var line: String { "\(title) \(account.profile.username)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\ViaGrandchildState.line: [\ViaGrandchildState.title]]
    }
}

final class Member: KeyValueObservable, @unchecked Sendable {
    @Observed var name: String

    init(name: String) {
        self.name = name
    }
}

/// Reads each element's `name`, which no key path of the table can name.
final class Crew: KeyValueObservable, @unchecked Sendable {
    @Observed var people = [Member(name: "Ada"), Member(name: "Grace")]
    var names: [String] { people.map(\.name) }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Crew.names: [\Crew.people]]
    }

    override class var keyPathNames: [AnyKeyPath: String] {
        [\Crew.names: "names"]
    }
}

/// The same, with the elements' reads declared deliberate.
final class QuietCrew: KeyValueObservable, @unchecked Sendable {
    @Observed var people = [Member(name: "Ada")]
    var names: [String] { people.map(\.name) }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\QuietCrew.names: [\QuietCrew.people]]
    }

    override class var keyPathsNotAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\QuietCrew.names: [\Member.name]]
    }
}

@Suite("Dependent keys reaching into other objects")
struct DependencyPathTests {
    private func diagnostics(_ body: () -> Void) -> [KeyValueObservingDiagnostic] {
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }, operation: body)
        return collected.current
    }

    @Test func aReadThroughAChildThatTheTableDoesNotCoverIsReportedWithThePathToDeclare() {
        let state = ViaChildState()
        let values = Locked<[String?]>([])
        var token: KeyValueObservation?
        let line: UInt = #line + 2
        let reported = diagnostics {
            token = state.observe(\.viaChild, options: [.new]) { _, change in values.append(change.newValue) }
        }
        #expect(reported.map(\.kind) == [.incompleteDependencies])
        #expect(reported.first?.line == line)
        #expect(reported.first?.readNames == ["settings.username"])
        #expect(reported.first?.reads == [\ViaChildState.settings.username])
        let message = reported.first?.message ?? ""
        #expect(message.contains("reads `settings.username`, which its declared inputs do not cover"), "\(message)")
        #expect(
            message.contains("[\\ViaChildState.viaChild: [\\ViaChildState.settings, \\ViaChildState.settings.username]]"),
            "\(message)")
        // What the diagnostic says: the child's change does not reach the key's observers.
        state.settings.username = "ben"
        #expect(values.current == [])
        token?.invalidate()
        // Declared with that path, the key is not reported, and is notified.
        let declared = ViaChildDeclaredState()
        let declaredValues = Locked<[String?]>([])
        let declaredReported = diagnostics {
            token = declared.observe(\.viaChild, options: [.new]) { _, change in declaredValues.append(change.newValue) }
        }
        #expect(declaredReported.isEmpty)
        declared.settings.username = "ben"
        #expect(declaredValues.current == ["ben"])
        token?.invalidate()
    }

    @Test func aReadThroughAConstantChildsChildIsReportedWithTheWholePath() {
        let state = ViaGrandchildState()
        var token: KeyValueObservation?
        let reported = diagnostics { token = state.observe(\.line) { _, _ in } }
        #expect(reported.map(\.kind) == [.incompleteDependencies])
        #expect(reported.first?.readNames == ["account.profile.username"])
        let message = reported.first?.message ?? ""
        #expect(message.contains("\\ViaGrandchildState.account.profile.username"), "\(message)")
        token?.invalidate()
    }

    @Test func readsThroughTheElementsOfAnArrayAreReportedPointingToTrackedObservationUnlessDeliberate() {
        let crew = Crew()
        let values = Locked<[[String]?]>([])
        var token: KeyValueObservation?
        let reported = diagnostics {
            token = crew.observe(\.names, options: [.new]) { _, change in values.append(change.newValue) }
        }
        #expect(reported.map(\.kind) == [.incompleteDependencies])
        #expect(reported.first?.readNames == ["name"])
        #expect(reported.first?.reads == [\Member.name])
        let message = reported.first?.message ?? ""
        #expect(message.contains("reads `name` through the elements of `people`"), "\(message)")
        #expect(message.contains("observeTracking { $0.names }"), "\(message)")
        #expect(message.contains("[\\Crew.names: [\\Member.name]]"), "\(message)")
        // What the diagnostic says: an element renamed does not reach the key's observers; the
        // array replaced does.
        crew.people[0].name = "Ada Lovelace"
        #expect(values.current == [])
        crew.people = [Member(name: "Edsger")]
        #expect(values.current == [["Edsger"]])
        token?.invalidate()
        // Declared deliberate (the element's property in keyPathsNotAffecting), they are not reported.
        let quiet = QuietCrew()
        let quietReported = diagnostics { token = quiet.observe(\.names) { _, _ in } }
        #expect(quietReported.isEmpty)
        token?.invalidate()
    }

    @Test func aConstantChildIsFollowed() {
        let state = ConstantChildState()
        let greetings = Locked<[String?]>([])
        let token = state.observe(\.greeting, options: [.new]) { _, change in greetings.append(change.newValue) }
        state.settings.username = "grace"
        #expect(greetings.current == ["Hi grace"])
        token.invalidate()
        #expect(state.settings.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    @Test func aChildThatWasNilAtRegistrationIsFollowedOnceSet() {
        let state = OptionalChildState()
        let greetings = Locked<[String?]>([])
        let token = state.observe(\.greeting, options: [.new]) { _, change in greetings.append(change.newValue) }
        let settings = UserSettings()
        state.settings = settings
        settings.username = "linus"
        state.settings = nil
        settings.username = "ignored"
        #expect(greetings.current == ["Hi ada", "Hi linus", "Hi guest"])
        token.invalidate()
    }

    @Test func inputsSharingAChildAnnounceEachChangeOnce() {
        let account = Account()
        let cards = Counter(0)
        let badges = Counter(0)
        let card = account.observe(\.card) { _, _ in cards.increment() }
        let badge = account.observe(\.badge) { _, _ in badges.increment() }
        account.profile = Profile()
        #expect(cards.current == 1)
        #expect(badges.current == 1)
        account.profile.username = "grace"
        account.profile.email = "grace@example.com"
        #expect(cards.current == 3)
        #expect(badges.current == 2)
        card.invalidate()
        badge.invalidate()
    }

    @Test func theReplacedChildIsNeitherReportedNorRetained() {
        let state = AppState()
        let calls = Counter(0)
        let token = state.observe(\.greeting) { _, _ in calls.increment() }
        weak var weakOld: UserSettings?
        do {
            let old = state.settings
            weakOld = old
            state.settings = UserSettings()
            old.username = "nobody"
        }
        #expect(calls.current == 1)
        #expect(weakOld == nil)
        token.invalidate()
    }

    @Test func aSubclassRedeclaringAKeyAddsToTheSuperclasssInputs() {
        let name = NameSub()
        let values = Locked<[String?]>([])
        let token = name.observe(\.full, options: [.new]) { _, change in values.append(change.newValue) }
        name.given = "Grace"
        name.middle = "Brewster"
        #expect(values.current == ["Grace King", "Grace Brewster"])
        token.invalidate()
    }

    @Test func manualNotificationOfAComputedInputReachesItsDependents() {
        let doubler = Doubler()
        let calls = Counter(0)
        let token = doubler.observe(\.label) { _, _ in calls.increment() }
        doubler.willChangeValue(for: \.doubled)
        doubler.didChangeValue(for: \.doubled)
        doubler.count = 2
        #expect(calls.current == 2)
        token.invalidate()
    }

    @Test func dependenciesAreExpandedTransitivelyThroughManuallyNotifiedKeys() {
        let layers = Layers()
        let values = Locked<[Int?]>([])
        let token = layers.observe(\.top, options: [.old, .new]) { _, change in values.append(change.newValue) }
        layers.setRaw(5)
        #expect(values.current == [11])
        token.invalidate()
    }

    @Test func aPathDoesNotTurnOnAutomaticNotificationTheClassTurnedOff() {
        let wallet = Wallet()
        let labels = Locked<[String?]>([])
        let balances = Counter(0)
        let label = wallet.observe(\.label, options: [.new]) { _, change in labels.append(change.newValue) }
        let balance = wallet.settings.observe(\.balance) { _, _ in balances.increment() }
        wallet.settings.balance = 5  // automatic notification is off for `balance`
        wallet.settings.deposit(2)
        #expect(balances.current == 1)
        #expect(labels.current == ["balance 7"])
        label.invalidate()
        balance.invalidate()
    }

    @Test func introspectionCountsEachObserverOnceUnderTheKeyItObserved() {
        let contact = Contact()
        let sortName = contact.observe(\.sortName) { _, _ in }
        let given = contact.observe(\.givenName) { _, _ in }
        #expect(contact.observationInfo.observerCountsByKeyPath == [\Contact.sortName: 1, \Contact.givenName: 1])
        sortName.invalidate()
        given.invalidate()
        let state = AppState()
        let greeting = state.observe(\.greeting) { _, _ in }
        #expect(state.observationInfo.observerCountsByKeyPath == [\AppState.greeting: 1])
        greeting.invalidate()
    }

    /// Owners register and change their objects (registration reads them); others invalidate.
    @Test func childrenReplacedWhileOtherThreadsInvalidate() {
        let states = (0..<4).map { _ in UncheckedBox(AppState()) }
        let pool = Locked<[KeyValueObservation]>([])
        let wrong = Locked<[String]>([])
        let deliveries = Counter(0)
        let ownersDone = Counter(0)
        TestThread.run(8) { me in
            if me < 4 {
                let state = states[me].value
                for step in 0..<1_500 {
                    switch step % 3 {
                    case 0:
                        pool.append(
                            state.observe(\.greeting, options: [.old, .new]) { state, change in
                                deliveries.increment()
                                if change.newValue != state.greeting { wrong.append(change.newValue ?? "nil") }
                            })
                    case 1:
                        state.settings = UserSettings()
                    default:
                        state.settings.username = "u\(step)"
                    }
                }
                ownersDone.increment()
                return
            }
            while ownersDone.current < 4 || !pool.current.isEmpty {
                pool.withLock { $0.isEmpty ? nil : $0.removeFirst() }?.invalidate()
            }
        }
        #expect(wrong.current == [])
        #expect(deliveries.current > 0)
        #expect(
            states.allSatisfy {
                $0.value.observationInfo.observerCountsByKeyPath.isEmpty
                    && $0.value.settings.observationInfo.observerCountsByKeyPath.isEmpty
            })
    }
}
