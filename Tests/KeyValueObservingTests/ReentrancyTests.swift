import KeyValueObserving
import Testing

@Suite("Handlers that change the object and the observers")
struct ReentrancyTests {
    @Test func aHandlerMaySetTheSamePropertyAndTheNestedChangeIsDeliveredDepthFirst() {
        let player = AudioPlayer()
        let log = Locked<[String]>([])
        let clamp = player.observe(\.volume, options: [.old, .new]) { player, change in
            log.append("clamp \(change.oldValue!)→\(change.newValue!)")
            if change.newValue! > 1 { player.volume = 1 }
        }
        let watcher = player.observe(\.volume, options: [.new]) { player, change in
            log.append("watch \(change.newValue!) stored \(player.volume)")
        }
        player.volume = 3
        #expect(player.volume == 1)
        // The nested change reaches every observer before the outer change reaches the second one,
        // and the outer delivery still carries its own values.
        #expect(
            log.current == [
                "clamp 0.5→3.0",
                "clamp 3.0→1.0",
                "watch 1.0 stored 1.0",
                "watch 3.0 stored 1.0",
            ])
        clamp.invalidate()
        watcher.invalidate()
    }

    @Test func aHandlerMaySetAnotherProperty() {
        let player = AudioPlayer()
        let log = Locked<[String]>([])
        let mute = player.observe(\.volume, options: [.new]) { player, change in
            log.append("volume \(change.newValue!)")
            player.isMuted = change.newValue! == 0
        }
        let muted = player.observe(\.isMuted, options: [.new]) { _, change in log.append("muted \(change.newValue!)") }
        player.volume = 0
        #expect(log.current == ["volume 0.0", "muted true"])
        mute.invalidate()
        muted.invalidate()
    }

    @Test func anObserverAddedByAHandlerGetsTheNextChangeNotTheCurrentOne() {
        let player = AudioPlayer()
        let late = Locked<[Double?]>([])
        let added = Locked<[KeyValueObservation]>([])
        let adder = player.observe(\.volume) { player, _ in
            guard added.current.isEmpty else { return }
            let token = player.observe(\.volume, options: [.new]) { _, change in late.append(change.newValue) }
            added.append(token)
        }
        player.volume = 0.1
        #expect(late.current == [])
        player.volume = 0.2
        #expect(late.current == [0.2])
        adder.invalidate()
        added.current.forEach { $0.invalidate() }
    }

    @Test func aHandlerMayInvalidateItsOwnToken() {
        let player = AudioPlayer()
        let calls = Counter(0)
        let holder = Locked<KeyValueObservation?>(nil)
        holder.withLock { slot in
            slot = player.observe(\.volume) { _, _ in
                calls.increment()
                holder.withLock { $0 }?.invalidate()
            }
        }
        player.volume = 0.1
        player.volume = 0.2
        #expect(calls.current == 1)
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    @Test func anObserverInvalidatedDuringADeliveryIsNotCalledForIt() {
        let player = AudioPlayer()
        let secondCalls = Counter(0)
        let second = Locked<KeyValueObservation?>(nil)
        let first = player.observe(\.volume) { _, _ in second.withLock { $0 }?.invalidate() }
        second.withLock { slot in
            slot = player.observe(\.volume, options: [.prior]) { _, _ in secondCalls.increment() }
        }
        // The first observer's prior notification does not exist, so the second gets its prior one;
        // the first then invalidates it during the change notification, before its turn.
        player.volume = 0.3
        #expect(secondCalls.current == 1)
        first.invalidate()
    }

    @Test func releasingAHandlerMayRunCodeThatObservesAgain() {
        // The handler's captures are released outside the registry's lock: a deinit that registers
        // or invalidates must not deadlock.
        final class Reregisters: @unchecked Sendable {
            // Invariant: only touched on the test's thread.
            let player: AudioPlayer
            let tokens: Locked<[KeyValueObservation]>
            init(player: AudioPlayer, tokens: Locked<[KeyValueObservation]>) {
                self.player = player
                self.tokens = tokens
            }
            deinit {
                tokens.append(player.observe(\.volume) { _, _ in })
            }
        }
        let player = AudioPlayer()
        let tokens = Locked<[KeyValueObservation]>([])
        let token: KeyValueObservation
        do {
            let captured = Reregisters(player: player, tokens: tokens)
            token = player.observe(\.volume) { _, _ in _ = captured }
        }
        token.invalidate()
        #expect(tokens.current.count == 1)
        #expect(player.observationInfo.observerCountsByKeyPath == [\AudioPlayer.volume: 1])
        tokens.current.forEach { $0.invalidate() }
    }
}
