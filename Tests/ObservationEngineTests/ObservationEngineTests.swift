import Dispatch
import KeyValueObserving
import Testing
import TestSupport

/// The same observation scenarios, run by one helper against an `@Observed` key, a progress key and
/// a defaults key: one delivery engine, so one set of answers (where a kind differs by design, the
/// subject says so and the scenario checks what it does instead).
@Suite("One observation engine for every kind of key")
struct ObservationEngineTests {
    @Test(arguments: Kind.allCases) func options(_ kind: Kind) async { await kind.run(Options()) }
    @Test(arguments: Kind.allCases) func prior(_ kind: Kind) async { await kind.run(Prior()) }
    @Test(arguments: Kind.allCases) func batches(_ kind: Kind) async { await kind.run(Batches()) }
    @Test(arguments: Kind.allCases) func removingDuplicates(_ kind: Kind) async { await kind.run(RemovingDuplicates()) }
    @Test(arguments: Kind.allCases) func sequences(_ kind: Kind) async { await kind.run(Sequences()) }
    @Test(arguments: Kind.allCases) func throttling(_ kind: Kind) async { await kind.run(Throttling()) }
    @Test(arguments: Kind.allCases) func goingAway(_ kind: Kind) async { await kind.run(GoingAway()) }
}

/// The kinds of key, each with its subject.
enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case observed, progress, defaults

    var testDescription: String { rawValue }

    /// Runs `scenario` against this kind's subject: the one helper every scenario goes through.
    func run(_ scenario: some Scenario) async {
        switch self {
        case .observed: await scenario.run(ObservedSubject.self)
        case .progress: await scenario.run(ProgressSubject.self)
        case .defaults: await scenario.run(DefaultsSubject.self)
        }
    }
}

/// One observation scenario, generic over the kind of key.
protocol Scenario {
    func run<Subject: EngineSubject>(_: Subject.Type) async
}

// MARK: The scenarios, generic over the kind of key

/// Observes `subject` with `options` (and `removingDuplicates`), runs `body`, and returns what the
/// observer saw.
private func seen<Subject: EngineSubject>(
    _ subject: Subject, _ options: KeyValueObservingOptions, removingDuplicates: Bool = false, _ body: () -> Void
) -> [Seen] {
    let seen = Locked<[Seen]>([])
    let token = subject.observe(options, removingDuplicates: removingDuplicates) { seen.append($0) }
    body()
    token.invalidate()
    return seen.current
}

struct Options: Scenario {
    func run<Subject: EngineSubject>(_: Subject.Type) async {
        let subject = Subject()
        #expect(seen(subject, [.initial, .old, .new]) { subject.set(1) } == [Seen(new: 0), Seen(new: 1, old: 0)])
        #expect(seen(subject, [.new]) { subject.set(2) } == [Seen(new: 2)])
        #expect(seen(subject, [.old]) { subject.set(3) } == [Seen(old: 2)])
        #expect(seen(subject, []) { subject.set(4) } == [Seen()])
        #expect(seen(subject, [.initial]) {} == [Seen()])
        // An invalidated token hears nothing more.
        #expect(seen(subject, [.new]) {}.isEmpty)
    }
}

struct Prior: Scenario {
    func run<Subject: EngineSubject>(_: Subject.Type) async {
        let subject = Subject()
        let during = Locked<[Int64]>([])
        let token = subject.observe([.prior], removingDuplicates: false) { [unowned subject] change in
            if change.isPrior { during.append(subject.value) }
        }
        #expect(seen(subject, [.prior, .old, .new]) { subject.set(5) } == [Seen(old: 0, isPrior: true), Seen(new: 5, old: 0)])
        token.invalidate()
        // The value a prior handler reads: the one before the change where the kind sends `.prior`
        // before storing (an `@Observed` setter, a defaults set), the new one where it notifies
        // after its lock (progress).
        #expect(during.current == [Subject.priorSeesOldValue ? 0 : 5])
        #expect(seen(subject, [.prior]) { subject.set(6) } == [Seen(isPrior: true), Seen()])
    }
}

struct Batches: Scenario {
    func run<Subject: EngineSubject>(_: Subject.Type) async {
        let subject = Subject()
        let changes = seen(subject, [.old, .new]) {
            subject.batch {
                subject.set(1)
                subject.set(2)
            }
        }
        if Subject.batchCoalesces {
            #expect(changes == [Seen(new: 2, old: 0)])
        } else {
            // Progress keys are notified as each change is made: a batch does not hold them.
            #expect(changes == [Seen(new: 1, old: 0), Seen(new: 2, old: 1)])
        }
        #expect(subject.value == 2)
    }
}

struct RemovingDuplicates: Scenario {
    func run<Subject: EngineSubject>(_: Subject.Type) async {
        let subject = Subject()
        subject.set(1)
        let deduplicated = seen(subject, [.prior, .new], removingDuplicates: true) {
            subject.set(1)
            subject.set(2)
            subject.set(2)
        }
        #expect(deduplicated == [Seen(isPrior: true), Seen(new: 2)])
        let every = seen(subject, [.new]) {
            subject.set(2)
            subject.set(3)
        }
        #expect(every == (Subject.notifiesEqualAssignments ? [Seen(new: 2), Seen(new: 3)] : [Seen(new: 3)]))
    }
}

struct Sequences: Scenario {
    func run<Subject: EngineSubject>(_: Subject.Type) async {
        let subject = Subject()
        var values = subject.values([.initial, .new], buffering: .unbounded).makeAsyncIterator()
        subject.set(1)
        subject.set(2)
        #expect(await values.next() == 0)
        #expect(await values.next() == 1)
        #expect(await values.next() == 2)

        var priors = subject.values([.prior, .new], buffering: .unbounded).makeAsyncIterator()
        subject.set(3)
        #expect(await priors.next() == 2)
        #expect(await priors.next() == 3)

        var newest = subject.values([.new], buffering: .newest(1)).makeAsyncIterator()
        for value in Int64(4)...9 { subject.set(value) }
        #expect(await newest.next() == 9)
    }
}

struct Throttling: Scenario {
    func run<Subject: EngineSubject>(_: Subject.Type) async {
        let subject = Subject()
        let clock = ManualThrottleScheduler()
        let queue = DispatchQueue(label: "throttled")
        let delivered = Locked<[Int64]>([])
        let token = subject.throttled(on: queue, clock: clock) { delivered.append($0) }
        clock.advance()
        #expect(delivered.current == [0])
        for value in Int64(1)...100 { subject.set(value) }
        clock.advance(by: .milliseconds(999))
        #expect(delivered.current == [0])
        clock.advance(by: .milliseconds(1))
        #expect(delivered.current == [0, 100])
        token.invalidate()
        subject.set(101)
        clock.advance(by: .seconds(5))
        #expect(delivered.current == [0, 100])

        let values = subject.throttledValues(clock: clock)
        var iterator = values.makeAsyncIterator()
        #expect(await iterator.next() == 101)
        for value in Int64(102)...200 { subject.set(value) }
        async let next = iterator.next()
        await clock.waitUntilScheduled()
        clock.advance(by: .seconds(1))
        #expect(await next == 200)
    }
}

struct GoingAway: Scenario {
    func run<Subject: EngineSubject>(_: Subject.Type) async {
        let subject = Subject()
        let count = Locked(0)
        let token = subject.observe([.new], removingDuplicates: false) { _ in count.withLock { $0 += 1 } }
        var values = subject.values([.initial, .new], buffering: .unbounded).makeAsyncIterator()
        var throttled = subject.throttledValues(clock: ManualThrottleScheduler()).makeAsyncIterator()
        subject.set(1)
        #expect(count.current == 1)
        subject.release()
        // The sequences finish once what they yielded before is taken.
        #expect(await values.next() == 0)
        #expect(await values.next() == 1)
        #expect(await values.next() == nil)
        _ = await throttled.next()
        #expect(await throttled.next() == nil)
        // The token outlives the object harmlessly.
        token.invalidate()
        #expect(count.current == 1)
    }
}
