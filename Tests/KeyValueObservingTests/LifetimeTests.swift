import KeyValueObserving
import Testing

@Suite("Lifetime of objects, tokens and handlers")
struct LifetimeTests {
    @Test func theTokenDoesNotRetainTheObservedObject() {
        weak var weakPlayer: AudioPlayer?
        var token: KeyValueObservation?
        do {
            let player = AudioPlayer()
            weakPlayer = player
            token = player.observe(\.volume, options: [.new]) { _, _ in }
        }
        #expect(weakPlayer == nil)
        #expect(token != nil)
    }

    @Test func aDeallocatedObjectGoesQuietAndItsTokenCanStillBeInvalidated() {
        let calls = Counter(0)
        weak var weakCanary: Canary?
        var token: KeyValueObservation?
        do {
            let canary = Canary()
            weakCanary = canary
            let player = AudioPlayer()
            token = player.observe(\.volume, options: [.prior, .old, .new]) { _, _ in
                _ = canary
                calls.increment()
            }
            player.volume = 0.1
        }
        // The object's death calls nothing (no completion, no prior) and releases the handler even
        // though the token is still alive.
        #expect(calls.current == 2)
        #expect(weakCanary == nil)
        token?.invalidate()
        token?.invalidate()
        token = nil
        #expect(calls.current == 2)
    }

    @Test func invalidatingReleasesTheHandlerAndWhatItCaptured() {
        let player = AudioPlayer()
        weak var weakCanary: Canary?
        let token: KeyValueObservation
        do {
            let canary = Canary()
            weakCanary = canary
            token = player.observe(\.volume) { _, _ in _ = canary }
        }
        #expect(weakCanary != nil)
        token.invalidate()
        #expect(weakCanary == nil)
        withExtendedLifetime(token) {}
    }

    @Test func droppingTheTokenEndsTheObservationAndReleasesTheHandler() {
        let player = AudioPlayer()
        let calls = Counter(0)
        weak var weakCanary: Canary?
        do {
            let canary = Canary()
            weakCanary = canary
            let token = player.observe(\.volume) { _, _ in
                _ = canary
                calls.increment()
            }
            player.volume = 0.2
            withExtendedLifetime(token) {}
        }
        #expect(weakCanary == nil)
        player.volume = 0.3
        #expect(calls.current == 1)
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    @Test func invalidateIsIdempotentAndLeavesOtherObserversAlone() {
        let player = AudioPlayer()
        let first = Counter(0)
        let second = Counter(0)
        let a = player.observe(\.volume) { _, _ in first.increment() }
        let b = player.observe(\.volume) { _, _ in second.increment() }
        a.invalidate()
        a.invalidate()
        player.volume = 0.4
        #expect(first.current == 0)
        #expect(second.current == 1)
        #expect(player.observationInfo.observerCountsByKeyPath == [\AudioPlayer.volume: 1])
        b.invalidate()
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    @Test func theHandlerMayCaptureTheObservedObjectWeakly() {
        weak var weakPlayer: AudioPlayer?
        let token: KeyValueObservation
        do {
            let player = AudioPlayer()
            weakPlayer = player
            token = player.observe(\.volume) { [weak player] _, _ in _ = player }
            player.volume = 1
        }
        #expect(weakPlayer == nil)
        token.invalidate()
    }
}
