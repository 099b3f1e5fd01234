import KeyValueObserving
import Testing

/// State the wrapper cannot see, notified by hand, and a balance that notifies only real changes.
final class Settings: KeyValueObservable, @unchecked Sendable {
    // `@unchecked Sendable` in tests only: each test uses an instance from one thread.
    private var storage: [String: String] = ["theme": "light"]
    var theme: String { storage["theme"] ?? "" }
    var language: String { storage["language"] ?? "en" }
    @Observed var balance = 0
    var banner: String { "\(theme) / \(language)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Settings.banner: [\Settings.theme, \Settings.language]]
    }

    override class func automaticallyNotifiesObservers(for key: AnyKeyPath) -> Bool {
        [\Settings.balance, \Settings.theme, \Settings.language].contains(key)
            ? false
            : super.automaticallyNotifiesObservers(for: key)
    }

    func setTheme(_ theme: String) {
        willChangeValue(for: \.theme)
        storage["theme"] = theme
        didChangeValue(for: \.theme)
    }

    func setBoth(theme: String, language: String) {
        willChangeValue(for: \.theme)
        willChangeValue(for: \.language)
        storage["language"] = language
        storage["theme"] = theme
        didChangeValue(for: \.language)
        didChangeValue(for: \.theme)
    }

    func deposit(_ amount: Int) {
        guard amount != 0 else {
            balance += amount
            return
        }
        willChangeValue(for: \.balance)
        balance += amount
        didChangeValue(for: \.balance)
    }
}

@Suite("Manual notification")
struct ManualNotificationTests {
    private func diagnostics(_ body: () -> Void) -> [KeyValueObservingDiagnostic] {
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }, operation: body)
        return collected.current
    }

    @Test func willAndDidChangeNotifyObserversOfStateTheWrapperCannotSee() {
        let settings = Settings()
        let log = Locked<[String]>([])
        var token: KeyValueObservation?
        let reported = diagnostics {
            token = settings.observe(\.theme, options: [.prior, .old, .new]) { settings, change in
                log.append(
                    "\(change.isPrior ? "prior" : "after") \(change.oldValue ?? "-")→\(change.newValue ?? "-") now \(settings.theme)")
            }
        }
        // The class declares that it notifies `theme` itself: no diagnostic.
        #expect(reported.isEmpty)
        settings.setTheme("dark")
        #expect(log.current == ["prior light→- now light", "after light→dark now dark"])
        token?.invalidate()
    }

    @Test func nestedPairsNotifyInnermostFirst() {
        let settings = Settings()
        let log = Locked<[String]>([])
        let theme = settings.observe(\.theme, options: [.new]) { _, change in log.append("theme \(change.newValue!)") }
        let language = settings.observe(\.language, options: [.new]) { _, change in log.append("language \(change.newValue!)") }
        settings.setBoth(theme: "dark", language: "fr")
        #expect(log.current == ["language fr", "theme dark"])
        theme.invalidate()
        language.invalidate()
    }

    @Test func aDidChangeWithoutWillChangeIsReportedAndNotifiesNobody() {
        let settings = Settings()
        let calls = Counter(0)
        let token = settings.observe(\.theme) { _, _ in calls.increment() }
        let line: UInt = #line + 1
        let reported = diagnostics { settings.didChangeValue(for: \.theme) }
        #expect(calls.current == 0)
        #expect(reported.map(\.kind) == [.unbalancedChangeNotification])
        #expect(reported.first?.line == line)
        #expect(reported.first?.message.contains("without a matching willChangeValue") == true)
        token.invalidate()
    }

    @Test func aWronglyNestedDidChangeIsReportedAndTheRightOrderStillWorks() {
        let settings = Settings()
        let log = Locked<[String]>([])
        let theme = settings.observe(\.theme) { _, _ in log.append("theme") }
        let language = settings.observe(\.language) { _, _ in log.append("language") }
        let reported = diagnostics {
            settings.willChangeValue(for: \.theme)
            settings.willChangeValue(for: \.language)
            settings.didChangeValue(for: \.theme)  // wrong: `language` is innermost
        }
        #expect(reported.map(\.kind) == [.unbalancedChangeNotification])
        #expect(reported.first?.message.contains("innermost pending") == true)
        #expect(log.current == [])
        settings.didChangeValue(for: \.language)
        settings.didChangeValue(for: \.theme)
        #expect(log.current == ["language", "theme"])
        theme.invalidate()
        language.invalidate()
    }

    @Test func turningAutomaticNotificationOffLetsTheClassNotifyOnlyRealChanges() {
        let settings = Settings()
        let changes = Locked<[String]>([])
        let token = settings.observe(\.balance, options: [.old, .new]) { _, change in
            changes.append("\(change.oldValue!)→\(change.newValue!)")
        }
        settings.balance = 7  // automatic notification is off: silent
        settings.deposit(0)  // no real change: silent
        settings.deposit(5)
        #expect(changes.current == ["7→12"])
        token.invalidate()
    }

    @Test func aBatchedSetOfAKeyTheClassKeepsSilentIsNotDeliveredAtTheBatchsEnd() {
        let settings = Settings()
        let changes = Locked<[String]>([])
        let token = settings.observe(\.balance, options: [.old, .new]) { _, change in
            changes.append("\(change.oldValue!)→\(change.newValue!)")
        }
        settings.coalescingChanges {
            settings.balance = 7  // automatic notification is off: silent in a batch too
            settings.deposit(5)  // notified by hand, at once (manual notifications are not batched)
        }
        #expect(changes.current == ["7→12"])
        #expect(settings.balance == 12)
        token.invalidate()
    }

    @Test func manualNotificationOfAnInputNotifiesItsDependents() {
        let settings = Settings()
        let banners = Locked<[String?]>([])
        let token = settings.observe(\.banner, options: [.old, .new]) { _, change in
            banners.append("\(change.oldValue!) ⇒ \(change.newValue!)")
        }
        settings.setTheme("dark")
        settings.setBoth(theme: "blue", language: "de")
        // In `setBoth` both inputs are announced before either changes, so each of the two
        // notifications carries the value from before both changes and the value after both, as in
        // Foundation.
        #expect(banners.current == ["light / en ⇒ dark / en", "dark / en ⇒ blue / de", "dark / en ⇒ blue / de"])
        token.invalidate()
    }

    @Test func aDependentKeyCanBeNotifiedManuallyToo() {
        let settings = Settings()
        let calls = Counter(0)
        let token = settings.observe(\.banner) { _, _ in calls.increment() }
        settings.willChangeValue(for: \.banner)
        settings.didChangeValue(for: \.banner)
        #expect(calls.current == 1)
        token.invalidate()
    }

    @Test func anObservedPropertyCanBeNotifiedManually() {
        let player = AudioPlayer()
        let changes = Locked<[KeyValueObservedChange<Double>]>([])
        let token = player.observe(\.volume, options: [.old, .new]) { _, change in changes.append(change) }
        player.willChangeValue(for: \.volume)
        player.didChangeValue(for: \.volume)
        #expect(changes.current == [KeyValueObservedChange(newValue: 0.5, oldValue: 0.5)])
        token.invalidate()
    }
}
