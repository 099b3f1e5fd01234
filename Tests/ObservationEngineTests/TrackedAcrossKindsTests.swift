import Foundation
import KeyValueObserving
import ObservableDefaults
import ObservableProgress
import Testing
import TestSupport

/// A defaults store on a file of its own, removed at the end.
private final class TemporaryDefaults {
    let directory: URL
    let store: DefaultsStore

    init() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tracked-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        store = DefaultsStore(fileURL: directory.appendingPathComponent("store.json"))
    }

    deinit {
        try? store.flush()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// What the threaded expression reads: a tree's fraction, one child's count and a defaults key.
private struct Reading: Equatable, Sendable, CustomStringConvertible {
    var fraction: Double
    var firstCompleted: Int64
    var last: Int64

    var description: String { "(\(fraction), \(firstCompleted), \(last))" }
}

@Suite("Tracked observation across kinds of key: progress and defaults in one expression")
struct TrackedAcrossKindsTests {
    @Test func aProgressTreesFractionCombinedWithADefaultsKey() {
        let defaults = TemporaryDefaults()
        let store = defaults.store
        let label = DefaultsKey<String>("tracked.label", default: "copying")
        let unread = DefaultsKey<Int64>("tracked.unread", default: 0)
        let overall = ObservableProgress(totalUnitCount: 2)
        let download = ObservableProgress(totalUnitCount: 4, parent: overall, pendingUnitCount: 1)
        let install = ObservableProgress(totalUnitCount: 4, parent: overall, pendingUnitCount: 1)
        let changes = Locked<[KeyValueObservedChange<String>]>([])
        let token = overall.observeTracking(options: [.initial, .old, .new]) {
            "\(store[label]) \($0.fractionCompleted)"
        } changeHandler: {
            _, change in
            changes.append(change)
        }
        download.completedUnitCount = 2  // a child's units: the root's fraction
        store[label] = "installing"  // the defaults key
        install.completedUnitCount = 1
        store[unread] = 5  // a key the expression does not read
        token.invalidate()
        download.completedUnitCount = 3
        store[label] = "ignored"
        #expect(
            changes.current == [
                KeyValueObservedChange(newValue: "copying 0.0"),
                KeyValueObservedChange(newValue: "copying 0.25", oldValue: "copying 0.0"),
                KeyValueObservedChange(newValue: "installing 0.25", oldValue: "copying 0.25"),
                KeyValueObservedChange(newValue: "installing 0.375", oldValue: "installing 0.25"),
            ])
    }

    @Test func anEvaluationNestedInsideAnotherKeepsWhatTheOuterOneExpects() {
        // Progress keys are recorded through the thread's expected-read cursor in every build. The
        // outer expression reads `first`, then sets an input of the inner observation (which is
        // evaluated there, nested, with a cursor of its own), then reads `shared`, which the inner
        // one reads too. Each re-evaluation must keep observing `shared`: a cursor left pointing
        // at the inner observation's inputs would match the outer read there, and the outer
        // observation would drop `shared` at the end of its evaluation.
        let first = ObservableProgress(totalUnitCount: 100)
        let shared = ObservableProgress(totalUnitCount: 100)
        let trigger = ObservableProgress(totalUnitCount: 1_000)
        let outerValues = Locked<[Int64]>([])
        let innerValues = Locked<[Int64]>([])
        let inner = KeyValueObservation.tracking(options: [.new]) {
            trigger.completedUnitCount * 1_000 + shared.completedUnitCount
        } changeHandler: { change in
            innerValues.append(change.newValue!)
        }
        let evaluations = Locked(0)
        let outer = KeyValueObservation.tracking(options: [.new]) {
            let value = first.completedUnitCount
            trigger.completedUnitCount = Int64(evaluations.increment())
            return value * 1_000 + shared.completedUnitCount
        } changeHandler: { change in
            outerValues.append(change.newValue!)
        }
        first.completedUnitCount = 1
        shared.completedUnitCount = 2
        first.completedUnitCount = 3
        shared.completedUnitCount = 4
        #expect(outerValues.current == [1_000, 1_002, 3_002, 3_004])
        // The inner observation: each outer evaluation's trigger (the first at the outer one's
        // registration), and each change of `shared` (the inner one registered first, so it hears
        // of it before the outer one evaluates and sets the trigger).
        #expect(innerValues.current == [1_000, 2_000, 2_002, 3_002, 4_002, 4_004, 5_004])
        outer.invalidate()
        inner.invalidate()
    }

    @Test func aRegistrationProbeInsideAnEvaluationLeavesTheOuterOneItsInputs() {
        // Each evaluation registers an observer of a key path used for the first time, whose
        // registration probe (a recorder of its own) runs nested in the evaluation, between the
        // two progress reads. The evaluation keeps both progress keys as inputs, and the key the
        // probe read is not one of them.
        let first = ObservableProgress(totalUnitCount: 100)
        let second = ObservableProgress(totalUnitCount: 100)
        let model = ProbedInsideEvaluation()
        let evaluations = Locked(0)
        let values = Locked<[Int64]>([])
        let token = KeyValueObservation.tracking(options: [.new]) {
            let value = first.completedUnitCount
            model.observeKey(evaluations.increment() - 1).invalidate()
            return value * 1_000 + second.completedUnitCount
        } changeHandler: { change in
            values.append(change.newValue!)
        }
        second.completedUnitCount = 1
        first.completedUnitCount = 2
        second.completedUnitCount = 3
        model.a = 1
        model.b = 1
        #expect(values.current == [1, 2_001, 2_003])
        #expect(evaluations.current == 4)
        token.invalidate()
    }

    @Test func aRootDyingWhileAnotherThreadChangesAnInputGoesQuietWithoutACrash() {
        // The root is held by an unowned reference count and taken strongly for each evaluation
        // only while it is not deinitialising (the runtime's swift_tryRetain). A writer changes
        // an input of another object while the main thread drops the root's last reference: no
        // evaluation may use the root once its deinitialisation began, and after it nothing is
        // delivered.
        for _ in 0..<200 {
            let progress = ObservableProgress(totalUnitCount: 1_000_000)
            let died = Locked(false)
            let deliveredAfterDeath = Locked(0)
            let delivered = Locked(0)
            var root: TrackedProgressHolder? = TrackedProgressHolder(progress, onDeinit: { died.withLock { $0 = true } })
            let token = root!.observeTracking(options: [.new]) {
                $0.progress.completedUnitCount
            } changeHandler: { holder, _ in
                // `holder` is a strong reference: its deinitialisation cannot have begun.
                if died.current { deliveredAfterDeath.increment() }
                delivered.increment()
                withExtendedLifetime(holder) {}
            }
            let started = Locked(false)
            let writer = TestThread {
                var value: Int64 = 0
                while value < 2_000 {
                    value += 1
                    progress.completedUnitCount = value
                    if value == 50 { started.withLock { $0 = true } }
                }
            }
            while !started.current {}
            root = nil
            writer.join()
            let count = delivered.current
            progress.completedUnitCount = 0
            #expect(died.current)
            #expect(deliveredAfterDeath.current == 0)
            #expect(delivered.current == count)
            #expect(count >= 50)
            token.invalidate()
        }
    }

    @Test func eightThreadsChangingProgressAndDefaultsKeysGiveAnExactChain() {
        let iterations: Int64 = 2_000
        let defaults = TemporaryDefaults()
        let store = defaults.store
        let key = DefaultsKey<Int64>("tracked.last", default: 0)
        let overall = ObservableProgress(totalUnitCount: 4)
        let parts = (0..<4).map { _ in ObservableProgress(totalUnitCount: 2 * iterations, parent: overall, pendingUnitCount: 1) }
        let read: @Sendable () -> Reading = {
            Reading(fraction: overall.fractionCompleted, firstCompleted: parts[0].completedUnitCount, last: store[key])
        }
        let before = read()
        let deliveries = Locked<[(old: Reading, new: Reading)]>([])
        let running = Locked(0)
        let overlapped = Locked(false)
        let token = KeyValueObservation.tracking(options: [.old, .new], read) { change in
            if running.withLock({
                $0 += 1; return $0
            }) > 1 {
                overlapped.withLock { $0 = true }
            }
            deliveries.append((change.oldValue!, change.newValue!))
            running.withLock { $0 -= 1 }
        }
        TestThread.run(8) { index in
            if index < 4 {
                for _ in 0..<iterations { parts[index].completedUnitCount += 1 }
            } else {
                for step in 1...iterations { store[key] = Int64(index) * 1_000_000 + step }
            }
        }
        token.invalidate()
        let after = read()
        let seen = deliveries.current
        #expect(!overlapped.current, "two deliveries ran at once")
        #expect(parts.allSatisfy { $0.completedUnitCount == iterations })
        #expect((4..<8).map { Int64($0) * 1_000_000 + iterations }.contains(after.last))
        #expect(abs(after.fraction - 0.5) < 1e-9)
        #expect(!seen.isEmpty)
        #expect(seen.first?.old == before)
        // Each delivery's old value is the previous delivery's new one.
        let broken = seen.indices.dropFirst().first { seen[$0].old != seen[$0 - 1].new }
        if let broken {
            Issue.record("delivery \(broken) of \(seen.count): old \(seen[broken].old) != previous new \(seen[broken - 1].new)")
        }
        #expect(seen.last?.new == after)
    }

    @Test(arguments: [CrossThreadInput.progress, .defaults])
    func aChangeArrivingDuringADeliveryIsDeliveredAfterItByTheDeliveringThread(_ input: CrossThreadInput) {
        // The handler of the first change holds the main thread until another thread has made two
        // changes (it does not wait for their delivery); both are then delivered by the main thread
        // in one delivery, after the handler returns, without `.prior`.
        let defaults = TemporaryDefaults()
        let store = defaults.store
        let key = DefaultsKey<Int64>("tracked.cross", default: 0)
        let progress = ObservableProgress(totalUnitCount: 100)
        let isProgress = input == .progress
        let get: @Sendable () -> Int64 = { isProgress ? progress.completedUnitCount : store[key] }
        let set: @Sendable (Int64) -> Void = { value in
            if isProgress { progress.completedUnitCount = value } else { store[key] = value }
        }
        let main = currentThreadID()
        let log = Locked<[String]>([])
        let inHandler = Locked(false)
        let writerDone = Locked(false)
        let token = KeyValueObservation.tracking(options: [.prior, .old, .new], get) { change in
            let values = "\(change.oldValue.map(String.init) ?? "-")→\(change.newValue.map(String.init) ?? "-")"
            log.append("\(change.isPrior ? "prior " : "")\(values)\(currentThreadID() == main ? "" : " elsewhere")")
            guard !change.isPrior, change.newValue == 1 else { return }
            inHandler.withLock { $0 = true }
            // A guard against a writer that waits for the delivery (a deadlock), not a timing check.
            let deadline = ContinuousClock.now + .seconds(60)
            while !writerDone.current, ContinuousClock.now < deadline {}
        }
        let writer = TestThread {
            while !inHandler.current {}
            set(2)
            set(3)
            writerDone.withLock { $0 = true }
        }
        set(1)
        writer.join()
        #expect(writerDone.current)
        #expect(log.current == ["prior 0→-", "0→1", "1→3"])
        #expect(get() == 3)
        token.invalidate()
    }
}

/// Five observable integers, each observed for the first time inside a tracked evaluation.
/// `@unchecked Sendable`: set from one thread.
final class ProbedInsideEvaluation: KeyValueObservable, @unchecked Sendable {
    @Observed var a = 0
    @Observed var b = 0
    @Observed var c = 0
    @Observed var d = 0
    @Observed var e = 0

    /// An observer of the `index`th property (the last one from the fifth on), with no handler.
    func observeKey(_ index: Int) -> KeyValueObservation {
        switch index {
        case 0: observe(\.a) { _, _ in }
        case 1: observe(\.b) { _, _ in }
        case 2: observe(\.c) { _, _ in }
        case 3: observe(\.d) { _, _ in }
        default: observe(\.e) { _, _ in }
        }
    }
}

/// A root that reaches a progress it does not own, and tells of its deinitialisation.
/// `@unchecked Sendable`: both properties are immutable (the progress is thread-safe).
final class TrackedProgressHolder: KeyValueObservable, @unchecked Sendable {
    let progress: ObservableProgress
    private let onDeinit: @Sendable () -> Void

    init(_ progress: ObservableProgress, onDeinit: @escaping @Sendable () -> Void) {
        self.progress = progress
        self.onDeinit = onDeinit
    }

    deinit {
        onDeinit()
    }
}

enum CrossThreadInput: String, Sendable, CustomTestStringConvertible {
    case progress, defaults

    var testDescription: String { rawValue }
}
