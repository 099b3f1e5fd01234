import Testing

@testable import kvo_bench

/// The pure parts of kvo-bench's report, on figures made up for the test (never measured ones).
@Suite("kvo-bench's report")
struct ReportTests {
    @Test func aRatioPairsTheRoundsOfBothScenarios() {
        let ratio = PairedRatio([2, 4, 9, 5], over: [1, 2, 3, 10])
        #expect(ratio == PairedRatio(median: 2, lowest: 0.5, highest: 3))
        #expect(ratio.isUnstable)
        #expect(!PairedRatio([1, 2], over: [2, 3]).isUnstable)
        #expect(!PairedRatio([3, 2], over: [2, 1]).isUnstable)
    }

    /// A ratio whose rounds disagree on which side is faster (its paired range spans 1×) is marked
    /// unstable in the summary, with its range; a stable one gives its range only.
    @Test func theSummaryMarksARatioWhosePairedRangeSpansOne() throws {
        let text = try #require(
            comparisonsText([
                (PairedRatio(median: 0.9, lowest: 0.75, highest: 1.2), "a plain AsyncStream"),
                (PairedRatio(median: 0.01, lowest: 0.009, highest: 0.0125), "Observation"),
                (PairedRatio(median: 1.4, lowest: 1.3, highest: 1.5), "a plain stored property"),
            ]))
        #expect(
            text
                == "1.1× faster than a plain AsyncStream (unstable: from 1.3× faster to 1.2× slower over rounds), "
                + "100× faster than Observation [80–111×], 1.4× slower than a plain stored property [1.3–1.5×]")
        #expect(comparisonsText([]) == nil)
    }

    @Test func theTablesRatioCellCarriesTheRangeAndTheComparedCellMarksInstability() {
        #expect(formatRatio(PairedRatio(median: 0.011, lowest: 0.0104, highest: 0.0123)) == "0.011× [0.010–0.012]")
        #expect(speedPhrase(PairedRatio(median: 1.01, lowest: 0.97, highest: 1.04)).hasPrefix("about as fast (unstable"))
        #expect(speedPhrase(PairedRatio(median: 1.02, lowest: 1.01, highest: 1.04)) == "about as fast [1.01–1.04×]")
    }

    @Test func theHandOffNoteSaysWhichImplementationDeliveredAnEarlierValueFirst() throws {
        var coalescing = DeliveryTally()
        coalescing.freshNanoseconds = Array(repeating: 20_000, count: 3)
        coalescing.staleFirst = 1
        var late = DeliveryTally()
        late.freshNanoseconds = [10_000]
        late.timeouts = 2
        let note = try #require(
            staleNote([
                (DeliveryTally(), "values(for:)", false), (coalescing, "Observation's Observations", true),
                (late, "a plain AsyncStream", false),
            ]))
        #expect(
            note
                == "Observation's Observations: an earlier value came first in 25.0% of rounds, as it coalesces by design; "
                + "those rounds are not in its latency. a plain AsyncStream: 2 rounds had no delivery in time; those rounds are "
                + "not in its latency")
        #expect(staleNote([(DeliveryTally(), "values(for:)", false)]) == nil)
    }
}

/// The hand-off's bookkeeping, driven by a stand-in for a sequence that answers each set at once,
/// on the setting thread: no consumer task and no timing asserted.
@Suite("kvo-bench's hand-off")
struct HandOffTests {
    /// What the stand-in does with the n-th set: deliver the value, an earlier one, or nothing.
    enum Answer { case value, earlier, nothing }

    @Test func aStaleFirstDeliveryAndATimeoutAreCountedApartAndNeverAsLatency() {
        let handOff = HandOff()
        let answers: [Answer] = [.earlier, .value, .value, .nothing, .value]
        var sets = 0
        let values = Values()
        handOff.handOff(3, values: values) { value in
            let answer = sets < answers.count ? answers[sets] : .value
            sets += 1
            switch answer {
            case .value: handOff.deliver(Double(value))
            case .earlier: handOff.deliver(Double(value - 1))
            case .nothing: break
            }
        } expected: {
            Double($0)
        }
        let tally = handOff.takeTally()
        // Rounds: stale (then one set to resynchronise), fresh, timeout (then one set), fresh, fresh.
        #expect(tally.freshNanoseconds.count == 3)
        #expect(tally.staleFirst == 1)
        #expect(tally.timeouts == 1)
        #expect(tally.rounds == 5)
        #expect(sets == 7)
        #expect(handOff.check(expectedLast: Double(values.last)) == nil)
        #expect(handOff.takeTally().rounds == 0)
    }
}
