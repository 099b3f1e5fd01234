import KeyValueObserving
import Testing

private struct NotEquatable: Sendable {
    var value = 0
}

@Suite("Async sequences and deduplication")
struct SequenceTests {
    /// Collects the first `count` elements of a sequence.
    private func first<S: AsyncSequence>(_ count: Int, of sequence: S) async throws -> [S.Element] {
        var result: [S.Element] = []
        for try await element in sequence {
            result.append(element)
            if result.count == count { break }
        }
        return result
    }

    @Test func initialAndNewYieldTheCurrentValueThenEveryAssignment() async throws {
        let player = AudioPlayer()
        let values = player.values(for: \.volume)
        player.volume = 0.7
        player.volume = 0.7
        #expect(try await first(3, of: values) == [0.5, 0.7, 0.7])
    }

    @Test func newOnlyYieldsChangesOnly() async throws {
        let player = AudioPlayer()
        let values = player.values(for: \.volume, options: [.new])
        player.volume = 0.9
        #expect(try await first(1, of: values) == [0.9])
    }

    @Test func priorAndNewYieldTheValueBeforeAndAfterEachChange() async throws {
        let player = AudioPlayer()
        player.volume = 0.7
        let values = player.values(for: \.volume, options: [.prior, .new])
        player.volume = 0.9
        #expect(try await first(2, of: values) == [0.7, 0.9])
    }

    @Test func changesCarryTheChangeRecords() async throws {
        let player = AudioPlayer()
        let changes = player.changes(for: \.volume)
        player.volume = 0.8
        #expect(try await first(1, of: changes) == [KeyValueObservedChange(newValue: 0.8, oldValue: 0.5)])
    }

    @Test func theSequenceFinishesWhenTheObjectIsDeallocated() async {
        var player: AudioPlayer? = AudioPlayer()
        let values = player!.values(for: \.volume)
        player!.volume = 0.1
        player = nil
        var received: [Double] = []
        for await value in values { received.append(value) }
        // The loop ended: the sequence finished.
        #expect(received == [0.5, 0.1])
    }

    @Test func cancellingTheConsumingTaskRemovesTheRegistration() async {
        let player = AudioPlayer()
        let started = Counter(0)
        let values = player.values(for: \.volume)
        let task = Task {
            var count = 0
            for await _ in values {
                count += 1
                started.increment()
            }
            return count
        }
        while started.current == 0 { await Task.yield() }
        #expect(player.observationInfo.observerCountsByKeyPath == [\AudioPlayer.volume: 1])
        task.cancel()
        _ = await task.value
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    @Test func droppingTheSequenceRemovesTheRegistration() {
        let player = AudioPlayer()
        do {
            let values = player.values(for: \.volume)
            #expect(player.observationInfo.observerCountsByKeyPath == [\AudioPlayer.volume: 1])
            withExtendedLifetime(values) {}
        }
        #expect(player.observationInfo.observerCountsByKeyPath.isEmpty)
    }

    @Test func newestBufferingKeepsOnlyTheNewestValues() async throws {
        let player = AudioPlayer()
        let values = player.values(for: \.volume, options: [.new], buffering: .newest(2))
        for step in 1...10 { player.volume = Double(step) }
        #expect(try await first(2, of: values) == [9, 10])
    }

    @Test func unboundedBufferingKeepsEveryValueInOrder() async throws {
        let player = AudioPlayer()
        let values = player.values(for: \.volume, options: [.new])
        for step in 1...100 { player.volume = Double(step) }
        #expect(try await first(100, of: values) == (1...100).map(Double.init))
    }

    @Test func valuesSetOnAnotherThreadArriveInOrder() async throws {
        let player = AudioPlayer()
        let values = player.values(for: \.volume, options: [.new])
        let writer = TestThread { for step in 1...1_000 { player.volume = Double(step) } }
        let received = try await first(1_000, of: values)
        writer.join()
        #expect(received == (1...1_000).map(Double.init))
    }

    @Test func removingDuplicatesSkipsEqualAssignments() {
        let player = AudioPlayer()
        let log = Locked<[String]>([])
        let token = player.observe(\.volume, options: [.prior, .old, .new], removingDuplicates: true) { _, change in
            log.append("\(change.isPrior ? "prior" : "after") \(change.oldValue!)→\(change.newValue.map { "\($0)" } ?? "-")")
        }
        player.volume = 0.5  // equal: nothing, not even .prior
        player.volume = 0.6
        player.volume = 0.6  // equal
        #expect(log.current == ["prior 0.5→-", "after 0.5→0.6"])
        token.invalidate()
    }

    @Test func withoutRemovingDuplicatesEveryAssignmentStillNotifies() {
        let player = AudioPlayer()
        let calls = Counter(0)
        let token = player.observe(\.volume, options: [.new], removingDuplicates: false) { _, _ in calls.increment() }
        player.volume = 0.5
        player.volume = 0.5
        #expect(calls.current == 2)
        token.invalidate()
    }

    @Test func removingDuplicatesWorksForDependentKeys() {
        let contact = Contact()
        let values = Locked<[String?]>([])
        let token = contact.observe(\.sortName, options: [.new], removingDuplicates: true) { _, change in
            values.append(change.newValue)
        }
        contact.givenName = "Ada"  // sortName unchanged
        contact.givenName = "Grace"
        #expect(values.current == ["Lovelace, Grace"])
        token.invalidate()
    }

    @Test func sequencesCanRemoveDuplicates() async throws {
        let player = AudioPlayer()
        let values = player.values(for: \.volume, removingDuplicates: true)
        player.volume = 0.5
        player.volume = 0.6
        player.volume = 0.6
        player.volume = 0.7
        #expect(try await first(3, of: values) == [0.5, 0.6, 0.7])
    }

    @Test(.tags(.processes)) func removingDuplicatesDoesNotCompileForNonEquatableValues() throws {
        guard SnippetCompiler.isSupported else { return }
        let output = try SnippetCompiler.typecheck(
            """
            import KeyValueObserving
            struct Opaque: Sendable { var value = 0 }
            final class Holder: KeyValueObservable { @Observed var thing = Opaque() }
            func start(_ holder: Holder) -> KeyValueObservation {
                holder.observe(\\.thing, options: [.new], removingDuplicates: true) { _, _ in }
            }
            """)
        #expect(output.status != 0)
        #expect(output.standardError.contains("Equatable"), "\(output.standardError)")
    }
}
