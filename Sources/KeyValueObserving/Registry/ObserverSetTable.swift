/// The observers of an object's `@Observed` properties by storage offset, immutable, as the set path
/// reads them without the lock (`ObserverRegistry+ReadPath.swift`).
///
/// An open-addressed hash table in one allocation: a slot per offset whose property is known (the
/// resolved slots of the registry, with their snapshots, and the offsets a set has revealed that
/// have no observers, with none). A look-up is a multiplication, a shift and usually one comparison,
/// whatever the number of observed keys. The table holds one strong reference to each snapshot,
/// released when the table is freed (after every reader that may still use it has left, see
/// `reclaim()`).
@usableFromInline
final class _ObserverSetTable: ManagedBuffer<_ObserverSetTable.Header, _ObserverSetTable.Element> {
    // Invariant: header and elements are written only by `make(...)`, before the table is published
    // (an atomic store that orders them before any reader's load); afterwards immutable until deinit,
    // which runs only once no reader can reach the table.

    @usableFromInline
    struct Header {
        /// Capacity − 1 (the capacity is a power of two).
        @usableFromInline let mask: Int
        /// 64 − log2(capacity): the shift of the multiplicative hash.
        @usableFromInline let shift: Int
        /// Some storage slot's offset is still unknown: an offset the table does not have may be its,
        /// and only the registry (under its lock) can tell.
        @usableFromInline let hasUnresolvedSlots: Bool
    }

    @usableFromInline
    struct Element {
        /// `emptyOffset` for a free element.
        @usableFromInline var offset: Int
        /// The property's observers; `nil` for a property known to have none.
        @usableFromInline var snapshot: Unmanaged<_ObserverSnapshot>?
    }

    @inlinable
    static var emptyOffset: Int { Int.min }

    /// The element index where the search for `offset` starts.
    @inlinable
    static func home(of offset: Int, header: Header) -> Int {
        Int(truncatingIfNeeded: (UInt(bitPattern: offset) &* 0x9E37_79B9_7F4A_7C15) &>> UInt(header.shift)) & header.mask
    }

    /// What the table says about the property stored at `offset`.
    @usableFromInline
    enum LookUp {
        /// The property's observers (borrowed: valid while the caller is a reader).
        case observers(Unmanaged<_ObserverSnapshot>)
        /// The property has no observers.
        case none
        /// The table does not know the property; the registry must be asked under its lock.
        case unknown
    }

    @inlinable
    @inline(__always)
    func lookUp(offset: Int) -> LookUp {
        withUnsafeMutablePointers { header, elements in
            var index = Self.home(of: offset, header: header.pointee)
            while true {
                let element = elements[index]
                if element.offset == offset {
                    guard let snapshot = element.snapshot else { return .none }
                    return .observers(snapshot)
                }
                if element.offset == Self.emptyOffset {
                    return header.pointee.hasUnresolvedSlots ? .unknown : .none
                }
                index = (index &+ 1) & header.pointee.mask
            }
        }
    }

    /// An empty table with room for `count` offsets, to be filled by `insert` before it is published.
    static func make(count: Int, hasUnresolvedSlots: Bool) -> _ObserverSetTable {
        // At most half full, so that a search for an absent offset ends quickly.
        var capacity = 2
        var shift = 63
        while capacity < count * 2 {
            capacity *= 2
            shift -= 1
        }
        let header = Header(mask: capacity - 1, shift: shift, hasUnresolvedSlots: hasUnresolvedSlots)
        let table = unsafeDowncast(create(minimumCapacity: capacity) { _ in header }, to: _ObserverSetTable.self)
        table.withUnsafeMutablePointers { _, elements in
            elements.initialize(repeating: Element(offset: emptyOffset, snapshot: nil), count: capacity)
        }
        return table
    }

    /// Adds `offset` with its observers (retained), unless the table has it already. Only before the
    /// table is published.
    func insert(offset: Int, snapshot: _ObserverSnapshot?) {
        withUnsafeMutablePointers { header, elements in
            var index = Self.home(of: offset, header: header.pointee)
            while elements[index].offset != Self.emptyOffset {
                if elements[index].offset == offset { return }
                index = (index + 1) & header.pointee.mask
            }
            elements[index] = Element(offset: offset, snapshot: snapshot.map { Unmanaged.passRetained($0) })
        }
    }

    deinit {
        withUnsafeMutablePointers { header, elements in
            for index in 0...header.pointee.mask {
                elements[index].snapshot?.release()
            }
            elements.deinitialize(count: header.pointee.mask + 1)
        }
    }
}

extension _ObserverRegistry.State {
    /// The set table for this state, or `nil` when no offset is known (then `observedMask` keeps
    /// every set away from the table or, while an observed offset is unknown, the set path asks the
    /// registry under its lock).
    mutating func makeSetTable() -> _ObserverSetTable? {
        var resolved = 0
        var hasUnresolvedSlots = false
        for index in slots.indices where slots[index].kind == .storage {
            if slots[index].offset == nil { hasUnresolvedSlots = true } else { resolved += 1 }
        }
        // Without an observed `@Observed` property the mask keeps every set away from the table; with
        // only unresolved ones, a table is worth building once some offset is known.
        guard resolved > 0 || (hasUnresolvedSlots && !learnedOffsets.isEmpty) else { return nil }
        let table = _ObserverSetTable.make(count: resolved + learnedOffsets.count, hasUnresolvedSlots: hasUnresolvedSlots)
        for index in slots.indices where slots[index].kind == .storage {
            if let offset = slots[index].offset { table.insert(offset: offset, snapshot: slots[index].snapshot) }
        }
        for index in learnedOffsets.indices {
            table.insert(offset: learnedOffsets[index].offset, snapshot: nil)
        }
        return table
    }
}
