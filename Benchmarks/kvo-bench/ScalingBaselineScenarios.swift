import Foundation
import Observation

/// Tracks what `read` reads; the change handler counts and tracks again, so every set fires.
func trackRepeatedly(_ read: @escaping @Sendable () -> Void, counting counter: Counter) {
    withObservationTracking(read) {
        counter.count &+= 1
        trackRepeatedly(read, counting: counter)
    }
}

extension Scenarios {
    /// The scaling curves of the alternatives, point for point with ours: `NotificationCenter` posts
    /// and Swift's Observation with re-armed tracking, as observers, keys and objects grow.
    static var scalingBaselineScenarios: [Scenario] {
        let observers = [1, 10, 100, 1_000].flatMap { count -> [Scenario] in
            let firstPoints: (String) -> [ChartPoint] = { series in
                count == 1 ? [ChartPoint(.observedKeys, series, x: 1), ChartPoint(.objects, series, x: 1)] : []
            }
            return [
                Scenario(
                    name: "notificationcenter-observers-\(count)", group: .scaling,
                    summary: "baseline: post to \(count) block observer\(count == 1 ? "" : "s") of the name and sender (per post)",
                    baseline: count == 1 ? nil : "notificationcenter-observers-1",
                    chart: [ChartPoint(.observers, ChartSeries.notificationCenter, x: Double(count))]
                        + firstPoints(ChartSeries.notificationCenter)
                ) {
                    let counter = Counter()
                    let center = NotificationCenter()
                    let name = Notification.Name("kvo-bench.volume")
                    let sender = opaque(PlainPlayer())
                    let tokens = (0..<count).map { _ in
                        center.addObserver(forName: name, object: sender, queue: nil) { _ in counter.count &+= 1 }
                    }
                    return .loop(retaining: [center, sender] + tokens.map { $0 as AnyObject }, resetting: counter) { values in
                        for _ in values { center.post(name: name, object: sender) }
                    } check: { iterations, _ in
                        expectHandlerCalls(counter, count * iterations)
                    }
                },
                Scenario(
                    name: "observation-observers-\(count)", group: .scaling,
                    summary:
                        "baseline: @Observable set with \(count) re-armed withObservationTracking observer\(count == 1 ? "" : "s") (per set)",
                    baseline: count == 1 ? nil : "observation-observers-1",
                    chart: [ChartPoint(.observers, ChartSeries.observation, x: Double(count))] + firstPoints(ChartSeries.observation)
                ) {
                    let counter = Counter()
                    let model = opaque(ObservablePlayer())
                    for _ in 0..<count { trackVolume(of: model, counting: counter) }
                    return .loop(retaining: [model], resetting: counter) { values in
                        for i in values { setVolume(model, Double(i)) }
                    } check: { iterations, _ in
                        expectHandlerCalls(counter, count * iterations)
                    }
                },
            ]
        }
        let keys = [10, 100].flatMap { count -> [Scenario] in
            [
                Scenario(
                    name: "notificationcenter-keys-\(count)", group: .scaling,
                    summary: "baseline: post the name observed last of \(count) names, one block observer per name, same sender",
                    chart: [ChartPoint(.observedKeys, ChartSeries.notificationCenter, x: Double(count))]
                ) {
                    let counter = Counter()
                    let center = NotificationCenter()
                    let names = (1..<count).map { Notification.Name("kvo-bench.k\($0)") } + [Notification.Name("kvo-bench.k0")]
                    let sender = opaque(PlainPlayer())
                    let tokens = names.map { name in
                        center.addObserver(forName: name, object: sender, queue: nil) { _ in counter.count &+= 1 }
                    }
                    let posted = names.last!
                    return .loop(retaining: [center, sender] + tokens.map { $0 as AnyObject }, resetting: counter) { values in
                        for _ in values { center.post(name: posted, object: sender) }
                    } check: { iterations, _ in
                        expectHandlerCalls(counter, iterations)
                    }
                },
                Scenario(
                    name: "observation-keys-\(count)", group: .scaling,
                    summary:
                        "baseline: set the property tracked last of \(count) @Observable properties, each with its own re-armed observer",
                    chart: [ChartPoint(.observedKeys, ChartSeries.observation, x: Double(count))]
                ) {
                    let counter = Counter()
                    let form = opaque(ObservableWideForm())
                    let reads = everyPropertyRead(of: form)
                    for read in reads[1..<count] + [reads[0]] { trackRepeatedly(read, counting: counter) }
                    return .loop(retaining: [form], resetting: counter) { values in
                        for i in values { setK0(form, i) }
                    } check: { iterations, _ in
                        expectHandlerCalls(counter, iterations)
                    }
                },
            ]
        }
        let objects = [100, 10_000].flatMap { count -> [Scenario] in
            [
                Scenario(
                    name: "notificationcenter-objects-\(count)", group: .scaling,
                    summary: "baseline: post for each of \(formatCount(Double(count))) senders in turn, one block observer per sender",
                    chart: [ChartPoint(.objects, ChartSeries.notificationCenter, x: Double(count))]
                ) {
                    let counter = Counter()
                    let center = NotificationCenter()
                    let name = Notification.Name("kvo-bench.volume")
                    let senders = (0..<count).map { _ in PlainPlayer() }
                    let tokens = senders.map { sender in
                        center.addObserver(forName: name, object: sender, queue: nil) { _ in counter.count &+= 1 }
                    }
                    return Workload(retaining: [center] + senders + tokens.map { $0 as AnyObject }) { iterations in
                        counter.reset()
                        for i in 0..<iterations { center.post(name: name, object: senders[i % count]) }
                    } check: { iterations in
                        expectHandlerCalls(counter, iterations)
                    }
                },
                Scenario(
                    name: "observation-objects-\(count)", group: .scaling,
                    summary: "baseline: set each of \(formatCount(Double(count))) @Observable objects in turn, one re-armed observer each",
                    chart: [ChartPoint(.objects, ChartSeries.observation, x: Double(count))]
                ) {
                    let counter = Counter()
                    let models = (0..<count).map { _ in ObservablePlayer() }
                    for model in models { trackVolume(of: model, counting: counter) }
                    return .loop(retaining: models, resetting: counter) { values in
                        for i in values { setVolume(models[i % count], Double(i)) }
                    } check: { iterations, _ in
                        expectHandlerCalls(counter, iterations)
                    }
                },
            ]
        }
        return observers + keys + objects
    }
}
