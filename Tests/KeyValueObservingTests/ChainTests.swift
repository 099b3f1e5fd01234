import KeyValueObserving
import Testing

enum ItemStatus: Equatable, Sendable {
    case loading, ready, failed
}

/// `@unchecked Sendable` in tests only: each test changes an object from one thread at a time.
final class PlayerItem: KeyValueObservable, @unchecked Sendable {
    @Observed var status = ItemStatus.loading
    @Observed var asset: Asset? = nil
}

final class Asset: KeyValueObservable, @unchecked Sendable {
    @Observed var duration = 0.0

    init(duration: Double) {
        self.duration = duration
    }
}

final class MediaPlayer: KeyValueObservable, @unchecked Sendable {
    @Observed var currentItem: PlayerItem? = nil
    @Observed var playlist = Playlist()
}

final class Playlist: KeyValueObservable, @unchecked Sendable {
    @Observed var title = "Untitled"
}

final class UserSettings: KeyValueObservable, @unchecked Sendable {
    @Observed var username = "ada"
}

final class AppState: KeyValueObservable, @unchecked Sendable {
    @Observed var settings = UserSettings()
    var greeting: String { "Hello, \(settings.username)!" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\AppState.greeting: [\AppState.settings.username]]
    }
}

@Suite("Key-path chains through nested objects")
struct ChainTests {
    @Test func thePlayerScenario() {
        let player = MediaPlayer()
        let statuses = Locked<[ItemStatus?]>([])
        let token = player.observe(\.currentItem?.status, options: [.initial, .new]) { _, change in
            statuses.append(change.newValue ?? nil)
        }
        let first = PlayerItem()
        player.currentItem = first  // item set: .loading
        first.status = .ready  // change on it
        let second = PlayerItem()
        player.currentItem = second  // replaced: .loading, one value
        first.status = .failed  // the old item: not reported
        second.status = .ready
        player.currentItem = nil  // nil item: nil
        #expect(statuses.current == [nil, .loading, .ready, .loading, .ready, nil])
        token.invalidate()
    }

    @Test func oneReplacementDeliversOneValueOrTwoWithPrior() {
        let player = MediaPlayer()
        player.currentItem = PlayerItem()
        let values = Locked<[KeyValueObservedChange<ItemStatus?>]>([])
        let token = player.observe(\.currentItem?.status, options: [.prior, .old, .new]) { _, change in
            values.append(change)
        }
        player.currentItem = PlayerItem()
        // Equal values are delivered, as for any assignment: one prior, one after.
        #expect(
            values.current == [
                KeyValueObservedChange(oldValue: .some(.loading), isPrior: true),
                KeyValueObservedChange(newValue: .some(.loading), oldValue: .some(.loading)),
            ])
        token.invalidate()
    }

    @Test func duplicatesAreRemovedByComparingOldAndNew() {
        let player = MediaPlayer()
        let distinct = Locked<[ItemStatus?]>([])
        let token = player.observe(\.currentItem?.status, options: [.old, .new]) { _, change in
            // The way to drop duplicates: every delivery carries both values.
            guard change.oldValue != change.newValue else { return }
            distinct.append(change.newValue ?? nil)
        }
        let first = PlayerItem()
        player.currentItem = first  // nil → loading
        player.currentItem = PlayerItem()  // loading → loading: dropped
        player.currentItem?.status = .ready
        player.currentItem?.status = .ready  // ready → ready: dropped
        #expect(distinct.current == [.loading, .ready])
        token.invalidate()
    }

    @Test func theReplacedIntermediateIsNotRetained() {
        let player = MediaPlayer()
        weak var weakItem: PlayerItem?
        let token = player.observe(\.currentItem?.status) { _, _ in }
        do {
            let item = PlayerItem()
            weakItem = item
            player.currentItem = item
            player.currentItem = PlayerItem()
        }
        #expect(weakItem == nil)
        token.invalidate()
    }

    @Test func theChainDoesNotRetainTheRootOrTheIntermediate() {
        weak var weakPlayer: MediaPlayer?
        weak var weakItem: PlayerItem?
        var token: KeyValueObservation?
        do {
            let player = MediaPlayer()
            let item = PlayerItem()
            weakPlayer = player
            weakItem = item
            player.currentItem = item
            token = player.observe(\.currentItem?.status) { _, _ in }
        }
        #expect(weakPlayer == nil)
        #expect(weakItem == nil)
        token?.invalidate()
    }

    @Test func threeSegmentsWithOptionalIntermediates() {
        let player = MediaPlayer()
        let durations = Locked<[Double?]>([])
        let token = player.observe(\.currentItem?.asset?.duration, options: [.initial, .new]) { _, change in
            durations.append(change.newValue ?? nil)
        }
        let item = PlayerItem()
        player.currentItem = item  // item without asset: nil
        let asset = Asset(duration: 3)
        item.asset = asset  // 3
        asset.duration = 4  // 4
        item.asset = Asset(duration: 5)  // 5
        asset.duration = 6  // old asset: not reported
        player.currentItem = nil  // nil
        #expect(durations.current == [nil, nil, 3, 4, 5, nil])
        token.invalidate()
    }

    @Test func nonOptionalIntermediates() {
        let player = MediaPlayer()
        let titles = Locked<[String?]>([])
        let token = player.observe(\.playlist.title, options: [.old, .new]) { _, change in
            titles.append("\(change.oldValue!)→\(change.newValue!)")
        }
        player.playlist.title = "Road trip"
        let other = Playlist()
        other.title = "Focus"
        player.playlist = other
        #expect(titles.current == ["Untitled→Road trip", "Road trip→Focus"])
        token.invalidate()
    }

    @Test func invalidatingStopsEveryLevel() {
        let player = MediaPlayer()
        let item = PlayerItem()
        player.currentItem = item
        let calls = Counter(0)
        let token = player.observe(\.currentItem?.status) { _, _ in calls.increment() }
        #expect(player.observationInfo.observerCountsByKeyPath.count == 1)
        #expect(item.observationInfo.pathFollowerCount == 1)
        token.invalidate()
        item.status = .ready
        player.currentItem = nil
        #expect(calls.current == 0)
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
        #expect(item.observationInfo.isEmpty)
    }

    @Test func aDependentKeyMayDependOnAChain() {
        let state = AppState()
        let greetings = Locked<[String]>([])
        let token = state.observe(\.greeting, options: [.old, .new]) { _, change in
            greetings.append("\(change.oldValue!) ⇒ \(change.newValue!)")
        }
        state.settings.username = "grace"  // a change inside the child notifies the parent's key
        let replacement = UserSettings()
        replacement.username = "linus"
        let old = state.settings
        state.settings = replacement  // replacing the child notifies too
        old.username = "nobody"  // the old child no longer does
        replacement.username = "ken"
        #expect(
            greetings.current == [
                "Hello, ada! ⇒ Hello, grace!",
                "Hello, grace! ⇒ Hello, linus!",
                "Hello, linus! ⇒ Hello, ken!",
            ])
        token.invalidate()
        #expect(state.observationInfo.observerCountsByKeyPath.isEmpty)
        #expect(replacement.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    /// Registering reads the chain's properties, so by Swift's rules it happens where they are
    /// written: each of threads 0–3 owns a player, registers chain observers on it and replaces its
    /// items, while threads 4–7 invalidate those observers; deliveries and re-targeting race with
    /// invalidation.
    @Test func intermediatesReplacedWhileOtherThreadsInvalidate() {
        let players = (0..<4).map { _ in UncheckedBox(MediaPlayer()) }
        let pool = Locked<[KeyValueObservation]>([])
        let wrong = Locked<[String]>([])
        let deliveries = Counter(0)
        let ownersDone = Counter(0)
        TestThread.run(8) { me in
            if me < 4 {
                let player = players[me].value
                for step in 0..<1_500 {
                    switch step % 4 {
                    case 0:
                        pool.append(
                            player.observe(\.currentItem?.status, options: [.new]) { player, change in
                                deliveries.increment()
                                if change.newValue ?? nil != player.currentItem?.status {
                                    wrong.append("delivered \(String(describing: change.newValue))")
                                }
                            })
                    case 1:
                        player.currentItem = PlayerItem()
                    default:
                        player.currentItem?.status = step % 2 == 0 ? .ready : .failed
                    }
                }
                ownersDone.increment()
                return
            }
            while ownersDone.current < 4 || !pool.current.isEmpty {
                pool.withLock { $0.isEmpty ? nil : $0.removeFirst() }?.invalidate()
            }
        }
        #expect(wrong.current == [])
        #expect(deliveries.current > 0)
        #expect(players.allSatisfy { $0.value.observationInfo.observerCountsByKeyPath.isEmpty })
        #expect(players.allSatisfy { $0.value.currentItem?.observationInfo.observerCountsByKeyPath.isEmpty ?? true })
    }
}

/// Calls the deprecated chain overloads without a deprecation warning (warnings are errors in CI):
/// a deprecated witness of a requirement that is not deprecated.
private protocol LegacyChainCalls {
    func observeStatus(of player: MediaPlayer, _ handler: @escaping @Sendable (ItemStatus?) -> Void) -> KeyValueObservation
    func observeDuration(of player: MediaPlayer, _ handler: @escaping @Sendable (Double?) -> Void) -> KeyValueObservation
    func observeTitle(of player: MediaPlayer, _ handler: @escaping @Sendable (String) -> Void) -> KeyValueObservation
    func statusValues(of player: MediaPlayer) -> KeyValueObservationValues<ItemStatus?>
}

private struct LegacyChains: LegacyChainCalls {
    @available(*, deprecated)
    func observeStatus(of player: MediaPlayer, _ handler: @escaping @Sendable (ItemStatus?) -> Void) -> KeyValueObservation {
        player.observe(\.currentItem, \.status, options: [.initial, .new]) { _, change in handler(change.newValue ?? nil) }
    }

    @available(*, deprecated)
    func observeDuration(of player: MediaPlayer, _ handler: @escaping @Sendable (Double?) -> Void) -> KeyValueObservation {
        player.observe(\.currentItem, \.asset, \.duration, options: [.new]) { _, change in handler(change.newValue ?? nil) }
    }

    @available(*, deprecated)
    func observeTitle(of player: MediaPlayer, _ handler: @escaping @Sendable (String) -> Void) -> KeyValueObservation {
        player.observe(\.playlist, \.title, options: [.new]) { _, change in handler(change.newValue!) }
    }

    @available(*, deprecated)
    func statusValues(of player: MediaPlayer) -> KeyValueObservationValues<ItemStatus?> {
        player.values(for: \.currentItem, \.status)
    }
}

@Suite("Deprecated chain overloads")
struct DeprecatedChainTests {
    private let legacy: any LegacyChainCalls = LegacyChains()

    @Test func theChainOverloadsStillFollowTheirPaths() async {
        let player = MediaPlayer()
        let statuses = Locked<[ItemStatus?]>([])
        let durations = Locked<[Double?]>([])
        let titles = Locked<[String]>([])
        let tokens = [
            legacy.observeStatus(of: player) { statuses.append($0) },
            legacy.observeDuration(of: player) { durations.append($0) },
            legacy.observeTitle(of: player) { titles.append($0) },
        ]
        let item = PlayerItem()
        player.currentItem = item
        item.status = .ready
        item.asset = Asset(duration: 3)
        player.playlist.title = "Mix"
        #expect(statuses.current == [nil, .loading, .ready])
        #expect(durations.current == [nil, 3])
        #expect(titles.current == ["Mix"])
        tokens.forEach { $0.invalidate() }
        var values = legacy.statusValues(of: player).makeAsyncIterator()
        #expect(await values.next() == .ready)
    }
}
