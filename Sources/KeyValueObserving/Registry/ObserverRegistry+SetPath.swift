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
    /// slot's observers. `@Observed` keys are plain property key paths: comparing them runs no user code.
    mutating func learn(offset: Int, key: AnyKeyPath) -> _ObserverSnapshot? {
        recordOffset(offset, for: key)
        for index in slots.indices where slots[index].kind == .storage && slots[index].offset == nil {
            if _sameKey(slots[index].keyPath, key) {
                slots[index].offset = offset
                return slots[index].snapshot
            }
        }
        return nil
    }

    /// The slot of the `@Observed` property `keyPath`.
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
        mutex.lock()
        var needsLearning = false
        // Here rather than in a method of `State`, which would copy the state (retaining every field)
        // on this path. By index, reading only the fields needed: copying a slot would retain its
        // key and snapshot.
        for index in state.slots.indices where state.slots[index].kind == .storage {
            let slotOffset = state.slots[index].offset
            if slotOffset == offset {
                let snapshot = state.slots[index].snapshot
                mutex.unlock()
                return snapshot
            }
            needsLearning = needsLearning || slotOffset == nil
        }
        needsLearning = needsLearning && !state.learnedOffsets.contains { $0.offset == offset }
        mutex.unlock()
        guard needsLearning else { return nil }
        let key = key()
        return withState { $0.learn(offset: offset, key: key) }
    }

    /// The observers of a zero-sized `@Observed` property, found by key path.
    @usableFromInline
    func snapshot(forZeroSizedKey key: AnyKeyPath) -> _ObserverSnapshot? {
        mutex.lock()
        defer { mutex.unlock() }
        return state.observedPropertySlotIndex(key, isZeroSized: true).map { state.slots[$0].snapshot }
    }

    /// Records that the explicitly notified key `key` (see `_ExplicitlyNotifiedKeys`) is found at
    /// `offset`, so its slot is resolved from the start and no set ever has to reveal it.
    @usableFromInline
    func declareOffset(_ offset: Int, for key: AnyKeyPath) {
        withState { $0.recordOffset(offset, for: key) }
    }
}
