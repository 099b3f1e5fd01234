import KeyValueObserving
import Testing

@Suite("Diagnostics for keys that can never notify")
struct DiagnosticsTests {
    private func diagnostics(_ body: () -> Void) -> [KeyValueObservingDiagnostic] {
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }, operation: body)
        return collected.current
    }

    @Test func observingAPlainPropertyIsReportedWithTheKeyTheCallSiteAndTheFix() {
        let player = AudioPlayer()
        var token: KeyValueObservation?
        let line: UInt = #line + 1
        let reported = diagnostics { token = player.observe(\.balance) { _, _ in } }
        #expect(reported.count == 1)
        let diagnostic = reported.first
        #expect(diagnostic?.kind == .unobservableKey)
        #expect(diagnostic?.keyPath == \AudioPlayer.balance)
        #expect(diagnostic?.objectType == AudioPlayer.self)
        #expect(diagnostic?.reads == [])
        #expect(diagnostic?.line == line)
        #expect(diagnostic?.fileID.hasSuffix("DiagnosticsTests.swift") == true)
        #expect(diagnostic?.message.contains("`balance` on AudioPlayer") == true)
        #expect(diagnostic?.message.contains("DiagnosticsTests.swift:\(line)") == true)
        #expect(diagnostic?.message.contains("Fix: declare the property @Observed") == true)
        token?.invalidate()
    }

    @Test func observingAComputedPropertyNamesTheObservedPropertiesItReads() {
        let person = Person()
        var token: KeyValueObservation?
        let reported = diagnostics { token = person.observe(\.fullName) { _, _ in } }
        #expect(reported.count == 1)
        #expect(reported.first?.kind == .undeclaredDependencies)
        #expect(reported.first?.reads == [\Person.firstName, \Person.lastName])
        #expect(reported.first?.readNames == ["firstName", "lastName"])
        #expect(reported.first?.message.contains("`firstName`, `lastName`") == true)
        token?.invalidate()
    }

    @Test func aSubclassComputedKeyReadingOneInheritedKeyNotifiesWithItsOwnValues() {
        // `doubledSpeed` reads only the inherited `speed` and has its type, which makes it
        // indistinguishable from `\SportsCar.speed` itself; both are served by reading through the
        // observer's own key path, so the values are right either way and nothing is reported.
        let car = SportsCar()
        let values = Locked<[String]>([])
        var token: KeyValueObservation?
        let reported = diagnostics {
            token = car.observe(\.doubledSpeed, options: [.prior, .old, .new]) { _, change in
                values.append("\(change.isPrior) \(String(describing: change.oldValue)) \(String(describing: change.newValue))")
            }
        }
        car.speed = 21
        #expect(reported.isEmpty)
        #expect(values.current == ["true Optional(0) nil", "false Optional(0) Optional(42)"])
        token?.invalidate()
    }

    @Test func observedAndInheritedKeysAreNotReported() {
        let car = SportsCar()
        var tokens: [KeyValueObservation] = []
        let reported = diagnostics {
            tokens.append(car.observe(\.speed) { _, _ in })
            tokens.append(car.observe(\.gear) { _, _ in })
            tokens.append(car.observe(\.turbo) { _, _ in })
        }
        #expect(reported.isEmpty)
        tokens.forEach { $0.invalidate() }
    }

    @Test func anUnobservableKeyStillDeliversItsInitialValueAndNothingElse() {
        let player = AudioPlayer()
        let values = Locked<[Double?]>([])
        var token: KeyValueObservation?
        _ = diagnostics {
            token = player.observe(\.balance, options: [.initial, .new]) { _, change in values.append(change.newValue) }
        }
        player.balance = 1
        player.volume = 1
        #expect(values.current == [0.0])
        token?.invalidate()
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }
}

@Suite("The process-wide diagnostics handler", .serialized)
struct GlobalDiagnosticsHandlerTests {
    @Test func aProcessWideHandlerReceivesDiagnosticsRaisedOutsideAScopedOne() {
        final class Unobservable: KeyValueObservable {
            var plain = 0
        }
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        KeyValueObservingDiagnosticCenter.setHandler { diagnostic in
            if diagnostic.objectType == Unobservable.self { collected.append(diagnostic) }
        }
        defer { KeyValueObservingDiagnosticCenter.setHandler(nil) }
        let object = Unobservable()
        let token = object.observe(\.plain) { _, _ in }
        let again = object.observe(\.plain) { _, _ in }
        // Unlike the default (one line per key), a handler receives every diagnostic.
        #expect(collected.current.count == 2)
        #expect(collected.current.first?.kind == .unobservableKey)
        token.invalidate()
        again.invalidate()
    }
}
