import Foundation
import KeyValueObserving
import Observation

// MARK: The observed classes: defined here, in a client module, as real users define them

final class Player: KeyValueObservable {
    @Observed var volume = 0.5
    @Observed var other = 0
}

class Base: KeyValueObservable {
    @Observed var x = 0
}

final class Sub: Base {}

/// A dependent key: `label` is computed from `volume`.
final class LabelledPlayer: KeyValueObservable {
    // Puts `volume` at another offset than `Player.volume`: otherwise the optimiser merges the two
    // `setVolume` functions into one taking the specialised set path as an argument, and the
    // unobserved set measures a thunk.
    let channel = 0
    @Observed var volume = 0.5
    var label: Double { volume * 100 }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\LabelledPlayer.label: [\LabelledPlayer.volume]]
    }
}

/// A 2-segment chain: `deck.track?.volume`.
final class Deck: KeyValueObservable {
    @Observed var track: Player? = nil
}

final class PlainPlayer {
    var volume = 0.5
}

final class DidSetPlayer {
    let onChange: (Double) -> Void
    var volume = 0.5 {
        didSet { onChange(volume) }
    }

    init(onChange: @escaping (Double) -> Void) {
        self.onChange = onChange
    }
}

// Unchecked: the benchmark touches it from one thread only; `Sendable` is needed because
// `withObservationTracking`'s `onChange` closure, which re-arms the tracking, is `@Sendable`.
@Observable
final class ObservablePlayer: @unchecked Sendable {
    var volume = 0.5
}

/// What handlers record. Unchecked `Sendable` and unchecked exclusivity: every scenario runs on the
/// main thread only (handlers are called synchronously, on the setting thread), and the fields are
/// never accessed re-entrantly; the dynamic exclusivity check would otherwise be part of every
/// handler's cost in ours and in the baselines alike.
final class Counter: @unchecked Sendable {
    @exclusivity(unchecked) var count = 0
    @exclusivity(unchecked) var last: Double? = nil

    func reset() {
        count = 0
        last = nil
    }

    /// One handler call that delivered `value`.
    @inline(__always) func record(_ value: Double?) {
        count &+= 1
        last = value
    }
}

/// Hands out consecutive integers across batches, so that no set assigns the value already stored
/// (Observation does not notify an assignment of an equal value; the others would not care).
final class Values {
    /// The last value handed out.
    private(set) var last = -1

    func next(_ count: Int) -> Range<Int> {
        defer { last += count }
        return (last + 1)..<(last + 1 + count)
    }
}

// MARK: The operations, behind calls the optimiser may not inline, so nothing is folded away

@inline(never) func setVolume(_ player: PlainPlayer, _ value: Double) { player.volume = value }
@inline(never) func setVolume(_ player: DidSetPlayer, _ value: Double) { player.volume = value }
@inline(never) func setVolume(_ player: ObservablePlayer, _ value: Double) { player.volume = value }
@inline(never) func setVolume(_ player: Player, _ value: Double) { player.volume = value }
@inline(never) func setOther(_ player: Player, _ value: Int) { player.other = value }
@inline(never) func getVolume(_ player: Player) -> Double { player.volume }
@inline(never) func setX(_ sub: Sub, _ value: Int) { sub.x = value }
@inline(never) func setVolume(_ player: LabelledPlayer, _ value: Double) { player.volume = value }
@inline(never) func setTrack(_ deck: Deck, _ track: Player?) { deck.track = track }

/// Tracks `model.volume` once; the change handler counts and tracks again, so every set fires.
func trackVolume(of model: ObservablePlayer, counting counter: Counter) {
    withObservationTracking {
        _ = model.volume
    } onChange: {
        counter.count &+= 1
        trackVolume(of: model, counting: counter)
    }
}

// MARK: Checks

/// `nil` when the handlers ran `expected` times in all.
func expectHandlerCalls(_ counter: Counter, _ expected: Int) -> String? {
    counter.count == expected ? nil : "handlers ran \(counter.count) times, expected \(expected)"
}

private func expectCalls(_ counter: Counter, _ expected: Int, last: Double?) -> String? {
    if counter.count != expected { return "handler ran \(counter.count) times, expected \(expected)" }
    if counter.last != last {
        return "last delivered value is \(counter.last.map { "\($0)" } ?? "nil"), expected \(last.map { "\($0)" } ?? "nil")"
    }
    return nil
}

private func expectVolume(_ volume: Double, last: Int) -> String? {
    volume == Double(last) ? nil : "volume is \(volume), expected \(last)"
}

// MARK: The scenarios

enum Scenarios {
    static func named(_ name: String) -> Scenario? {
        list.first { $0.name == name }
    }

    /// Every scenario, in run order (baselines first, so ratios compare within one run).
    static var list: [Scenario] {
        [
            // Baselines
            Scenario(
                name: "plain-set", group: .baselines,
                summary: "stored Double set on a final class, through a non-inlined call (the floor)"
            ) {
                let player = opaque(PlainPlayer())
                return .loop { values in
                    for i in values { setVolume(player, Double(i)) }
                } check: { iterations, last in
                    expectVolume(player.volume, last: last)
                }
            },
            Scenario(
                name: "didset-closure", group: .baselines,
                summary: "didSet { closure(volume) } calling a stored closure (the floor of an observed set)"
            ) {
                let counter = Counter()
                let player = opaque(
                    DidSetPlayer { value in counter.record(value) })
                return .loop(resetting: counter) { values in
                    for i in values { setVolume(player, Double(i)) }
                } check: { iterations, last in
                    expectCalls(counter, iterations, last: Double(last))
                }
            },
            Scenario(
                name: "observation-rearmed", group: .baselines,
                summary: "@Observable set; onChange re-arms withObservationTracking (set + re-arm)"
            ) {
                let counter = Counter()
                let model = opaque(ObservablePlayer())
                trackVolume(of: model, counting: counter)
                return .loop(resetting: counter) { values in
                    for i in values { setVolume(model, Double(i)) }
                } check: { iterations, last in
                    if counter.count != iterations { return "onChange ran \(counter.count) times, expected \(iterations)" }
                    return expectVolume(model.volume, last: last)
                }
            },
            Scenario(
                name: "notificationcenter-post", group: .baselines,
                summary: "NotificationCenter.post(name:object:) to one block observer (no userInfo)"
            ) {
                let counter = Counter()
                let center = NotificationCenter()
                let name = Notification.Name("kvo-bench.volume")
                let sender = opaque(PlainPlayer())
                let observer = center.addObserver(forName: name, object: sender, queue: nil) { _ in
                    counter.count &+= 1
                }
                return .loop(retaining: [center, observer as AnyObject], resetting: counter) { values in
                    for _ in values { center.post(name: name, object: sender) }
                } check: { iterations, _ in
                    expectCalls(counter, iterations, last: nil)
                }
            },

            // Ours: the set path
            Scenario(
                name: "unobserved-set", group: .setPath,
                summary: "@Observed set, no observer ever registered on the object",
                baseline: "plain-set", target: .ratioAtMost(2)
            ) {
                let player = opaque(Player())
                return .loop { values in
                    for i in values { setVolume(player, Double(i)) }
                } check: { iterations, last in
                    expectVolume(player.volume, last: last)
                }
            },
            Scenario(
                name: "unobserved-get", group: .setPath,
                summary: "@Observed get, no observer ever registered on the object"
            ) {
                let player = opaque(Player())
                setVolume(player, 0.25)
                var sum = 0.0
                return .loop { values in
                    var total = 0.0
                    for _ in values { total += getVolume(player) }
                    sum = total
                } check: { iterations, _ in
                    sum == 0.25 * Double(iterations) ? nil : "the reads summed to \(sum), expected \(0.25 * Double(iterations))"
                }
            },
            observedSet(
                "observed-set-new", options: [.new], summary: "one observe(\\.volume, options: [.new]) handler",
                target: .ratioAtMost(4), comparisons: ["observation-rearmed", "notificationcenter-post"]),
            observedSet("observed-set-none", options: [], summary: "one handler, options []"),
            observedSet("observed-set-old-new", options: [.old, .new], summary: "one handler, options [.old, .new]"),
            observedSet(
                "observed-set-prior", options: [.prior, .old, .new],
                summary: "one handler, options [.prior, .old, .new] (two calls per set)"),
            Scenario(
                name: "observed-other-key", group: .setPath,
                summary: "set `other` of an object whose `volume` is observed (and has been set once)",
                baseline: "unobserved-set"
            ) {
                let counter = Counter()
                let player = opaque(Player())
                let token = player.observe(\.volume, options: [.new]) { _, change in counter.record(change.newValue) }
                // The registry learns where `volume` is stored from its first set; until then a set
                // of any other property takes the lock to find out whether it is `volume`.
                setVolume(player, 0.25)
                counter.reset()
                return .loop(retaining: [token], resetting: counter) { values in
                    for i in values { setOther(player, i) }
                } check: { iterations, last in
                    if counter.count != 0 { return "the volume handler ran \(counter.count) times, expected 0" }
                    return player.other == last ? nil : "other is \(player.other), expected \(last)"
                }
            },
            observedSet(
                "observed-set-10-observers", options: [.new], observers: 10,
                summary: "ten [.new] handlers on the same key", baseline: "observed-set-new"),
            Scenario(
                name: "inherited-key", group: .setPath,
                summary: "observe \\Sub.x (declared in a superclass) with [.new]: the key-path route",
                baseline: "observed-set-new"
            ) {
                let counter = Counter()
                let sub = opaque(Sub())
                let token = sub.observe(\Sub.x, options: [.new]) { _, change in counter.record(change.newValue.map(Double.init)) }
                return .loop(retaining: [token], resetting: counter) { values in
                    for i in values { setX(sub, i) }
                } check: { iterations, last in
                    expectCalls(counter, iterations, last: Double(last))
                }
            },

            // Ours: registration
            // Ours: dependent keys and chains
            Scenario(
                name: "dependent-key-set", group: .dependentAndChains,
                summary: "set an input; one [.new] observer of the dependent key (label = volume × 100)",
                baseline: "observed-set-new", target: .ratioAtMost(3)
            ) {
                let counter = Counter()
                let player = opaque(LabelledPlayer())
                let token = player.observe(\.label, options: [.new]) { _, change in counter.record(change.newValue) }
                return .loop(retaining: [token], resetting: counter) { values in
                    for i in values { setVolume(player, Double(i)) }
                } check: { iterations, last in
                    expectCalls(counter, iterations, last: Double(last) * 100)
                }
            },
            Scenario(
                name: "chain-set", group: .dependentAndChains,
                summary: "set the end of a 2-segment chain (deck.track?.volume), one [.new] observer",
                baseline: "observed-set-new"
            ) {
                let counter = Counter()
                let deck = opaque(Deck())
                let track = Player()
                deck.track = track
                let token = deck.observe(\.track?.volume, options: [.new]) { _, change in counter.record(change.newValue ?? nil) }
                let values = Values()
                // The chain holds its root weakly: keep the deck alive with the token.
                return Workload(retaining: [token, track, deck]) { iterations in
                    counter.reset()
                    for i in values.next(iterations) { setVolume(track, Double(i)) }
                } check: { iterations in
                    expectCalls(counter, iterations, last: Double(values.last))
                }
            },
            Scenario(
                name: "chain-replace-intermediate", group: .dependentAndChains,
                summary: "replace the intermediate of a 2-segment chain (re-targets the observation), one [.new] observer",
                baseline: "observed-set-new"
            ) {
                let counter = Counter()
                let deck = opaque(Deck())
                let tracks = [Player(), Player()]
                tracks[0].volume = 0.1
                tracks[1].volume = 0.2
                let token = deck.observe(\.track?.volume, options: [.new]) { _, change in counter.record(change.newValue ?? nil) }
                return Workload(retaining: [token, deck] + tracks) { iterations in
                    counter.reset()
                    for i in 0..<iterations { setTrack(deck, tracks[i & 1]) }
                } check: { iterations in
                    expectCalls(counter, iterations, last: iterations == 0 ? nil : tracks[(iterations - 1) & 1].volume)
                }
            },

        ] + sequenceScenarios + scalingScenarios + scalingBaselineScenarios + progressScenarios + [
            Scenario(
                name: "register-invalidate", group: .registration,
                summary: "observe(\\.volume, [.new]) + invalidate(), on an object with no other observer",
                target: .nanosecondsAtMost(1000)
            ) {
                let operations = Counter()
                let deliveries = Counter()
                let player = opaque(Player())
                return Workload { iterations in
                    operations.reset()
                    for _ in 0..<iterations {
                        let token = player.observe(\.volume, options: [.new]) { _, _ in deliveries.count &+= 1 }
                        token.invalidate()
                        operations.count &+= 1
                    }
                } check: { iterations in
                    if operations.count != iterations { return "\(operations.count) registrations, expected \(iterations)" }
                    deliveries.reset()
                    setVolume(player, 1)
                    return deliveries.count == 0 ? nil : "an invalidated handler ran \(deliveries.count) times"
                }
            }
        ] + defaultsScenarios + trackingScenarios
    }

    /// `observers` handlers with `options` on `Player.volume`, counting calls and recording the
    /// last delivered new value.
    private static func observedSet(
        _ name: String,
        options: KeyValueObservingOptions,
        observers: Int = 1,
        summary: String,
        baseline: String = "didset-closure",
        target: Scenario.Target? = nil,
        comparisons: [String] = []
    ) -> Scenario {
        Scenario(
            name: name, group: .setPath, summary: summary,
            baseline: baseline, target: target, comparisons: comparisons
        ) {
            let counter = Counter()
            let player = opaque(Player())
            let tokens = (0..<observers).map { _ in
                player.observe(\.volume, options: options) { _, change in counter.record(change.newValue) }
            }
            let callsPerSet = options.contains(.prior) ? 2 * observers : observers
            let expectsValue = options.contains(.new)
            return .loop(retaining: tokens, resetting: counter) { values in
                for i in values { setVolume(player, Double(i)) }
            } check: { iterations, last in
                expectCalls(counter, callsPerSet * iterations, last: expectsValue ? Double(last) : nil)
            }
        }
    }
}
