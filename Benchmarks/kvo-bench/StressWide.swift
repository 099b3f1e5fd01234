import KeyValueObserving

/// Seventeen observed properties of seventeen value types, none of them a type the gate's
/// scenarios observe (identical specialisations would be merged with theirs, behind a thunk the
/// gated path pays for): one batch setting them all outgrows what
/// a registry keeps of a batch for reuse (a finisher per value type), so its end drops the batch.
/// `@unchecked Sendable`: used by one thread at a time.
final class StressWide: KeyValueObservable, @unchecked Sendable {
    @Observed var int8Optional: Int8? = nil
    @Observed var int8: Int8 = 0
    @Observed var int16: Int16 = 0
    @Observed var int32: Int32 = 0
    @Observed var int16Optional: Int16? = nil
    @Observed var int32Optional: Int32? = nil
    @Observed var uint8: UInt8 = 0
    @Observed var uint16: UInt16 = 0
    @Observed var uint32: UInt32 = 0
    @Observed var uint8Optional: UInt8? = nil
    @Observed var floatOptional: Float? = nil
    @Observed var float: Float = 0
    @Observed var strings: [String] = []
    @Observed var string = ""
    @Observed var array: [Int] = []
    @Observed var set: Set<Int> = []
    @Observed var character: Character = "a"
}

extension Stress {
    /// Batches too large to keep, on fresh objects (the first batch of an object is the registry's
    /// own, kept for reuse when small): its end releases the batch, which must not be touched after.
    static func dropLargeBatches(_ tally: Tally) {
        for round in 0..<20 {
            let wide = StressWide()
            let tokens = [
                wide.observe(\.int8Optional) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int8) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int16) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int32) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int16Optional) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int32Optional) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint8) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint16) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint32) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint8Optional) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.floatOptional) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.float) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.strings) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.string) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.array) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.set) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.character) { _, _ in tally.add(tally.deliveries) },
            ]
            tally.add(tally.registrations, tokens.count)
            let before = tally.deliveries.load(ordering: .relaxed)
            wide.coalescingChanges {
                wide.int8Optional = Int8(truncatingIfNeeded: round)
                wide.int8 = 1
                wide.int16 = 1
                wide.int32 = 1
                wide.int16Optional = 1
                wide.int32Optional = 1
                wide.uint8 = 1
                wide.uint16 = 1
                wide.uint32 = 1
                wide.uint8Optional = 1
                wide.floatOptional = 1
                wide.float = 1
                wide.strings = ["1"]
                wide.string = "1"
                wide.array = [1]
                wide.set = [1]
                wide.character = "b"
            }
            tally.add(tally.sets, 17)
            // Another batch on the same object after the large one was dropped.
            wide.coalescingChanges { wide.int8 = -1 }
            let delivered = tally.deliveries.load(ordering: .relaxed) - before
            if delivered < 18 { tally.fail("a dropped batch delivered \(delivered) changes of 18") }
            for token in tokens { token.invalidate() }
        }
    }
}
