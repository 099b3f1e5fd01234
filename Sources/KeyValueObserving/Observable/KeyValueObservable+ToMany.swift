extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Inserts `newElements` into the array at `keyPath`, at `index`, notifying its observers of an
    /// `.insertion` (Foundation's to-many change): `indexes` are the positions of the new elements,
    /// `newValue` (with `.new`) the inserted elements, `oldValue` nil.
    ///
    /// ```swift
    /// playlist.insert(["Intro"], at: 0, into: \.tracks)
    /// ```
    ///
    /// A plain assignment of the array (`playlist.tracks.append(…)` included) stays a `.setting`
    /// change of the whole array, and so does this method inside a batch (`coalescingChanges`).
    /// Observers that read the array through their own key path (dependent keys, a read-only key
    /// path to an inherited array) get a `.setting` change with the whole array.
    ///
    /// - Complexity: O(*n*) in the length of the array.
    public func insert<Element>(
        _ newElements: [Element],
        at index: Int,
        into keyPath: ReferenceWritableKeyPath<Self, [Element]>
    ) {
        let count = self[keyPath: keyPath].count
        precondition((0...count).contains(index), "insert(_:at:into:): index \(index) is out of bounds 0...\(count)")
        _notifyingToManyChange(
            of: keyPath,
            kind: .insertion,
            indexes: RangeSet(index..<(index + newElements.count)),
            oldElements: nil,
            newElements: newElements
        ) { $0.insert(contentsOf: newElements, at: index) }
    }

    /// Removes the elements at `indexes` from the array at `keyPath`, notifying its observers of a
    /// `.removal`: `oldValue` (with `.old`) holds the removed elements, `newValue` nil.
    ///
    /// - Complexity: O(*n*) in the length of the array.
    public func remove<Element>(
        at indexes: RangeSet<Int>,
        from keyPath: ReferenceWritableKeyPath<Self, [Element]>
    ) {
        let array = self[keyPath: keyPath]
        precondition(
            indexes.ranges.allSatisfy { $0.lowerBound >= 0 && $0.upperBound <= array.count },
            "remove(at:from:): indexes \(indexes.ranges) are out of bounds 0..<\(array.count)"
        )
        _notifyingToManyChange(
            of: keyPath,
            kind: .removal,
            indexes: indexes,
            oldElements: Array(array[indexes]),
            newElements: nil
        ) { $0.removeSubranges(indexes) }
    }

    /// Replaces the elements at `indexes` of the array at `keyPath` by `newElements` (one per index,
    /// in order), notifying its observers of a `.replacement`: `oldValue` holds the replaced elements,
    /// `newValue` the new ones.
    ///
    /// - Complexity: O(*n*) in the length of the array.
    public func replace<Element>(
        at indexes: RangeSet<Int>,
        with newElements: [Element],
        in keyPath: ReferenceWritableKeyPath<Self, [Element]>
    ) {
        let array = self[keyPath: keyPath]
        let positions = indexes.ranges.flatMap { Array($0) }
        precondition(
            positions.allSatisfy { array.indices.contains($0) },
            "replace(at:with:in:): indexes \(indexes.ranges) are out of bounds 0..<\(array.count)"
        )
        precondition(
            positions.count == newElements.count,
            "replace(at:with:in:): \(positions.count) indexes but \(newElements.count) new elements"
        )
        _notifyingToManyChange(
            of: keyPath,
            kind: .replacement,
            indexes: indexes,
            oldElements: positions.map { array[$0] },
            newElements: newElements
        ) { array in
            for (position, element) in zip(positions, newElements) { array[position] = element }
        }
    }

    /// Mutates the array at `keyPath` with `mutate` and notifies its observers of the to-many change,
    /// through the same delivery as a set (`_ObserverSnapshot.willChange`/`didChange`). The setter's
    /// own notification is silenced meanwhile: this one replaces it.
    func _notifyingToManyChange<Element>(
        of keyPath: ReferenceWritableKeyPath<Self, [Element]>,
        kind: KeyValueChangeKind,
        indexes: RangeSet<Int>,
        oldElements: [Element]?,
        newElements: [Element]?,
        mutate: (inout [Element]) -> Void
    ) {
        let registry = _registryCreatingIfNeeded()
        if registry.currentBatch() != nil {
            // In a batch the change is one of the batch's: a `.setting` of the array, at its end.
            mutate(&self[keyPath: keyPath])
            return
        }
        let slots = _ObservationRoute.manualNotificationSlots(for: keyPath, of: self, in: registry)
        let snapshots = slots.compactMap { registry.snapshot(for: $0) }
        let change = _ToManyChange(kind: kind, indexes: indexes, oldElements: oldElements, newElements: newElements)
        // Observers that remove duplicates compare the whole array before and after: then the array
        // after the change is computed first, so that they skip `.prior` too.
        let removesDuplicates = snapshots.contains { $0.entries.contains { $0.removesDuplicates } }
        let before: [Element]? = removesDuplicates ? self[keyPath: keyPath] : nil
        let after: [Element]? = before.map { array in
            var array = array
            mutate(&array)
            return array
        }
        let anyKey = registry.anyKeySnapshot()
        anyKey?.willChange(self, keyPath)
        let pending = snapshots.map { $0.willChange(on: self, oldValue: before, newValue: after, toMany: change) }
        let observedKey = slots.lazy.compactMap { slot -> AnyKeyPath? in
            if case .observedProperty(let key, _) = slot { return key }
            return nil
        }.first
        func store() {
            if let after {
                self[keyPath: keyPath] = after
            } else {
                mutate(&self[keyPath: keyPath])
            }
        }
        if let observedKey {
            registry.silencingSetter(of: observedKey, store)
        } else {
            store()
        }
        let newValue = self[keyPath: keyPath]
        for (snapshot, pending) in zip(snapshots, pending) {
            snapshot.didChange(newValue, oldValue: before, pending: pending, on: self, toMany: change)
        }
        anyKey?.didChange(self, keyPath)
    }
}
