import KeyValueObserving
import Testing

// Tracked observation (`observeTracking`, `KeyValueObservation.tracking`, `values(tracking:)`): the
// seed cases, re-tracking, the free form, the diagnostic and the sequences. Options, batches and
// nested changes are in TrackedObservationTests+Batches.swift; root death, invalidation and threads
// in TrackedObservationTests+Threads.swift.

/// Three observable integers and one plain one.
/// `@unchecked Sendable` in tests only: each test sets a property from one thread at a time.
final class TrackedMeter: KeyValueObservable, @unchecked Sendable {
    @Observed var x = 0
    @Observed var y = 0
    @Observed var z = 0
    var plain = 0
}

/// A flag choosing between two child objects, which it holds without observing them.
final class TrackedSwitch: KeyValueObservable, @unchecked Sendable {
    @Observed var flag = true
    let left = TrackedMeter()
    let right = TrackedMeter()
}

final class TrackedPerson: KeyValueObservable, @unchecked Sendable {
    @Observed var name = ""

    init(_ name: String) {
        self.name = name
    }
}

final class TrackedRoster: KeyValueObservable, @unchecked Sendable {
    @Observed var people: [TrackedPerson] = []
}

final class TrackedDirectory: KeyValueObservable, @unchecked Sendable {
    @Observed var byID: [String: TrackedPerson] = [:]
}

/// A root whose only observable property is a child object.
final class TrackedHolder: KeyValueObservable, @unchecked Sendable {
    @Observed var meter = TrackedMeter()

    init(_ meter: TrackedMeter) {
        self.meter = meter
    }
}

/// The `(old, new)` change a tracked observation delivers with `[.old, .new]`.
func trackedChange<Value>(_ old: Value, _ new: Value) -> KeyValueObservedChange<Value> {
    KeyValueObservedChange(kind: .setting, newValue: new, oldValue: old)
}

@Suite("Tracked observation: seed cases, re-tracking, the free form, diagnostics and sequences")
struct TrackedObservationTests {
    // MARK: appState.settings.username

    @Test func aReplacedSettingsObjectIsNoLongerObserved() {
        let state = AppState()
        let original = state.settings
        let changes = Locked<[KeyValueObservedChange<String>]>([])
        let token = state.observeTracking(options: [.old, .new]) {
            $0.settings.username
        } changeHandler: { _, change in
            changes.append(change)
        }
        original.username = "grace"
        let replacement = UserSettings()
        replacement.username = "linus"
        state.settings = replacement
        // The replaced object: neither its changes notify nor does anything observe it any more.
        original.username = "ignored"
        #expect(original.observationInfo.isEmpty)
        replacement.username = "margaret"
        #expect(
            changes.current == [
                trackedChange("ada", "grace"),
                trackedChange("grace", "linus"),
                trackedChange("linus", "margaret"),
            ])
        token.invalidate()
    }

    @Test func aReplacedSettingsObjectIsNotRetainedWhileTheTokenLives() {
        let state = AppState()
        weak var replaced: UserSettings?
        replaced = state.settings
        let calls = Counter(0)
        let token = state.observeTracking {
            $0.settings.username
        } changeHandler: { _, _ in
            calls.increment()
        }
        #expect(replaced != nil)
        state.settings = UserSettings()
        #expect(calls.current == 1)
        // The token is alive and has re-evaluated: the old settings object is gone.
        #expect(replaced == nil)
        withExtendedLifetime(token) {}
        token.invalidate()
    }

    // MARK: people.map(\.name)

    @Test func theNamesOfAnArrayOfObservableObjectsFollowElementChangesAppendsAndRemovals() {
        let roster = TrackedRoster()
        let ada = TrackedPerson("Ada")
        let bob = TrackedPerson("Bob")
        let cy = TrackedPerson("Cy")
        roster.people = [ada, bob, cy]
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = roster.observeTracking(options: [.old, .new]) {
            $0.people.map(\.name)
        } changeHandler: { _, change in
            changes.append(change)
        }
        bob.name = "Bea"  // an element's name
        let dee = TrackedPerson("Dee")
        roster.people.append(dee)  // an element appended (a setting of the array)
        dee.name = "Di"  // the appended element is observed
        roster.remove(at: RangeSet(0..<1), from: \.people)  // an element removed (a to-many removal)
        ada.name = "Ava"  // the removed element: no notification
        #expect(ada.observationInfo.isEmpty)
        let eve = TrackedPerson("Eve")
        roster.insert([eve], at: 0, into: \.people)  // a to-many insertion
        eve.name = "Eva"
        cy.name = "Cyd"
        #expect(
            changes.current == [
                trackedChange(["Ada", "Bob", "Cy"], ["Ada", "Bea", "Cy"]),
                trackedChange(["Ada", "Bea", "Cy"], ["Ada", "Bea", "Cy", "Dee"]),
                trackedChange(["Ada", "Bea", "Cy", "Dee"], ["Ada", "Bea", "Cy", "Di"]),
                trackedChange(["Ada", "Bea", "Cy", "Di"], ["Bea", "Cy", "Di"]),
                trackedChange(["Bea", "Cy", "Di"], ["Eve", "Bea", "Cy", "Di"]),
                trackedChange(["Eve", "Bea", "Cy", "Di"], ["Eva", "Bea", "Cy", "Di"]),
                trackedChange(["Eva", "Bea", "Cy", "Di"], ["Eva", "Bea", "Cyd", "Di"]),
            ])
        token.invalidate()
    }

    // MARK: Reads through optionals, dictionaries and computed properties

    @Test func readsThroughOptionalsAndComputedPropertiesAreTracked() {
        let player = MediaPlayer()
        let person = Person()
        let durations = Locked<[Double?]>([])
        let names = Locked<[String]>([])
        let tokens = [
            player.observeTracking(options: [.new]) {
                $0.currentItem?.asset?.duration
            } changeHandler: { _, change in
                durations.append(change.newValue ?? nil)
            },
            // `fullName` declares no dependencies: what its getter reads is what is tracked.
            person.observeTracking(options: [.new]) {
                $0.fullName
            } changeHandler: { _, change in
                names.append(change.newValue!)
            },
        ]
        let item = PlayerItem()
        player.currentItem = item
        item.asset = Asset(duration: 3)
        item.asset?.duration = 4
        player.currentItem = nil
        item.asset?.duration = 5  // no longer reached
        person.lastName = "Byron"
        person.firstName = "Augusta"
        #expect(durations.current == [nil, 3, 4, nil])
        #expect(names.current == ["Ada Byron", "Augusta Byron"])
        tokens.forEach { $0.invalidate() }
    }

    @Test func readsThroughADictionaryAreTracked() {
        let directory = TrackedDirectory()
        let ada = TrackedPerson("Ada")
        let changes = Locked<[KeyValueObservedChange<String>]>([])
        let token = directory.observeTracking(options: [.old, .new]) {
            $0.byID["a"]?.name ?? "none"
        } changeHandler: { _, change in
            changes.append(change)
        }
        directory.byID["b"] = TrackedPerson("Bob")  // a setting of the dictionary: evaluated, same value
        directory.byID["a"] = ada
        ada.name = "Ava"
        #expect(changes.current == [trackedChange("none", "none"), trackedChange("none", "Ada"), trackedChange("Ada", "Ava")])
        token.invalidate()
    }

    // MARK: Re-tracking

    @Test func aBranchSwitchesWhatIsObserved() {
        let model = TrackedSwitch()
        model.left.x = 1
        model.right.y = 100
        let changes = Locked<[KeyValueObservedChange<Int>]>([])
        let token = model.observeTracking(options: [.old, .new]) {
            $0.flag ? $0.left.x : $0.right.y
        } changeHandler: { _, change in
            changes.append(change)
        }
        model.right.y = 101  // the untaken branch's input: no notification
        #expect(changes.current.isEmpty)
        #expect(model.right.observationInfo.isEmpty)
        model.left.x = 2
        model.flag = false
        #expect(model.left.observationInfo.isEmpty)
        model.left.x = 3  // now the untaken branch
        model.right.y = 102
        #expect(
            changes.current == [
                trackedChange(1, 2),
                trackedChange(2, 101),
                trackedChange(101, 102),
            ])
        token.invalidate()
    }

    @Test func anInvalidatedTokenLeavesNothingObserved() {
        let model = TrackedSwitch()
        let token = model.observeTracking {
            $0.flag ? $0.left.x : $0.right.y
        } changeHandler: { _, _ in
        }
        token.invalidate()
        #expect(model.observationInfo.isEmpty)
        #expect(model.left.observationInfo.isEmpty)
        #expect(model.right.observationInfo.isEmpty)
    }

    // MARK: The free form

    @Test func theFreeFormTracksTwoUnrelatedObjects() {
        let player = AudioPlayer()
        let settings = UserSettings()
        let changes = Locked<[KeyValueObservedChange<String>]>([])
        let token = KeyValueObservation.tracking(options: [.initial, .old, .new]) {
            "\(settings.username) \(player.volume)"
        } changeHandler: { change in
            changes.append(change)
        }
        player.volume = 1
        settings.username = "grace"
        player.balance = 0.3  // not @Observed: no notification
        token.invalidate()
        player.volume = 0
        settings.username = "ignored"
        #expect(
            changes.current == [
                KeyValueObservedChange(newValue: "ada 0.5"),
                trackedChange("ada 0.5", "ada 1.0"),
                trackedChange("ada 1.0", "grace 1.0"),
            ])
    }

    @Test func theFreeFormHoldsWhatItCapturesUntilInvalidated() {
        weak var weakPlayer: AudioPlayer?
        var token: KeyValueObservation?
        do {
            let player = AudioPlayer()
            weakPlayer = player
            token = KeyValueObservation.tracking {
                player.volume
            } changeHandler: { _ in
            }
        }
        #expect(weakPlayer != nil)
        token?.invalidate()
        #expect(weakPlayer == nil)
    }

    // MARK: The diagnostic

    private func diagnostics(_ body: () -> Void) -> [KeyValueObservingDiagnostic] {
        let collected = Locked<[KeyValueObservingDiagnostic]>([])
        KeyValueObservingDiagnosticCenter.withHandler({ collected.append($0) }, operation: body)
        return collected.current
    }

    @Test func anExpressionThatReadsNothingObservableIsReportedOnceWithItsFileAndLine() {
        let meter = TrackedMeter()
        var token: KeyValueObservation?
        let line: UInt = #line + 2  // the line of the call
        let reported = diagnostics {
            token = meter.observeTracking {
                $0.plain
            } changeHandler: { _, _ in
            }
        }
        #expect(reported.count == 1)
        #expect(reported.first?.kind == .untrackedExpression)
        #expect(reported.first?.line == line)
        #expect(reported.first?.fileID.hasSuffix("TrackedObservationTests.swift") == true)
        #expect(reported.first?.message.contains("TrackedObservationTests.swift:\(line)") == true)
        // Nothing notifies it, and nothing more is reported.
        let later = diagnostics {
            meter.plain = 1
            meter.x = 1
        }
        #expect(later.isEmpty)
        token?.invalidate()
    }

    @Test func aFreeFormExpressionThatReadsNothingObservableIsReported() {
        let meter = TrackedMeter()
        var token: KeyValueObservation?
        let line: UInt = #line + 2  // the line of the call
        let reported = diagnostics {
            token = KeyValueObservation.tracking {
                meter.plain + 1
            } changeHandler: { _ in
            }
        }
        #expect(reported.map(\.kind) == [.untrackedExpression])
        #expect(reported.first?.line == line)
        #expect(reported.first?.fileID.hasSuffix("TrackedObservationTests.swift") == true)
        token?.invalidate()
    }

    @Test func anExpressionThatReadsAnObservedPropertyIsNotReported() {
        let meter = TrackedMeter()
        var tokens: [KeyValueObservation] = []
        let reported = diagnostics {
            tokens.append(
                meter.observeTracking {
                    $0.plain + $0.x
                } changeHandler: { _, _ in
                })
            tokens.append(
                KeyValueObservation.tracking {
                    meter.y
                } changeHandler: { _ in
                })
        }
        #expect(reported.isEmpty)
        tokens.forEach { $0.invalidate() }
    }

    // MARK: values(tracking:)

    /// The first `count` elements of a sequence.
    private func first<S: AsyncSequence>(_ count: Int, of sequence: S) async throws -> [S.Element] {
        var result: [S.Element] = []
        for try await element in sequence {
            result.append(element)
            if result.count == count { break }
        }
        return result
    }

    @Test(.timeLimit(.minutes(1))) func valuesYieldTheCurrentValueThenEachNewOne() async throws {
        let meter = TrackedMeter()
        meter.x = 1
        let values = meter.values(tracking: { $0.x * 2 + $0.y })
        meter.x = 2
        meter.y = 1
        meter.x = 2  // an equal value: yielded (no deduplication asked)
        #expect(try await first(4, of: values) == [2, 4, 5, 5])
    }

    @Test(.timeLimit(.minutes(1))) func valuesRemovingDuplicatesSkipEqualValues() async throws {
        let meter = TrackedMeter()
        let values = meter.values(tracking: { $0.x / 2 }, removingDuplicates: true)
        for x in 1...4 { meter.x = x }  // 0 (initial), 0, 1, 1, 2
        #expect(try await first(3, of: values) == [0, 1, 2])
    }

    @Test(.timeLimit(.minutes(1))) func newestOneBufferingKeepsOnlyTheLatestValue() async {
        let meter = TrackedMeter()
        var values = meter.values(tracking: { $0.x }, buffering: .newest(1)).makeAsyncIterator()
        for x in 1...5 { meter.x = x }
        #expect(await values.next() == 5)
        meter.x = 6
        #expect(await values.next() == 6)
    }

    @Test func droppingTheSequenceEndsTheObservation() {
        let meter = TrackedMeter()
        let evaluations = Counter(0)
        do {
            let values = meter.values(tracking: { meter in
                evaluations.increment()
                return meter.x
            })
            let registered = evaluations.current
            meter.x = 1
            #expect(evaluations.current == registered + 1)
            withExtendedLifetime(values) {}
        }
        let dropped = evaluations.current
        meter.x = 2
        #expect(evaluations.current == dropped)
        #expect(meter.observationInfo.isEmpty)
    }
}
