import KeyValueObserving
import Testing

final class Contact: KeyValueObservable {
    @Observed var givenName = "Ada"
    @Observed var familyName = "Lovelace"
    var sortName: String { "\(familyName), \(givenName)" }
    var displayName: String { "\(givenName) \(familyName)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Contact.sortName: [\Contact.givenName, \Contact.familyName]]
    }
}

/// Transitive: `label` depends on `sortName`'s inputs through `sortName`, and on `title`.
class Employee: KeyValueObservable {
    @Observed var givenName = "Grace"
    @Observed var familyName = "Hopper"
    @Observed var title = "Rear Admiral"
    var fullName: String { "\(givenName) \(familyName)" }
    var label: String { "\(title) \(fullName)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [
            \Employee.fullName: [\Employee.givenName, \Employee.familyName],
            \Employee.label: [\Employee.title, \Employee.fullName],
        ]
    }
}

/// A subclass adds a dependent key of its own without repeating its superclass's table.
final class Manager: Employee {
    @Observed var reports = 0
    var summary: String { "\(fullName) (\(reports))" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Manager.summary: [\Manager.reports, \Employee.fullName]]
    }
}

final class Loop: KeyValueObservable {
    @Observed var seed = 1
    var a: Int { seed }
    var b: Int { seed * 2 }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Loop.a: [\Loop.b, \Loop.seed], \Loop.b: [\Loop.a]]
    }
}

/// A key declared with no inputs: as in KVO, it has no dependencies.
final class Headline: KeyValueObservable {
    @Observed var title = "Draft"
    var emptyDeclared: String { title }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Headline.emptyDeclared: []]
    }

    override class var keyPathNames: [AnyKeyPath: String] {
        [\Headline.emptyDeclared: "emptyDeclared"]
    }
}

@Suite("Dependent keys")
struct DependentKeyTests {
    private func diagnostics(_ body: () -> Void) -> [KeyValueObservingDiagnostic] {
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }, operation: body)
        return collected.current
    }

    @Test func theContactScenario() {
        let contact = Contact()
        let sortNames = Locked<[String?]>([])
        let displayNames = Locked<[String?]>([])
        var tokens: [KeyValueObservation] = []
        let line: UInt = #line + 4
        let reported = diagnostics {
            tokens.append(contact.observe(\.sortName, options: [.initial, .new]) { _, change in sortNames.append(change.newValue) })
            tokens.append(
                contact.observe(\.displayName, options: [.initial, .new]) { _, change in displayNames.append(change.newValue) }
            )
        }
        contact.givenName = "Grace"
        contact.familyName = "Hopper"
        #expect(sortNames.current == ["Lovelace, Ada", "Lovelace, Grace", "Hopper, Grace"])
        #expect(displayNames.current == ["Ada Lovelace"])
        #expect(reported.count == 1)
        let diagnostic = reported.first
        #expect(diagnostic?.kind == .undeclaredDependencies)
        #expect(diagnostic?.keyPath == \Contact.displayName)
        #expect(diagnostic?.line == line)
        #expect(diagnostic?.readNames == ["givenName", "familyName"])
        #expect(diagnostic?.message.contains("reads `givenName`, `familyName` but declares no dependencies") == true)
        #expect(diagnostic?.message.contains("keyPathsAffecting") == true)
        tokens.forEach { $0.invalidate() }
    }

    @Test func oldAndPriorCarryTheValueComputedBeforeTheChange() {
        let contact = Contact()
        let log = Locked<[String]>([])
        let token = contact.observe(\.sortName, options: [.prior, .old, .new]) { contact, change in
            log.append(
                "\(change.isPrior ? "prior" : "after") old=\(change.oldValue ?? "-") new=\(change.newValue ?? "-") given=\(contact.givenName)"
            )
        }
        contact.givenName = "Grace"
        #expect(
            log.current == [
                "prior old=Lovelace, Ada new=- given=Ada",
                "after old=Lovelace, Ada new=Lovelace, Grace given=Grace",
            ])
        token.invalidate()
    }

    @Test func eachChangeOfAnInputNotifiesOnce() {
        let contact = Contact()
        let calls = Counter(0)
        let token = contact.observe(\.sortName) { _, _ in calls.increment() }
        contact.givenName = "A"
        contact.givenName = "A"
        contact.familyName = "B"
        #expect(calls.current == 3)
        token.invalidate()
        contact.givenName = "C"
        #expect(calls.current == 3)
        #expect(contact.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    @Test func dependenciesAreTransitive() {
        let employee = Employee()
        let labels = Locked<[String?]>([])
        let token = employee.observe(\.label, options: [.new]) { _, change in labels.append(change.newValue) }
        employee.givenName = "Amazing"
        employee.title = "Admiral"
        #expect(labels.current == ["Rear Admiral Amazing Hopper", "Admiral Amazing Hopper"])
        token.invalidate()
    }

    @Test func subclassTablesMergeWithTheSuperclasss() {
        let manager = Manager()
        let log = Locked<[String]>([])
        let summary = manager.observe(\.summary, options: [.new]) { _, change in log.append(change.newValue!) }
        // `fullName` is declared in `Employee`'s table only.
        let fullName = manager.observe(\.fullName, options: [.new]) { _, change in log.append(change.newValue!) }
        manager.reports = 3
        manager.familyName = "Brewster"
        #expect(log.current == ["Grace Hopper (3)", "Grace Brewster (3)", "Grace Brewster"])
        summary.invalidate()
        fullName.invalidate()
    }

    @Test func aDependencyCycleIsReportedNamingItsKeysAndCut() {
        let loop = Loop()
        let values = Locked<[Int?]>([])
        var token: KeyValueObservation?
        let reported = diagnostics {
            token = loop.observe(\.a, options: [.new]) { _, change in values.append(change.newValue) }
        }
        #expect(reported.map(\.kind) == [.dependencyCycle])
        #expect(reported.first?.reads == [\Loop.a, \Loop.b, \Loop.a])
        #expect(reported.first?.message.contains("dependency cycle") == true)
        // The rest of the table still works: `a` depends on `seed`.
        loop.seed = 5
        #expect(values.current == [5])
        token?.invalidate()
    }

    /// The diagnostic says the key's observers are not notified when `title` changes: they are not.
    @Test func aKeyDeclaredWithNoInputsHasNoDependenciesAndWhatItReadsIsReported() {
        let headline = Headline()
        let values = Locked<[String?]>([])
        var token: KeyValueObservation?
        let reported = diagnostics {
            token = headline.observe(\.emptyDeclared, options: [.new]) { _, change in values.append(change.newValue) }
        }
        #expect(reported.map(\.kind) == [.incompleteDependencies])
        #expect(reported.first?.readNames == ["title"])
        let message = reported.first?.message ?? ""
        #expect(message.contains("reads `title`, which its declared inputs do not cover, so its observers are not notified"), "\(message)")
        #expect(message.contains("[\\Headline.emptyDeclared: [\\Headline.title]]"), "\(message)")
        headline.title = "Final"
        #expect(values.current == [])
        // Its own notifications still reach its observers.
        headline.willChangeValue(for: \.emptyDeclared)
        headline.didChangeValue(for: \.emptyDeclared)
        #expect(values.current == ["Final"])
        token?.invalidate()
    }

    @Test func observersOfInputsAndOfTheDependentKeyAreCalledInRegistrationOrder() {
        let contact = Contact()
        let order = Locked<[String]>([])
        let a = contact.observe(\.givenName) { _, _ in order.append("given") }
        let b = contact.observe(\.sortName) { _, _ in order.append("sort") }
        let c = contact.observe(\.givenName) { _, _ in order.append("given 2") }
        contact.givenName = "X"
        #expect(order.current == ["given", "sort", "given 2"])
        [a, b, c].forEach { $0.invalidate() }
    }

    /// Registering reads the inputs, so by Swift's rules it happens where they are written: each of
    /// threads 0–3 owns a contact, registers observers of `sortName` and changes the names, while
    /// threads 4–7 invalidate those observers.
    @Test func inputsChangedWhileOtherThreadsInvalidate() {
        let contacts = (0..<4).map { _ in UncheckedBox(Contact()) }
        let pool = Locked<[KeyValueObservation]>([])
        let deliveries = Counter(0)
        let wrong = Locked<[String]>([])
        let ownersDone = Counter(0)
        TestThread.run(8) { me in
            if me < 4 {
                let contact = contacts[me].value
                for step in 0..<2_000 {
                    switch step % 3 {
                    case 0:
                        pool.append(
                            contact.observe(\.sortName, options: [.old, .new]) { contact, change in
                                deliveries.increment()
                                // Delivered on the setting thread, right after the store.
                                if change.newValue != contact.sortName || change.oldValue == change.newValue {
                                    wrong.append("\(String(describing: change.oldValue)) → \(String(describing: change.newValue))")
                                }
                            })
                    case 1:
                        contact.givenName = "g\(step)"
                    default:
                        contact.familyName = "f\(step)"
                    }
                }
                ownersDone.increment()
                return
            }
            while ownersDone.current < 4 || !pool.current.isEmpty {
                pool.withLock { $0.isEmpty ? nil : $0.removeFirst() }?.invalidate()
            }
        }
        #expect(contacts.allSatisfy { $0.value.observationInfo.observerCountsByKeyPath.isEmpty })
        #expect(deliveries.current > 0)
        #expect(wrong.current == [])
    }
}

/// Hands a non-`Sendable` object to threads that each use it under the test's own discipline.
struct UncheckedBox<Value>: @unchecked Sendable {
    // Invariant: each test documents which thread touches which part of `value`.
    let value: Value

    init(_ value: Value) {
        self.value = value
    }
}
