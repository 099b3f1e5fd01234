import KeyValueObserving

/// Seventeen observed properties of seventeen value types: one batch setting them all outgrows what
/// a registry keeps of a batch for reuse (a finisher per value type), so its end drops the batch.
/// `@unchecked Sendable`: used by one thread at a time.
final class StressWide: KeyValueObservable, @unchecked Sendable {
    @Observed var int = 0
    @Observed var int8: Int8 = 0
    @Observed var int16: Int16 = 0
    @Observed var int32: Int32 = 0
    @Observed var int64: Int64 = 0
    @Observed var uint: UInt = 0
    @Observed var uint8: UInt8 = 0
    @Observed var uint16: UInt16 = 0
    @Observed var uint32: UInt32 = 0
    @Observed var uint64: UInt64 = 0
    @Observed var double = 0.0
    @Observed var float: Float = 0
    @Observed var bool = false
    @Observed var string = ""
    @Observed var array: [Int] = []
    @Observed var optionalInt: Int? = nil
    @Observed var optionalDouble: Double? = nil
}

extension Stress {
    /// Batches too large to keep, on fresh objects (the first batch of an object is the registry's
    /// own, kept for reuse when small): its end releases the batch, which must not be touched after.
    static func dropLargeBatches(_ tally: Tally) {
        for round in 0..<20 {
            let wide = StressWide()
            let tokens = [
                wide.observe(\.int) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int8) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int16) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int32) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.int64) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint8) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint16) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint32) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.uint64) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.double) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.float) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.bool) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.string) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.array) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.optionalInt) { _, _ in tally.add(tally.deliveries) },
                wide.observe(\.optionalDouble) { _, _ in tally.add(tally.deliveries) },
            ]
            tally.add(tally.registrations, tokens.count)
            let before = tally.deliveries.load(ordering: .relaxed)
            wide.coalescingChanges {
                wide.int = round
                wide.int8 = 1
                wide.int16 = 1
                wide.int32 = 1
                wide.int64 = 1
                wide.uint = 1
                wide.uint8 = 1
                wide.uint16 = 1
                wide.uint32 = 1
                wide.uint64 = 1
                wide.double = 1
                wide.float = 1
                wide.bool = true
                wide.string = "1"
                wide.array = [1]
                wide.optionalInt = 1
                wide.optionalDouble = 1
            }
            tally.add(tally.sets, 17)
            // Another batch on the same object after the large one was dropped.
            wide.coalescingChanges { wide.int = -1 }
            let delivered = tally.deliveries.load(ordering: .relaxed) - before
            if delivered < 18 { tally.fail("a dropped batch delivered \(delivered) changes of 18") }
            for token in tokens { token.invalidate() }
        }
    }
}
