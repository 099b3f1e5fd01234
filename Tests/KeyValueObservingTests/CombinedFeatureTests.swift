import KeyValueObserving
import Testing

final class CountedQueue: KeyValueObservable {
    @Observed var count = 0
    @Observed var items: [String] = [] {
        didSet { count = items.count }
    }
}

@Suite("Sequences, batches and to-many changes together")
struct CombinedFeatureTests {
    @Test func aToManyMutationSilencesOnlyItsOwnKey() {
        let queue = CountedQueue()
        let log = Locked<[String]>([])
        let items = queue.observe(\.items, options: [.new]) { _, change in log.append("items \(change.kind)") }
        let count = queue.observe(\.count, options: [.new]) { _, change in log.append("count \(change.newValue!)") }
        queue.insert(["a"], at: 0, into: \.items)
        #expect(log.current == ["count 1", "items insertion"])
        items.invalidate()
        count.invalidate()
    }

    @Test func aToManyMutationInsideABatchIsOneSettingAtTheEnd() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let anyKey = Counter(0)
        let token = queue.observe(\.items, options: [.old, .new]) { _, change in changes.append(change) }
        let all = queue.observeAnyKey { _, _ in anyKey.increment() }
        queue.coalescingChanges {
            queue.items = ["z"]
            queue.insert(["y"], at: 0, into: \.items)
        }
        #expect(changes.current == [KeyValueObservedChange(kind: .setting, newValue: ["y", "z"], oldValue: ["a", "b", "c"])])
        #expect(anyKey.current == 1)
        token.invalidate()
        all.invalidate()
    }

    @Test func anObserverRegisteredDuringABatchIsNotifiedAtItsEnd() {
        let editor = Editor()
        let values = Locked<[String?]>([])
        var token: KeyValueObservation?
        editor.coalescingChanges {
            editor.title = "A"
            token = editor.observe(\.title, options: [.new]) { _, change in values.append(change.newValue) }
            editor.title = "B"
        }
        #expect(values.current == ["B"])
        token?.invalidate()
    }

    @Test func aHandlerChangingAnotherKeyOfTheBatchDoesNotReorderItsNotification() {
        let editor = Editor()
        let log = Locked<[String]>([])
        let title = editor.observe(\.title, options: [.old, .new]) { editor, change in
            log.append("title \(change.oldValue!)→\(change.newValue!)")
            if change.newValue == "T" { editor.body = "from handler" }
        }
        let body = editor.observe(\.body, options: [.old, .new]) { _, change in log.append("body \(change.oldValue!)→\(change.newValue!)") }
        editor.coalescingChanges {
            editor.title = "T"
            editor.body = "B"
        }
        // The batch's own `body` notification carries the value the batch left (read before any
        // handler ran); the handler's change comes as its own notification, nested in the title's.
        #expect(log.current == ["title Untitled→T", "body B→from handler", "body →B"])
        title.invalidate()
        body.invalidate()
    }

    @Test func chainsCanBeConsumedAsSequences() async {
        var player: MediaPlayer? = MediaPlayer()
        let values = player!.values(for: \.currentItem?.status)
        let item = PlayerItem()
        player!.currentItem = item
        item.status = .ready
        player!.currentItem = nil
        player = nil
        var received: [ItemStatus?] = []
        for await value in values { received.append(value) }
        #expect(received == [nil, .loading, .ready, nil])
    }

    @Test func changesCanRemoveDuplicates() async {
        var player: AudioPlayer? = AudioPlayer()
        let changes = player!.changes(for: \.volume, removingDuplicates: true)
        player!.volume = 0.5
        player!.volume = 0.6
        player!.volume = 0.6
        player = nil
        var received: [KeyValueObservedChange<Double>] = []
        for await change in changes { received.append(change) }
        #expect(received == [KeyValueObservedChange(newValue: 0.6, oldValue: 0.5)])
    }

    @Test func removingDuplicatesOnSequencesDoesNotCompileForNonEquatableValues() throws {
        guard SnippetCompiler.isSupported else { return }
        let output = try SnippetCompiler.typecheck(
            """
            import KeyValueObserving
            struct Opaque: Sendable { var value = 0 }
            final class Holder: KeyValueObservable { @Observed var thing = Opaque() }
            func start(_ holder: Holder) -> KeyValueObservationValues<Opaque> {
                holder.values(for: \\.thing, removingDuplicates: true)
            }
            """)
        #expect(output.status != 0)
        #expect(output.standardError.contains("Equatable"), "\(output.standardError)")
    }
}

/// `@unchecked Sendable` in tests only: each property is set by one thread.
final class Lanes: KeyValueObservable, @unchecked Sendable {
    @Observed var a = 0
    @Observed var b = 0
    @Observed var c = 0
    @Observed var d = 0

    func set(_ lane: Int, to value: Int) {
        switch lane {
        case 0: a = value
        case 1: b = value
        case 2: c = value
        default: d = value
        }
    }
}

@Suite("Batches, any-key observers and sequences across threads", .tags(.stress))
struct CombinedConcurrencyTests {
    /// Two threads batch changes of different properties of one object at once, while others
    /// register observers of every key and invalidate them.
    @Test func batchesOnTwoThreadsOfOneObject() {
        let editor = Editor()
        let titles = Counter(0)
        let bodies = Counter(0)
        let title = editor.observe(\.title) { _, _ in titles.increment() }
        let body = editor.observe(\.body) { _, _ in bodies.increment() }
        let pool = Locked<[KeyValueObservation]>([])
        TestThread.run(4) { me in
            for step in 0..<500 {
                switch me {
                case 0:
                    editor.coalescingChanges {
                        editor.title = "a\(step)"; editor.title = "b\(step)"
                    }
                case 1:
                    editor.coalescingChanges {
                        editor.body = "a\(step)"; editor.body = "b\(step)"
                    }
                case 2: pool.append(editor.observeAnyKey { _, _ in })
                default: pool.withLock { $0.isEmpty ? nil : $0.removeFirst() }?.invalidate()
                }
            }
        }
        #expect(titles.current == 500)
        #expect(bodies.current == 500)
        pool.withLock { tokens in
            tokens.forEach { $0.invalidate() }; tokens = []
        }
        title.invalidate()
        body.invalidate()
        #expect(editor.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    /// Four threads open batches on one object over and over, some nested, each changing its own
    /// property twice per batch: each batch lives in its thread's record, and every one is one
    /// notification per key with the values before and after it.
    @Test func batchesOfFourThreadsOnOneObjectEachDeliverTheirOwnChanges() {
        let lanes = Lanes()
        let keys: [ReferenceWritableKeyPath<Lanes, Int>] = [\.a, \.b, \.c, \.d]
        let seen = (0..<4).map { _ in Locked<[KeyValueObservedChange<Int>]>([]) }
        let tokens = keys.indices.map { lane in
            lanes.observe(keys[lane], options: [.old, .new]) { _, change in seen[lane].append(change) }
        }
        let rounds = 400
        TestThread.run(4) { lane in
            for round in 0..<rounds {
                if round % 2 == 0 {
                    // The nested batch opens after a change: it must join the outer one.
                    lanes.coalescingChanges {
                        lanes.set(lane, to: 2 * round + 1)
                        lanes.coalescingChanges { lanes.set(lane, to: 2 * round + 2) }
                    }
                } else {
                    lanes.coalescingChanges {
                        lanes.set(lane, to: 2 * round + 1)
                        lanes.set(lane, to: 2 * round + 2)
                    }
                }
            }
        }
        for lane in 0..<4 {
            let changes = seen[lane].current
            #expect(changes.count == rounds, "lane \(lane)")
            for (round, change) in changes.enumerated() {
                #expect(change.oldValue == 2 * round && change.newValue == 2 * round + 2, "lane \(lane), batch \(round)")
            }
        }
        tokens.forEach { $0.invalidate() }
        #expect(lanes.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    /// Consumers are cancelled while the owner keeps setting.
    @Test func cancellationRacingSets() async {
        let player = AudioPlayer()
        // Registration reads the property the first time a key path is used: do that before the
        // writer starts (see the core stress test).
        player.observe(\.volume) { _, _ in }.invalidate()
        let stop = Locked(false)
        let writer = TestThread {
            var value = 0.0
            while !stop.current {
                value += 1
                player.volume = value
            }
        }
        for _ in 0..<50 {
            let values = player.values(for: \.volume, options: [.new], buffering: .newest(4))
            let task = Task { for await _ in values { break } }
            task.cancel()
            await task.value
        }
        stop.withLock { $0 = true }
        writer.join()
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }
}
