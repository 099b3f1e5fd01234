import KeyValueObserving
import Testing

/// `@unchecked Sendable` in tests only: each property is set by one thread at a time.
final class Editor: KeyValueObservable, @unchecked Sendable {
    @Observed var title = "Untitled"
    @Observed var body = ""
    @Observed var isDirty = false
    var summary: String { "\(title): \(body)" }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Editor.summary: [\Editor.title, \Editor.body]]
    }
}

@Suite("Batched changes")
struct BatchTests {
    @Test func theEditorScenario() {
        let editor = Editor()
        let log = Locked<[String]>([])
        let title = editor.observe(\.title, options: [.old, .new]) { _, change in
            log.append("title \(change.oldValue!)→\(change.newValue!)")
        }
        let body = editor.observe(\.body, options: [.old, .new]) { _, change in log.append("body \(change.oldValue!)→\(change.newValue!)") }
        let dirty = editor.observe(\.isDirty, options: [.new]) { _, change in log.append("dirty \(change.newValue!)") }
        let anyKey = Locked<[[AnyKeyPath]]>([])
        let all = editor.observeAnyKey { _, change in anyKey.append(change.keyPaths) }
        editor.coalescingChanges {
            editor.title = "Draft"
            editor.body = "Hello"
            editor.title = "Final"
            editor.isDirty = true
            #expect(log.current == [])
        }
        #expect(log.current == ["title Untitled→Final", "body →Hello", "dirty true"])
        #expect(anyKey.current == [[\Editor.title, \Editor.body, \Editor.isDirty]])
        [title, body, dirty, all].forEach { $0.invalidate() }
    }

    @Test func priorIsSentAtTheFirstChangeOfAKey() {
        let editor = Editor()
        let log = Locked<[String]>([])
        let token = editor.observe(\.title, options: [.prior, .new]) { editor, change in
            log.append(change.isPrior ? "prior (stored \(editor.title))" : "after \(change.newValue!)")
        }
        editor.coalescingChanges {
            editor.title = "A"
            log.append("between")
            editor.title = "B"
        }
        #expect(log.current == ["prior (stored Untitled)", "between", "after B"])
        token.invalidate()
    }

    @Test func nestedBatchesFlatten() {
        let editor = Editor()
        let calls = Counter(0)
        let token = editor.observe(\.title) { _, _ in calls.increment() }
        editor.coalescingChanges {
            editor.title = "A"
            editor.coalescingChanges { editor.title = "B" }
            #expect(calls.current == 0)
            editor.title = "C"
        }
        #expect(calls.current == 1)
        token.invalidate()
    }

    @Test func aDependentKeyIsNotifiedOncePerBatch() {
        let editor = Editor()
        let values = Locked<[String]>([])
        let token = editor.observe(\.summary, options: [.old, .new]) { _, change in
            values.append("\(change.oldValue!) ⇒ \(change.newValue!)")
        }
        editor.coalescingChanges {
            editor.title = "T"
            editor.body = "B"
        }
        #expect(values.current == ["Untitled:  ⇒ T: B"])
        token.invalidate()
    }

    @Test func afterTheBatchChangesNotifyAsUsual() {
        let editor = Editor()
        let calls = Counter(0)
        let token = editor.observe(\.title) { _, _ in calls.increment() }
        editor.coalescingChanges { editor.title = "A" }
        editor.title = "B"
        editor.title = "C"
        #expect(calls.current == 3)
        token.invalidate()
    }

    @Test func aBatchIsScopedToItsThread() {
        let editor = Editor()
        let calls = Counter(0)
        let token = editor.observe(\.body) { _, _ in calls.increment() }
        editor.coalescingChanges {
            // Another thread's changes during the batch notify at once.
            TestThread { editor.body = "from another thread" }.join()
            #expect(calls.current == 1)
        }
        #expect(calls.current == 1)
        token.invalidate()
    }

    @Test func removingDuplicatesComparesTheValuesBeforeAndAfterTheBatch() {
        let editor = Editor()
        let calls = Counter(0)
        let token = editor.observe(\.title, options: [.new], removingDuplicates: true) { _, _ in calls.increment() }
        editor.coalescingChanges {
            editor.title = "Changed"
            editor.title = "Untitled"
        }
        #expect(calls.current == 0)
        token.invalidate()
    }

    @Test func aThrowingBatchStillDelivers() {
        struct Failure: Error {}
        let editor = Editor()
        let calls = Counter(0)
        let token = editor.observe(\.title) { _, _ in calls.increment() }
        #expect(throws: Failure.self) {
            try editor.coalescingChanges {
                editor.title = "A"
                throw Failure()
            }
        }
        #expect(calls.current == 1)
        editor.title = "B"
        #expect(calls.current == 2)
        token.invalidate()
    }
}
