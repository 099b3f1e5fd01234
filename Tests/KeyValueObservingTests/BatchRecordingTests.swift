import KeyValueObserving
import Testing

/// A value too large to be kept in place by a batch (it is boxed), holding a reference.
struct Wide: Sendable {
    var token: Token?
    var name = ""
    var a = 0
    var b = 0
}

/// A reference whose lifetime the tests follow.
final class Token: Sendable {}

/// Properties of several sizes and kinds: trivial, in place with a reference, boxed.
final class Sampler: KeyValueObservable, @unchecked Sendable {
    // `@unchecked Sendable` in tests only: each test sets an instance from one thread at a time.
    @Observed var flag = false
    @Observed var small: Int16 = 0
    @Observed var count = 0
    @Observed var name = "start"
    @Observed var wide = Wide()
    @Observed var token: Token?
}

/// Twenty properties: more than a batch has room for before it grows.
final class Wall: KeyValueObservable, @unchecked Sendable {
    // `@unchecked Sendable` in tests only: each test sets an instance from one thread.
    @Observed var p0 = 0
    @Observed var p1 = 0
    @Observed var p2 = 0
    @Observed var p3 = 0
    @Observed var p4 = 0
    @Observed var p5 = 0
    @Observed var p6 = 0
    @Observed var p7 = 0
    @Observed var p8 = 0
    @Observed var p9 = 0
    @Observed var p10 = 0
    @Observed var p11 = 0
    @Observed var p12 = 0
    @Observed var p13 = 0
    @Observed var p14 = 0
    @Observed var p15 = 0
    @Observed var p16 = 0
    @Observed var p17 = 0
    @Observed var p18 = 0
    @Observed var p19 = 0

    static var keys: [ReferenceWritableKeyPath<Wall, Int>] {
        [
            \.p0, \.p1, \.p2, \.p3, \.p4, \.p5, \.p6, \.p7, \.p8, \.p9,
            \.p10, \.p11, \.p12, \.p13, \.p14, \.p15, \.p16, \.p17, \.p18, \.p19,
        ]
    }
}

@Suite("Batches: what a change records and the end delivers")
struct BatchRecordingTests {
    @Test func valuesOfEverySizeGoFromTheFirstChangeToTheEnd() {
        let sampler = Sampler()
        let log = Locked<[String]>([])
        let tokens = [
            sampler.observe(\.flag, options: [.old, .new]) { _, change in log.append("flag \(change.oldValue!)→\(change.newValue!)") },
            sampler.observe(\.small, options: [.old, .new]) { _, change in log.append("small \(change.oldValue!)→\(change.newValue!)") },
            sampler.observe(\.count, options: [.old, .new]) { _, change in log.append("count \(change.oldValue!)→\(change.newValue!)") },
            sampler.observe(\.name, options: [.old, .new]) { _, change in log.append("name \(change.oldValue!)→\(change.newValue!)") },
            sampler.observe(\.wide, options: [.old, .new]) { _, change in
                log.append("wide \(change.oldValue!.name)→\(change.newValue!.name)")
            },
        ]
        // Twice, so that the second batch goes through what the first one learned.
        for round in 1...2 {
            sampler.coalescingChanges {
                sampler.flag.toggle()
                sampler.small += 1
                sampler.count += 10
                sampler.name += "+"
                sampler.wide.name += "w"
                sampler.flag.toggle()
                sampler.small += 1
                sampler.count += 10
                sampler.name += "!"
                sampler.wide.name += "v"
            }
            #expect(log.withLock { $0.count } == 5 * round)
        }
        #expect(
            log.current == [
                "flag false→false", "small 0→2", "count 0→20", "name start→start+!", "wide →wv",
                "flag false→false", "small 2→4", "count 20→40", "name start+!→start+!+!", "wide wv→wvwv",
            ])
        tokens.forEach { $0.invalidate() }
    }

    @Test func aBatchKeepsNoValueOnceItHasDelivered() {
        let sampler = Sampler()
        weak var inPlace: Token?
        weak var boxed: Token?
        let calls = Counter(0)
        let tokens = [
            sampler.observe(\.token, options: [.old, .new]) { _, _ in calls.increment() },
            sampler.observe(\.wide, options: [.old, .new]) { _, _ in calls.increment() },
        ]
        do {
            let first = Token()
            let second = Token()
            inPlace = first
            boxed = second
            sampler.token = first
            sampler.wide = Wide(token: second)
            sampler.coalescingChanges {
                // The values before the batch are kept until its end, then handed to the observers.
                sampler.token = Token()
                sampler.wide = Wide(token: Token())
            }
        }
        #expect(calls.current == 4)
        #expect(inPlace == nil)
        #expect(boxed == nil)
        tokens.forEach { $0.invalidate() }
    }

    @Test func consecutiveBatchesDeliverOnlyTheirOwnChanges() {
        let editor = Editor()
        let log = Locked<[String]>([])
        let title = editor.observe(\.title, options: [.new]) { _, change in log.append("title \(change.newValue!)") }
        let body = editor.observe(\.body, options: [.new]) { _, change in log.append("body \(change.newValue!)") }
        editor.coalescingChanges { editor.title = "A" }
        editor.coalescingChanges { editor.body = "B" }
        editor.coalescingChanges {}
        editor.coalescingChanges {
            editor.body = "C"
            editor.title = "D"
        }
        #expect(log.current == ["title A", "body B", "body C", "title D"])
        title.invalidate()
        body.invalidate()
    }

    @Test func aBatchOfManyKeysDeliversEachOnceInTheOrderOfTheirFirstChange() {
        let wall = Wall()
        let log = Locked<[Int]>([])
        let tokens = Wall.keys.enumerated().map { index, key in
            wall.observe(key, options: [.new]) { _, change in log.append(index * 1000 + change.newValue!) }
        }
        wall.coalescingChanges {
            for (index, key) in Wall.keys.enumerated().reversed() { wall[keyPath: key] = index }
            for key in Wall.keys { wall[keyPath: key] += 1 }
        }
        #expect(log.current == (0..<20).reversed().map { $0 * 1000 + $0 + 1 })
        tokens.forEach { $0.invalidate() }
    }

    @Test func anObserverRegisteredDuringABatchHearsPriorAtItsKeysFirstChange() {
        let editor = Editor()
        let log = Locked<[String]>([])
        let title = editor.observe(\.title, options: [.new]) { _, change in log.append("title \(change.newValue!)") }
        var body: KeyValueObservation?
        // A set and a first batch, so that the second batch starts with what it learned of the
        // observers: changes recorded without the lock.
        editor.title = "0"
        editor.coalescingChanges { editor.title = "A" }
        editor.coalescingChanges {
            editor.title = "B"
            body = editor.observe(\.body, options: [.prior, .new]) { editor, change in
                log.append(change.isPrior ? "prior body (stored \(editor.body))" : "body \(change.newValue!)")
            }
            editor.body = "C"
            log.append("between")
        }
        #expect(log.current == ["title 0", "title A", "prior body (stored )", "between", "title B", "body C"])
        title.invalidate()
        body?.invalidate()
    }

    @Test func observersOfEveryKeyHearOfAKeyWhoseObserversLeftDuringTheBatch() {
        let editor = Editor()
        let keys = Locked<[[AnyKeyPath]]>([])
        let all = editor.observeAnyKey { _, change in keys.append(change.keyPaths) }
        let title = editor.observe(\.title) { _, _ in }
        let body = editor.observe(\.body) { _, _ in }
        editor.coalescingChanges {
            editor.title = "A"
            editor.body = "x"
        }
        editor.coalescingChanges {
            editor.body = "B"
            editor.title = "C"
            title.invalidate()
        }
        #expect(keys.current == [[\Editor.title, \Editor.body], [\Editor.body, \Editor.title]])
        all.invalidate()
        body.invalidate()
    }

    @Test func observersOfEveryKeyHearOfAPropertyNobodyObserves() {
        let editor = Editor()
        let keys = Locked<[[AnyKeyPath]]>([])
        let all = editor.observeAnyKey { _, change in keys.append(change.keyPaths) }
        let title = editor.observe(\.title) { _, _ in }
        editor.coalescingChanges { editor.title = "A" }
        editor.coalescingChanges {
            editor.title = "B"
            editor.isDirty = true
            editor.isDirty = false
        }
        #expect(keys.current == [[\Editor.title], [\Editor.title, \Editor.isDirty]])
        all.invalidate()
        title.invalidate()
    }

    @Test func aKeyItsClassNotifiesByHandIsLeftOutOfABatch() {
        let settings = Settings()
        let keys = Locked<[[AnyKeyPath]]>([])
        let all = settings.observeAnyKey { _, change in keys.append(change.keyPaths) }
        settings.coalescingChanges { settings.balance = 1 }
        settings.coalescingChanges { settings.balance = 5 }
        #expect(keys.current == [])
        #expect(settings.balance == 5)
        all.invalidate()
    }

    @Test func aHandlerMayBatchTheSameObjectWhileABatchDelivers() {
        let editor = Editor()
        let log = Locked<[String]>([])
        let title = editor.observe(\.title, options: [.new]) { editor, change in
            log.append("title \(change.newValue!)")
            if change.newValue == "A" {
                editor.coalescingChanges {
                    editor.body = "from handler"
                    editor.isDirty = true
                }
            }
        }
        let body = editor.observe(\.body, options: [.new]) { _, change in log.append("body \(change.newValue!)") }
        let dirty = editor.observe(\.isDirty, options: [.new]) { _, change in log.append("dirty \(change.newValue!)") }
        editor.coalescingChanges { editor.title = "A" }
        editor.coalescingChanges {
            editor.title = "B"
            editor.isDirty = false
        }
        #expect(log.current == ["title A", "body from handler", "dirty true", "title B", "dirty false"])
        [title, body, dirty].forEach { $0.invalidate() }
    }
}

@Suite("Batches while other threads change the observers", .tags(.stress))
struct BatchRecordingConcurrencyTests {
    /// One thread batches while others register and invalidate observers of the same keys, some with
    /// `.prior` (which a batch must see at the first change of a key).
    @Test func aBatchSeesObserversComeAndGo() {
        let editor = Editor()
        let titles = Locked<[String]>([])
        let title = editor.observe(\.title, options: [.old, .new]) { _, change in
            titles.append("\(change.oldValue!)→\(change.newValue!)")
        }
        let priors = Counter(0)
        TestThread.run(3) { me in
            for step in 0..<300 {
                switch me {
                case 0:
                    editor.coalescingChanges {
                        editor.title = "a\(step)"
                        editor.body = "b\(step)"
                        editor.title = "c\(step)"
                    }
                default:
                    let token = editor.observe(\.body, options: [.prior]) { _, change in
                        if change.isPrior { priors.increment() }
                    }
                    token.invalidate()
                }
            }
        }
        #expect(titles.current == (0..<300).map { "\($0 == 0 ? "Untitled" : "c\($0 - 1)")→c\($0)" })
        title.invalidate()
        #expect(editor.observationInfo.observerCountsByKeyPath.isEmpty)
    }
}
