import Dispatch
import Foundation
import KeyValueObserving

/// `@unchecked Sendable`: in the contention scenarios each thread sets its own property (or the
/// same object's separate keys), never a property another thread touches.
final class TwoKeys: KeyValueObservable, @unchecked Sendable {
    @Observed var left = 0
    @Observed var right = 0
}

@inline(never) func setLeft(_ object: TwoKeys, _ value: Int) { object.left = value }
@inline(never) func setRight(_ object: TwoKeys, _ value: Int) { object.right = value }

/// A thread that runs one job at a time for the contention scenarios, kept for the whole run so
/// that starting a thread is not part of what is measured.
///
/// `@unchecked Sendable`: `job` is written before `start` is signalled and read after it. The thread
/// keeps its worker alive (a worker is never deallocated while its thread waits on its semaphores;
/// there is one per contention scenario, for the life of the process).
final class Worker: @unchecked Sendable {
    private let start = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private var job: (@Sendable () -> Void)?

    init() {
        let thread = Thread { [self] in
            while true {
                self.start.wait()
                self.job?()
                self.done.signal()
            }
        }
        thread.start()
    }

    /// Runs `first` on the worker and `second` on this thread, and waits for both.
    func inParallel(_ first: @escaping @Sendable () -> Void, _ second: () -> Void) {
        job = first
        start.signal()
        second()
        done.wait()
    }
}

extension Scenarios {
    /// How the cost of one set grows with observers, observed keys and objects, and under contention.
    static var scalingScenarios: [Scenario] {
        [1, 10, 100, 1_000].map { count -> Scenario in
            // One observer of one key on one object is also the first point of the keys and objects curves.
            let firstPoints: [ChartPoint] =
                count != 1
                ? []
                : [
                    ChartPoint(.observedKeys, ChartSeries.keyValueObserving, x: 1),
                    ChartPoint(.objects, ChartSeries.keyValueObserving, x: 1),
                ]
            return Scenario(
                name: "observers-\(count)", group: .scaling,
                summary: "one set with \(count) [.new] observer\(count == 1 ? "" : "s") on the key (per set)",
                baseline: count == 1 ? nil : "observers-1",
                comparisons: ["notificationcenter-observers-\(count)", "observation-observers-\(count)"],
                chart: [ChartPoint(.observers, ChartSeries.keyValueObserving, x: Double(count))] + firstPoints
            ) {
                let counter = Counter()
                let player = opaque(Player())
                let tokens = (0..<count).map { _ in
                    player.observe(\.volume, options: [.new]) { _, _ in counter.count &+= 1 }
                }
                return .loop(retaining: tokens, resetting: counter) { values in
                    for i in values { setVolume(player, Double(i)) }
                } check: { iterations, _ in
                    expectHandlerCalls(counter, count * iterations)
                }
            }
        }
            + [100, 10_000].map { count -> Scenario in
                Scenario(
                    name: "objects-\(count)", group: .scaling,
                    summary: "one set on each of \(formatCount(Double(count))) objects in turn, one [.new] observer each",
                    baseline: "observers-1",
                    comparisons: ["notificationcenter-objects-\(count)", "observation-objects-\(count)"],
                    chart: [ChartPoint(.objects, ChartSeries.keyValueObserving, x: Double(count))]
                ) {
                    let counter = Counter()
                    let players = (0..<count).map { _ in Player() }
                    let tokens = players.map { player in player.observe(\.volume, options: [.new]) { _, _ in counter.count &+= 1 } }
                    return .loop(retaining: tokens + players, resetting: counter) { values in
                        for i in values { setVolume(players[i % players.count], Double(i)) }
                    } check: { iterations, _ in
                        expectHandlerCalls(counter, iterations)
                    }
                }
            }
            + [10, 100].map { count -> Scenario in
                Scenario(
                    name: "observed-keys-\(count)", group: .scaling,
                    summary: "one set of the key observed last, on an object with \(count) observed keys (one observer each)",
                    baseline: "observers-1",
                    comparisons: ["notificationcenter-keys-\(count)", "observation-keys-\(count)"],
                    chart: [ChartPoint(.observedKeys, ChartSeries.keyValueObserving, x: Double(count))]
                ) {
                    let counter = Counter()
                    let form = opaque(WideForm())
                    // k0, the key that is set, is observed last: the registry looks through the other
                    // keys' slots first.
                    let keys = WideForm.keys[1..<count] + [WideForm.keys[0]]
                    let tokens = keys.map { key in form.observe(key, options: [.new]) { _, _ in counter.count &+= 1 } }
                    // Teach the registry every key's storage (the first set of each does).
                    for key in keys { form[keyPath: key] = -1 }
                    return .loop(retaining: tokens, resetting: counter) { values in
                        for i in values { setK0(form, i) }
                    } check: { iterations, _ in
                        expectHandlerCalls(counter, iterations)
                    }
                }
            } + [
                Scenario(
                    name: "contention-different-objects", group: .scaling,
                    summary: "two threads each setting their own object, one observer each (per set, both threads)",
                    baseline: "observers-1"
                ) {
                    let counter = Locked(0)
                    let worker = Worker()
                    let objects = [TwoKeys(), TwoKeys()]
                    let tokens = objects.map { object in object.observe(\.left, options: [.new]) { _, _ in counter.withLock { $0 += 1 } } }
                    return Workload(retaining: tokens + objects + [worker]) { iterations in
                        counter.withLock { $0 = 0 }
                        let half = max(iterations / 2, 1)
                        let first = UncheckedBox(value: objects[0])
                        worker.inParallel(
                            { for i in 0..<half { setLeft(first.value, i) } }, { for i in 0..<half { setLeft(objects[1], i) } })
                    } check: { iterations in
                        counter.current == 2 * max(iterations / 2, 1) ? nil : "handlers ran \(counter.current) times"
                    }
                },
                Scenario(
                    name: "contention-same-object", group: .scaling,
                    summary: "two threads setting different keys of one object, one observer per key (per set, both threads)",
                    baseline: "contention-different-objects"
                ) {
                    let counter = Locked(0)
                    let worker = Worker()
                    let object = TwoKeys()
                    let tokens = [
                        object.observe(\.left, options: [.new]) { _, _ in counter.withLock { $0 += 1 } },
                        object.observe(\.right, options: [.new]) { _, _ in counter.withLock { $0 += 1 } },
                    ]
                    return Workload(retaining: tokens + [object, worker]) { iterations in
                        counter.withLock { $0 = 0 }
                        let half = max(iterations / 2, 1)
                        let shared = UncheckedBox(value: object)
                        worker.inParallel({ for i in 0..<half { setLeft(shared.value, i) } }, { for i in 0..<half { setRight(object, i) } })
                    } check: { iterations in
                        counter.current == 2 * max(iterations / 2, 1) ? nil : "handlers ran \(counter.current) times"
                    }
                },
            ]
    }
}

/// Hands a non-`Sendable` object to another thread. `@unchecked Sendable`: each scenario documents
/// which thread touches which property.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
}
