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

    /// Inserts `newElement` into the array at `keyPath`, at `index`, notifying its observers of an
    /// `.insertion` of one element (`indexes` holds `index`), as `insert(_:at:into:)` with an array.
    ///
    /// ```swift
    /// playlist.insert("Intro", at: 0, into: \.tracks)
    /// ```
    ///
    /// Where an array literal could be either (the elements are arrays themselves, or `Any`), the
    /// array form wins, as it did before this form existed: `insert([1, 2], at: 0, into: \.anys)`
    /// inserts two elements, and `insert([], at: 0, into: \.grid)` on a `[[Int]]` property inserts
    /// none. Insert one such element as `insert([[1, 2]], at: 0, into: \.grid)`.
    ///
    /// - Complexity: O(*n*) in the length of the array.
    @_disfavoredOverload
    public func insert<Element>(
        _ newElement: Element,
        at index: Int,
        into keyPath: ReferenceWritableKeyPath<Self, [Element]>
    ) {
        insert([newElement], at: index, into: keyPath)
    }

    /// Inserts `newElements` into the array at `keyPath`, one at each position of `indexes` (in
    /// order), notifying its observers of an `.insertion`: `indexes` are the positions of the new
    /// elements in the array after the change, as in Foundation's `insertObjects(_:at:)`.
    ///
    /// ```swift
    /// playlist.insert(["Intro", "Outro"], at: RangeSet([0, 3], within: 0..<4), into: \.tracks)
    /// ```
    ///
    /// - Precondition: `indexes` has one position per new element, each less than the length of
    ///   the array after the change.
    /// - Complexity: O(*n*) in the length of the array.
    public func insert<Element>(
        _ newElements: [Element],
        at indexes: RangeSet<Int>,
        into keyPath: ReferenceWritableKeyPath<Self, [Element]>
    ) {
        let count = self[keyPath: keyPath].count
        let positions = indexes.ranges.flatMap { Array($0) }
        precondition(
            positions.count == newElements.count,
            "insert(_:at:into:): \(positions.count) indexes but \(newElements.count) new elements"
        )
        precondition(
            positions.allSatisfy { (0..<(count + newElements.count)).contains($0) },
            "insert(_:at:into:): indexes \(indexes.ranges) are out of bounds 0..<\(count + newElements.count)"
        )
        _notifyingToManyChange(
            of: keyPath,
            kind: .insertion,
            indexes: indexes,
            oldElements: nil,
            newElements: newElements
        ) { array in
            // Positions ascend, and each is one in the final array: the old elements fill the gaps.
            var merged: [Element] = []
            merged.reserveCapacity(array.count + newElements.count)
            var old = array.makeIterator()
            var new = zip(positions, newElements).makeIterator()
            var next = new.next()
            while merged.count < array.count + newElements.count {
                if let (position, element) = next, position == merged.count {
                    merged.append(element)
                    next = new.next()
                } else if let element = old.next() {
                    merged.append(element)
                }
            }
            array = merged
        }
    }

    /// Removes the element at `index` from the array at `keyPath`, notifying its observers of a
    /// `.removal` of one element (`indexes` holds `index`), as `remove(at:from:)` with a `RangeSet`.
    ///
    /// ```swift
    /// playlist.remove(at: 0, from: \.tracks)
    /// ```
    ///
    /// - Complexity: O(*n*) in the length of the array.
    public func remove<Element>(
        at index: Int,
        from keyPath: ReferenceWritableKeyPath<Self, [Element]>
    ) {
        let count = self[keyPath: keyPath].count
        precondition((0..<count).contains(index), "remove(at:from:): index \(index) is out of bounds 0..<\(count)")
        remove(at: RangeSet(index..<(index + 1)), from: keyPath)
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
