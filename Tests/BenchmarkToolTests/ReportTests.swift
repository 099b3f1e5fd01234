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

/// The registration-at-scale section's lines, from made-up figures.
@Suite("kvo-bench's registration at scale")
struct RegistrationAtScaleTests {
    func figure(_ implementation: String, invalidate: Double?, heap: Int?, peak: Int?) -> MassRegistration.Figure {
        MassRegistration.Figure(
            implementation: implementation, objects: 1_000, observersPerObject: 10, registerNanoseconds: 300,
            invalidateNanoseconds: invalidate, heapBytes: heap, peakResidentBytes: peak)
    }

    /// A growth under a mebibyte is said to be too small to measure at this scale, never printed as
    /// 0 B per observer or compared as "inf×".
    @Test func aMemoryFigureTooSmallToMeasureIsSaidToBeSo() {
        let lines = massRegistrationLines(
            [
                figure("KeyValueObserving", invalidate: 100, heap: 200_000, peak: 0),
                figure("NotificationCenter", invalidate: 400, heap: 3 << 20, peak: nil),
            ], problems: [], markdown: false)
        let text = lines.joined(separator: "\n")
        #expect(
            lines.contains(
                "  KeyValueObserving: register 300 ns/observer, invalidate 100 ns/observer, heap too small to measure at this scale "
                    + "(grew by 0.2 MB, under 1 MB), peak RSS too small to measure at this scale (grew by 0.0 MB, under 1 MB)"), "\(text)")
        #expect(
            lines.contains(
                "  NotificationCenter: register 300 ns/observer, invalidate 400 ns/observer, heap +3.0 MB (314 B per observer), "
                    + "peak RSS not measured on this system"), "\(text)")
        #expect(
            lines.contains(
                "  KeyValueObserving against NotificationCenter: registration about the same, invalidation 4.0× faster, heap not compared "
                    + "(too small to measure at this scale, or not measured), peak RSS not compared (too small to measure at this scale, "
                    + "or not measured) (target ≥ 10× faster, provisional)"), "\(text)")
        #expect(!text.contains("inf") && !text.contains(" 0 B per observer"), "\(text)")
    }

    /// Observation's withObservationTracking cannot be cancelled: its invalidation is "n/a", and so
    /// is the comparison of invalidations.
    @Test func observationsInvalidationIsNotApplicable() {
        let lines = massRegistrationLines(
            [
                figure("KeyValueObserving", invalidate: 100, heap: 150 << 20, peak: 160 << 20),
                figure("Observation", invalidate: nil, heap: 600 << 20, peak: 640 << 20),
            ], problems: [], markdown: false)
        #expect(
            lines.contains { $0.hasPrefix("  Observation: register 300 ns/observer, invalidate n/a (no cancellation), heap +600.0 MB") })
        #expect(
            lines.contains(
                "  KeyValueObserving against Observation: registration about the same, invalidation n/a, heap 4.0× less, peak RSS 4.0× less"
            ),
            "\(lines)")
    }
}

/// The hand-off's bookkeeping, driven by a stand-in for a sequence that answers each set at once,
/// on the setting thread: no consumer task and no timing asserted.
@Suite("kvo-bench's hand-off")
struct HandOffTests {
    /// What the stand-in does with the n-th set: deliver the value, an earlier one, an earlier one
    /// and then the value, or nothing.
    enum Answer { case value, earlier, earlierThenValue, nothing }

    @Test func aStaleFirstDeliveryAndATimeoutAreCountedApartAndNeverAsLatency() {
        let handOff = HandOff()
        let answers: [Answer] = [.earlier, .value, .earlierThenValue, .value, .nothing, .value]
        var sets = 0
        let values = Values()
        handOff.handOff(3, values: values) { value in
            let answer = sets < answers.count ? answers[sets] : .value
            sets += 1
            switch answer {
            case .value: handOff.deliver(Double(value))
            case .earlier: handOff.deliver(Double(value - 1))
            case .earlierThenValue:
                handOff.deliver(Double(value - 1))
                handOff.deliver(Double(value))
            case .nothing: break
            }
        } expected: {
            Double($0)
        }
        let tally = handOff.takeTally()
        // Rounds: stale; fresh; stale (its value, following, is not the next round's first
        // delivery); fresh; a timeout, then one set to resynchronise; fresh.
        #expect(tally.freshNanoseconds.count == 3)
        #expect(tally.staleFirst == 2)
        #expect(tally.timeouts == 1)
        #expect(tally.rounds == 6)
        #expect(sets == 7)
        #expect(handOff.check(expectedLast: Double(values.last)) == nil)
        #expect(handOff.takeTally().rounds == 0)
    }
}
