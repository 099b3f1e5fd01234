import KeyValueObserving
import Testing

final class Nested: KeyValueObservable {
    @Observed var grid: [[Int]] = [[0]]
    @Observed var anys: [Any] = ["last"]
}

final class Queue: KeyValueObservable {
    @Observed var items = ["a", "b", "c"]
    var count: Int { items.count }

    override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [\Queue.count: [\Queue.items]]
    }
}

@Suite("To-many changes")
struct ToManyTests {
    @Test func insertionReportsTheIndexesAndTheNewElements() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = queue.observe(\.items, options: [.old, .new]) { _, change in changes.append(change) }
        queue.insert(["x", "y"], at: 1, into: \.items)
        #expect(queue.items == ["a", "x", "y", "b", "c"])
        #expect(changes.current == [KeyValueObservedChange(kind: .insertion, newValue: ["x", "y"], indexes: RangeSet(1..<3))])
        token.invalidate()
    }

    @Test func removalReportsTheIndexesAndTheRemovedElements() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = queue.observe(\.items, options: [.old, .new]) { _, change in changes.append(change) }
        var indexes = RangeSet(0..<1)
        indexes.insert(contentsOf: 2..<3)
        queue.remove(at: indexes, from: \.items)
        #expect(queue.items == ["b"])
        #expect(changes.current == [KeyValueObservedChange(kind: .removal, oldValue: ["a", "c"], indexes: indexes)])
        token.invalidate()
    }

    @Test func insertingOneElementAtAnIndexReportsAnInsertionOfIt() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = queue.observe(\.items, options: [.old, .new]) { _, change in changes.append(change) }
        queue.insert("x", at: 1, into: \.items)
        #expect(queue.items == ["a", "x", "b", "c"])
        #expect(changes.current == [KeyValueObservedChange(kind: .insertion, newValue: ["x"], indexes: RangeSet(1..<2))])
        token.invalidate()
    }

    /// As Foundation's `insertObjects(_:at:)`: each index is the new element's position in the result.
    @Test func insertingElementsAtARangeSetPutsEachAtItsIndexInTheResult() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = queue.observe(\.items, options: [.old, .new]) { _, change in changes.append(change) }
        var indexes = RangeSet(0..<1)
        indexes.insert(contentsOf: 3..<5)
        queue.insert(["x", "y", "z"], at: indexes, into: \.items)
        #expect(queue.items == ["x", "a", "b", "y", "z", "c"])
        #expect(changes.current == [KeyValueObservedChange(kind: .insertion, newValue: ["x", "y", "z"], indexes: indexes)])
        queue.insert(["end"], at: RangeSet(6..<7), into: \.items)
        #expect(queue.items.last == "end")
        token.invalidate()
    }

    /// The one-element form was added beside the array form: a call that compiled before it means
    /// what it meant, for elements that are arrays themselves or `Any` (an array literal could be
    /// either form's argument).
    @Test func anArrayLiteralStillInsertsItsElementsWhereItCouldBeOneElement() {
        let nested = Nested()
        nested.insert([], at: 0, into: \.grid)
        #expect(nested.grid == [[0]])
        nested.insert([[1, 2]], at: 0, into: \.grid)
        #expect(nested.grid == [[1, 2], [0]])
        nested.insert([1, 2], at: 0, into: \.anys)
        #expect(nested.anys.count == 3)
        #expect(nested.anys.first as? Int == 1)
        let one: Any = [3, 4]
        nested.insert(one, at: 0, into: \.anys)
        #expect(nested.anys.count == 4)
        #expect(nested.anys.first as? [Int] == [3, 4])
    }

    @Test func removingOneElementAtAnIndexReportsARemovalOfIt() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = queue.observe(\.items, options: [.old, .new]) { _, change in changes.append(change) }
        queue.remove(at: 1, from: \.items)
        #expect(queue.items == ["a", "c"])
        #expect(changes.current == [KeyValueObservedChange(kind: .removal, oldValue: ["b"], indexes: RangeSet(1..<2))])
        token.invalidate()
    }

    @Test func replacementReportsOldAndNewElements() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = queue.observe(\.items, options: [.prior, .old, .new]) { _, change in changes.append(change) }
        queue.replace(at: RangeSet(1..<2), with: ["B"], in: \.items)
        #expect(queue.items == ["a", "B", "c"])
        #expect(
            changes.current == [
                KeyValueObservedChange(kind: .replacement, oldValue: ["b"], indexes: RangeSet(1..<2), isPrior: true),
                KeyValueObservedChange(kind: .replacement, newValue: ["B"], oldValue: ["b"], indexes: RangeSet(1..<2)),
            ])
        token.invalidate()
    }

    @Test func aPlainAssignmentStaysASetting() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = queue.observe(\.items, options: [.new]) { _, change in changes.append(change) }
        queue.items.append("d")
        #expect(changes.current == [KeyValueObservedChange(kind: .setting, newValue: ["a", "b", "c", "d"])])
        #expect(changes.current.first?.indexes == nil)
        token.invalidate()
    }

    @Test func dependentsAndObserversOfEveryKeyAreNotifiedOnce() {
        let queue = Queue()
        let counts = Locked<[Int?]>([])
        let anyKey = Counter(0)
        let count = queue.observe(\.count, options: [.new]) { _, change in counts.append(change.newValue) }
        let all = queue.observeAnyKey { _, _ in anyKey.increment() }
        queue.insert(["d"], at: 3, into: \.items)
        queue.remove(at: RangeSet(0..<2), from: \.items)
        #expect(counts.current == [4, 2])
        #expect(anyKey.current == 2)
        count.invalidate()
        all.invalidate()
    }

    @Test func anObserverRemovingDuplicatesHearsNothingWhenAToManyChangeLeavesTheArrayEqual() {
        let queue = Queue()
        let changes = Locked<[KeyValueObservedChange<[String]>]>([])
        let token = queue.observe(\.items, options: [.prior, .old, .new], removingDuplicates: true) { _, change in
            changes.append(change)
        }
        queue.replace(at: RangeSet(1..<2), with: ["b"], in: \.items)
        queue.insert([], at: 0, into: \.items)
        #expect(changes.current.isEmpty)
        queue.replace(at: RangeSet(1..<2), with: ["B"], in: \.items)
        #expect(
            changes.current == [
                KeyValueObservedChange(kind: .replacement, oldValue: ["b"], indexes: RangeSet(1..<2), isPrior: true),
                KeyValueObservedChange(kind: .replacement, newValue: ["B"], oldValue: ["b"], indexes: RangeSet(1..<2)),
            ])
        token.invalidate()
    }
}
