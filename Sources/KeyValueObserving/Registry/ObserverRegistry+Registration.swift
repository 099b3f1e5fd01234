// Adding and removing registrations, and finding a key's observers by slot key.

extension _ObserverRegistry.State {
    /// Adds `entry` to the slot at `index`, or to a new slot of `kind` for `keyPath` if `index` is
    /// `nil`. Returns the snapshot it replaced, to release after unlocking.
    mutating func add(
        _ entry: _ObserverEntry,
        toSlotAt index: Int?,
        kind: _ObserverRegistry.Slot.Kind,
        keyPath: AnyKeyPath,
        notifiesAutomatically: Bool
    ) -> _ObserverSnapshot? {
        guard let index else {
            // `@Observed` keys are plain property key paths: comparing them runs no user code.
            let offset = kind == .storage ? learnedOffsets.first { _sameKey($0.key, keyPath) }?.offset : nil
            // One observer: no snapshot until something asks for one.
            slots.append(
                _ObserverRegistry.Slot(
                    kind: kind, offset: offset, keyPath: keyPath, entry: entry, notifiesAutomatically: notifiesAutomatically))
            if kind == .keyPath { keyPathSlotsVersion &+= 1 }
            return nil
        }
        return slots[index].append(entry)
    }

    /// The key paths of the slots of keys that are not `@Observed`, for comparing outside the lock.
    var keyPathSlotKeys: [AnyKeyPath] {
        mutating get { slots.lazy.filter { $0.kind == .keyPath }.map(\.keyPath) }
    }

    /// The slot whose key path is the object `match` (found by `keyPathSlotKeys`), by identity.
    mutating func keyPathSlotIndex(identicalTo match: AnyKeyPath) -> Int? {
        slots.firstIndex { $0.kind == .keyPath && $0.keyPath === match }
    }

    /// How an addition went.
    enum Addition {
        case added
        /// The object is gone: nothing was added.
        case objectGone
        /// The slots of keys that are not `@Observed` changed since they were compared outside the lock.
        case compareAgain
    }

    /// What `remove(id:into:)` took out, to release after unlocking: their deinit may run user code
    /// that registers or invalidates.
    struct Removed {
        var slots = _ReleaseList<_ObserverRegistry.Slot>()
        var snapshots = _ReleaseList<_ObserverSnapshot>()
        var anyKey: _AnyKeySnapshot?
        var deinitHandler: (@Sendable () -> Void)?
    }

    /// Removes and deactivates the registration `id` wherever it is (an entry of a dependent key sits
    /// in one slot per input), adding what it takes out to `removed`.
    mutating func remove(id: UInt64, into removed: inout Removed) {
        var slotIndex = slots.startIndex
        while slotIndex < slots.endIndex {
            guard let entryIndex = slots[slotIndex].index(ofID: id) else {
                slotIndex += 1
                continue
            }
            switch slots[slotIndex].remove(at: entryIndex) {
            case .wasLast:
                // The slot holds its entry, and its snapshot if it has one.
                let slot = slots.remove(at: slotIndex)
                if slot.kind == .keyPath { keyPathSlotsVersion &+= 1 }
                removed.slots.append(slot)
            case .removed(let replaced):
                removed.snapshots.append(replaced)
                slotIndex += 1
            }
        }
        if let index = anyKeyObservers.observers.firstIndex(where: { $0.id == id }) {
            removed.anyKey = anyKeyObservers
            anyKeyObservers.observers[index].deactivate()
            var remaining = anyKeyObservers.observers
            remaining.remove(at: index)
            anyKeyObservers = _AnyKeySnapshot(observers: remaining)
        }
        if let index = deinitHandlers.firstIndex(where: { $0.id == id }) {
            removed.deinitHandler = deinitHandlers.remove(at: index).handler
        }
    }
}

/// What a removal releases after unlocking: usually one item, kept inline (an array would cost an
/// allocation on every `invalidate()`).
struct _ReleaseList<Element> {
    private var first: Element?
    private var rest: [Element] = []
    private var isEmpty = true

    mutating func append(_ element: Element) {
        if isEmpty {
            first = element
            isEmpty = false
        } else {
            rest.append(element)
        }
    }
}

extension _ObserverRegistry {
    /// Adds `entry` to the observers of `key`. Returns `false` if the object is already gone.
    func add(_ entry: _ObserverEntry, for key: _SlotKey, notifiesAutomatically: Bool = true) -> Bool {
        while true {
            // What the transition replaced, released after unlocking.
            var old: _ObserverSnapshot?
            let outcome: State.Addition
            switch key {
            case .observedProperty(let keyPath, let isZeroSized):
                outcome = withState { state in
                    guard !state.isTornDown else { return .objectGone }
                    old = state.add(
                        entry,
                        toSlotAt: state.observedPropertySlotIndex(keyPath, isZeroSized: isZeroSized),
                        kind: isZeroSized ? .zeroSizedStorage : .storage,
                        keyPath: keyPath,
                        notifiesAutomatically: notifiesAutomatically
                    )
                    return .added
                }
            case .keyPath(let keyPath):
                let (match, version) = matchKeyPathSlot(keyPath)
                outcome = withState { state in
                    guard !state.isTornDown else { return .objectGone }
                    // The slots of such keys changed since they were compared: compare again.
                    guard state.keyPathSlotsVersion == version else { return .compareAgain }
                    old = state.add(
                        entry,
                        toSlotAt: match.flatMap { state.keyPathSlotIndex(identicalTo: $0) },
                        kind: .keyPath,
                        keyPath: keyPath,
                        notifiesAutomatically: notifiesAutomatically
                    )
                    return .added
                }
                withExtendedLifetime(match) {}
            }
            withExtendedLifetime(old) {}
            switch outcome {
            case .added: return true
            case .objectGone: return false
            case .compareAgain: continue
            }
        }
    }

    /// The key path of the slot of a key that is not `@Observed` equal to `keyPath`, if any, and the
    /// `keyPathSlotsVersion` it was found at. Takes the lock only to copy the candidates: they are
    /// compared, and released, outside it, because a user's key path may have subscript arguments,
    /// whose `==` and deinit are user code. The caller re-checks the version under the lock.
    private func matchKeyPathSlot(_ keyPath: AnyKeyPath) -> (match: AnyKeyPath?, version: Int) {
        let (version, candidates) = readState { ($0.keyPathSlotsVersion, $0.keyPathSlotKeys) }
        return (candidates.first { $0 == keyPath }, version)
    }

    /// The observers of `key` now, or `nil` if it has none.
    func snapshot(for key: _SlotKey) -> _ObserverSnapshot? {
        switch key {
        case .observedProperty(let keyPath, let isZeroSized):
            return readState { state in
                state.observedPropertySlotIndex(keyPath, isZeroSized: isZeroSized).map { state.snapshot(ofSlotAt: $0) }
            }
        case .keyPath(let keyPath):
            while true {
                let (match, version) = matchKeyPathSlot(keyPath)
                guard let match else { return nil }
                let (isCurrent, snapshot) = readState { state -> (Bool, _ObserverSnapshot?) in
                    guard state.keyPathSlotsVersion == version else { return (false, nil) }
                    return (true, state.keyPathSlotIndex(identicalTo: match).map { state.snapshot(ofSlotAt: $0) })
                }
                withExtendedLifetime(match) {}
                if isCurrent { return snapshot }
            }
        }
    }

    /// Removes the registration `id`, if it is still there. After this returns, the entry is inactive:
    /// no delivery to it starts any more.
    func remove(id: UInt64) {
        // The action, filled in place: returned through `withState`'s generic result it would cost a copy.
        var removed = State.Removed()
        withState { $0.remove(id: id, into: &removed) }
        // The handler, what it captured and the slots' key paths are released here, outside the lock.
        withExtendedLifetime(removed) {}
    }

    /// Calls `handler` when the object is deallocated, unless registration `id` is removed first.
    /// Returns `false` (and does not keep `handler`) if the object is already gone.
    func onObjectDeinit(id: UInt64, _ handler: @escaping @Sendable () -> Void) -> Bool {
        readState { state in
            guard !state.isTornDown else { return false }
            state.deinitHandlers.append((id, handler))
            return true
        }
    }
}
