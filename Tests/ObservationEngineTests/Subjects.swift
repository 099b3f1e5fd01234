import Dispatch
import Foundation
import KeyValueObserving
import ObservableDefaults
import ObservableProgress
import TestSupport

/// One change as an observer saw it, whatever the kind of key.
struct Seen: Equatable, Sendable, CustomStringConvertible {
    var new: Int64?
    var old: Int64?
    var isPrior = false

    var description: String { "\(isPrior ? "prior " : "")\(old.map(String.init) ?? "-")→\(new.map(String.init) ?? "-")" }
}

/// An observable `Int64` key of one kind (`@Observed`, progress, defaults), starting at 0, with
/// the observation API every kind offers. The one engine under test delivers for all three.
protocol EngineSubject: AnyObject, Sendable {
    init()
    /// Whether an assignment of the current value notifies (KVO's rule; progress notifies changes only).
    static var notifiesEqualAssignments: Bool { get }
    /// Whether a `.prior` handler reads the value before the change (the value is stored after it).
    static var priorSeesOldValue: Bool { get }
    /// Whether a batch that changes the key twice notifies once, from the value before to the last.
    static var batchCoalesces: Bool { get }

    var value: Int64 { get }
    func set(_ value: Int64)
    func batch(_ body: () -> Void)
    func observe(_ options: KeyValueObservingOptions, removingDuplicates: Bool, _ handler: @escaping @Sendable (Seen) -> Void)
        -> KeyValueObservation
    func values(_ options: KeyValueObservingOptions, buffering: KeyValueObservationBuffering) -> KeyValueObservationValues<Int64>
    func throttled(on queue: DispatchQueue, clock: ManualThrottleScheduler, _ handler: @escaping @Sendable (Int64) -> Void)
        -> KeyValueObservation
    func throttledValues(clock: ManualThrottleScheduler) -> KeyValueThrottledValues<Int64>
    /// Lets the observed object (the store) go.
    func release()
}

final class Counter: KeyValueObservable, @unchecked Sendable {
    @Observed var count: Int64 = 0
}

/// An `@Observed` property.
// Invariant: used from one test at a time, which sets it on one thread (handlers only read it).
final class ObservedSubject: EngineSubject, @unchecked Sendable {
    static let notifiesEqualAssignments = true
    static let priorSeesOldValue = true
    static let batchCoalesces = true
    private var object: Counter? = Counter()
    private var counter: Counter { object! }

    init() {}
    var value: Int64 { counter.count }
    func set(_ value: Int64) { counter.count = value }
    func batch(_ body: () -> Void) { counter.coalescingChanges(body) }

    func observe(_ options: KeyValueObservingOptions, removingDuplicates: Bool, _ handler: @escaping @Sendable (Seen) -> Void)
        -> KeyValueObservation
    {
        counter.observe(\.count, options: options, removingDuplicates: removingDuplicates) { _, change in
            handler(Seen(new: change.newValue, old: change.oldValue, isPrior: change.isPrior))
        }
    }

    func values(_ options: KeyValueObservingOptions, buffering: KeyValueObservationBuffering) -> KeyValueObservationValues<Int64> {
        counter.values(for: \.count, options: options, buffering: buffering)
    }

    func throttled(on queue: DispatchQueue, clock: ManualThrottleScheduler, _ handler: @escaping @Sendable (Int64) -> Void)
        -> KeyValueObservation
    {
        counter._observe(\.count, throttledTo: .seconds(1), on: queue, isDuplicate: nil, scheduler: clock, handler: handler)
    }

    func throttledValues(clock: ManualThrottleScheduler) -> KeyValueThrottledValues<Int64> {
        counter._values(for: \.count, throttledTo: .seconds(1), isDuplicate: nil, scheduler: clock)
    }

    func release() { object = nil }
}

/// A progress key: `completedUnitCount`, notified explicitly after the node's lock is released.
// Invariant: used from one test at a time, which sets it on one thread (handlers only read it).
final class ProgressSubject: EngineSubject, @unchecked Sendable {
    static let notifiesEqualAssignments = false
    static let priorSeesOldValue = false
    static let batchCoalesces = false
    private var object: ObservableProgress? = ObservableProgress(totalUnitCount: 1_000)
    private var progress: ObservableProgress { object! }

    init() {}
    var value: Int64 { progress.completedUnitCount }
    func set(_ value: Int64) { progress.completedUnitCount = value }
    func batch(_ body: () -> Void) { progress.coalescingChanges(body) }

    func observe(_ options: KeyValueObservingOptions, removingDuplicates: Bool, _ handler: @escaping @Sendable (Seen) -> Void)
        -> KeyValueObservation
    {
        progress.observe(\.completedUnitCount, options: options, removingDuplicates: removingDuplicates) { _, change in
            handler(Seen(new: change.newValue, old: change.oldValue, isPrior: change.isPrior))
        }
    }

    func values(_ options: KeyValueObservingOptions, buffering: KeyValueObservationBuffering) -> KeyValueObservationValues<Int64> {
        progress.values(for: \.completedUnitCount, options: options, buffering: buffering)
    }

    func throttled(on queue: DispatchQueue, clock: ManualThrottleScheduler, _ handler: @escaping @Sendable (Int64) -> Void)
        -> KeyValueObservation
    {
        progress.observe(\.completedUnitCount, throttledTo: .seconds(1), on: queue, isDuplicate: nil, scheduler: clock, handler: handler)
    }

    func throttledValues(clock: ManualThrottleScheduler) -> KeyValueThrottledValues<Int64> {
        progress.values(for: \.completedUnitCount, throttledTo: .seconds(1), isDuplicate: nil, scheduler: clock)
    }

    func release() { object = nil }
}

/// A defaults key of a store on a file of its own.
// Invariant: used from one test at a time, which sets it on one thread (handlers only read it).
final class DefaultsSubject: EngineSubject, @unchecked Sendable {
    static let notifiesEqualAssignments = true
    static let priorSeesOldValue = true
    static let batchCoalesces = true
    let key = DefaultsKey<Int64>("engine.count", default: 0)
    let directory: URL
    private var object: DefaultsStore?
    private var store: DefaultsStore { object! }

    init() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("engine-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        object = DefaultsStore(fileURL: directory.appendingPathComponent("store.json"))
    }

    deinit {
        try? object?.flush()
        object = nil
        try? FileManager.default.removeItem(at: directory)
    }

    var value: Int64 { store[key] }
    func set(_ value: Int64) {
        if let inBatch { inBatch.set(value, for: key) } else { store[key] = value }
    }
    func batch(_ body: () -> Void) {
        // The batch's body sets through the batch; `set` is redirected to it meanwhile.
        store.batch { batch in
            inBatch = batch
            body()
            inBatch = nil
        }
    }
    private var inBatch: DefaultsBatch?

    func observe(_ options: KeyValueObservingOptions, removingDuplicates: Bool, _ handler: @escaping @Sendable (Seen) -> Void)
        -> KeyValueObservation
    {
        store.observe(key, options: options, removingDuplicates: removingDuplicates) { _, change in
            handler(Seen(new: change.newValue, old: change.oldValue, isPrior: change.isPrior))
        }
    }

    func values(_ options: KeyValueObservingOptions, buffering: KeyValueObservationBuffering) -> KeyValueObservationValues<Int64> {
        store.values(for: key, options: options, buffering: buffering)
    }

    func throttled(on queue: DispatchQueue, clock: ManualThrottleScheduler, _ handler: @escaping @Sendable (Int64) -> Void)
        -> KeyValueObservation
    {
        store._observe(key, throttledTo: .seconds(1), on: queue, isDuplicate: nil, scheduler: clock, handler: handler)
    }

    func throttledValues(clock: ManualThrottleScheduler) -> KeyValueThrottledValues<Int64> {
        store._values(for: key, throttledTo: .seconds(1), isDuplicate: nil, scheduler: clock)
    }

    func release() {
        try? object?.flush()
        object = nil
    }
}
