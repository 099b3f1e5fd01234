import Synchronization

// Finding the observers of a set: by storage offset, learning offsets lazily.

extension _ObserverRegistry.State {
    /// Records that `key` is stored at `offset`.
    mutating func recordOffset(_ offset: Int, for key: AnyKeyPath) {
        if !learnedOffsets.contains(where: { $0.offset == offset }) {
            learnedOffsets.append((offset, key))
        }
    }

    /// Records which key is stored at `offset`, resolves the slot waiting for it, and returns that
    /// slot's index. `@Observed` keys are plain property key paths: comparing them runs no user code.
    @discardableResult
    mutating func learn(offset: Int, key: AnyKeyPath) -> Int? {
        recordOffset(offset, for: key)
        for index in slots.indices where slots[index].kind == .storage && slots[index].offset == nil {
            if _sameKey(slots[index].keyPath, key) {
                slots[index].offset = offset
                return index
            }
        }
        return nil
    }

    /// The observers of the `@Observed` property stored at `offset`, or whether a set of it must
    /// reveal its key (some slot waits to learn its offset, and this one may be it).
    mutating func snapshot(forStorageAt offset: Int) -> (snapshot: _ObserverSnapshot?, needsLearning: Bool) {
        var needsLearning = false
        // By index, reading only the fields needed: copying a slot would retain its key and snapshot.
        for index in slots.indices where slots[index].kind == .storage {
            let slotOffset = slots[index].offset
            if slotOffset == offset { return (snapshot(ofSlotAt: index), false) }
            needsLearning = needsLearning || slotOffset == nil
        }
        return (nil, needsLearning && !learnedOffsets.contains { $0.offset == offset })
    }

    /// The slot of the `@Observed` property `keyPath`. Inlined into registration, which the gate's
    /// `register-invalidate` measures (the optimiser does not inline it on its own).
    @inline(__always)
    mutating func observedPropertySlotIndex(_ keyPath: AnyKeyPath, isZeroSized: Bool) -> Int? {
        let kind: _ObserverRegistry.Slot.Kind = isZeroSized ? .zeroSizedStorage : .storage
        return slots.firstIndex { $0.kind == kind && _sameKey($0.keyPath, keyPath) }
    }
}

extension _ObserverRegistry {
    /// Whether the property stored at `offset` may have observers; `false` is definite.
    @inlinable
    func mayHaveObservers(atOffset offset: Int) -> Bool {
        observedMask.load(ordering: .acquiring) & _maskBit(forOffset: offset) != 0
    }

    /// The observers of the `@Observed` property stored at `offset`, or `nil` if it has none.
    /// `key` is called only while this object still has to learn which property `offset` is.
    ///
    /// - Complexity: O(*k*) in the number of observed keys of this object, by integer comparison.
    @usableFromInline
    func snapshot(forStorageAt offset: Int, key: () -> AnyKeyPath) -> _ObserverSnapshot? {
        let (found, needsLearning) = readState { $0.snapshot(forStorageAt: offset) }
        guard needsLearning else { return found }
        let key = key()
        return withState { state in state.learn(offset: offset, key: key).map { state.snapshot(ofSlotAt: $0) } }
    }

    /// Records that the explicitly notified key `key` (see `_ExplicitlyNotifiedKeys`) is found at
    /// `offset`, so its slot is resolved from the start and no set ever has to reveal it.
    @usableFromInline
    func declareOffset(_ offset: Int, for key: AnyKeyPath) {
        withState { $0.recordOffset(offset, for: key) }
    }
}
