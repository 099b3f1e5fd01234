/// The observers of an object's `@Observed` properties by storage offset, immutable, as the set path
/// reads them without the lock (`ObserverRegistry+ReadPath.swift`).
///
/// An open-addressed hash table in one allocation: a slot per offset whose property is known (the
/// resolved slots of the registry, with their observers: a single one itself, several in their
/// snapshot, `_BorrowedObservers`; and the offsets a set has revealed that have no observers, with
/// none). A look-up is a multiplication, a shift and usually one comparison, whatever the number of
/// observed keys. The table holds one strong reference to each single observer and snapshot,
/// released when the table is freed (after every reader that may still use it has left:
/// `_EpochPublished`). A `_HashTable` of `_ObserverSetEntry`.
@usableFromInline
typealias _ObserverSetTable = _HashTable<_ObserverSetEntry>

/// An element of the set table: an offset with what the table knows of its property.
@usableFromInline
struct _ObserverSetEntry: _HashTableElement {
    /// `Int.min` for a free element.
    @usableFromInline var offset: Int
    /// The property's observers (one entry alone, or a snapshot); `nil` for a property known to
    /// have none.
    @usableFromInline var observers: _BorrowedObservers?

    /// What the header carries: whether some storage slot's offset is still unknown (an offset the
    /// table does not have may be its, and only the registry, under its lock, can tell).
    @usableFromInline
    struct Extra: BitwiseCopyable {
        @usableFromInline let hasUnresolvedSlots: Bool
    }

    @usableFromInline
    static var free: _ObserverSetEntry { _ObserverSetEntry(offset: .min, observers: nil) }

    /// The table's key: the offset (`key` is the property's key path).
    @inlinable
    @inline(__always)
    var hashKey: Int { offset }

    @inlinable
    @inline(__always)
    var isFree: Bool { offset == .min }

    @inlinable
    @inline(__always)
    static func hash(of offset: Int) -> UInt { UInt(bitPattern: offset) &* _goldenMultiplier }

    @usableFromInline
    func release() {
        observers?.release()
    }

    @usableFromInline
    static func release(_ extra: Extra) {}
}

/// What the set table says about the property stored at an offset.
@usableFromInline
enum _ObserverSetLookUp {
    /// The property's observers (borrowed: valid while the caller is a reader).
    case observers(_BorrowedObservers)
    /// The property has no observers.
    case none
    /// The table does not know the property; the registry must be asked under its lock.
    case unknown
}

extension _HashTable where Entry == _ObserverSetEntry {
    /// An empty table with room for `count` offsets, to be filled by `insert` before it is published.
    static func make(count: Int, hasUnresolvedSlots: Bool) -> _ObserverSetTable {
        make(count: count, extra: .init(hasUnresolvedSlots: hasUnresolvedSlots))
    }

    @inlinable
    @inline(__always)
    func lookUp(offset: Int) -> _ObserverSetLookUp {
        guard let element = element(for: offset) else { return extra.hasUnresolvedSlots ? .unknown : .none }
        guard let observers = element.observers else { return .none }
        return .observers(observers)
    }

    /// Adds `offset` with its observers (retained by the caller: the table takes that reference),
    /// unless the table has it already. Only before the table is published.
    func insert(offset: Int, observers: _BorrowedObservers?) {
        guard element(for: offset) == nil else {
            observers?.release()
            return
        }
        insert(_ObserverSetEntry(offset: offset, observers: observers))
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
            if let offset = slots[index].offset {
                // A single observer that needs nothing before the store is in the table itself.
                let observers =
                    slots[index].deliversAlone
                    ? _BorrowedObservers(retaining: slots[index].single.unsafelyUnwrapped)
                    : _BorrowedObservers(retaining: snapshot(ofSlotAt: index))
                table.insert(offset: offset, observers: observers)
            }
        }
        for index in learnedOffsets.indices {
            table.insert(offset: learnedOffsets[index].offset, observers: nil)
        }
        return table
    }
}

/// The observers of a key as the set table holds them, borrowed for a read section: the key's one
/// observer, when it needs nothing before the store and sets of the key notify (no snapshot is
/// made for it), or its snapshot.
///
/// The fast form (`_kvoFastPathsCompiled`) is one word: the entry's address tagged in its low bit
/// (objects are at least 16-byte aligned). The portable form is an enum of the two references.
#if arch(x86_64) && canImport(Glibc) && !KVO_PORTABLE
@usableFromInline
struct _BorrowedObservers: BitwiseCopyable {
    @usableFromInline let bits: UnsafeRawPointer

    /// Takes one reference to `entry`, which `release()` gives back.
    init(retaining entry: _ObserverEntry) {
        bits = UnsafeRawPointer(Unmanaged.passRetained(entry).toOpaque()) + 1
    }

    /// Takes one reference to `snapshot`, which `release()` gives back.
    init(retaining snapshot: _ObserverSnapshot) {
        bits = UnsafeRawPointer(Unmanaged.passRetained(snapshot).toOpaque())
    }

    /// Whether this is a single observer (`single`), not a snapshot (`snapshot`).
    @inlinable
    @inline(__always)
    var isSingle: Bool { UInt(bitPattern: bits) & 1 != 0 }

    @inlinable
    @inline(__always)
    var single: Unmanaged<_ObserverEntry> { Unmanaged.fromOpaque(bits - 1) }

    @inlinable
    @inline(__always)
    var snapshot: Unmanaged<_ObserverSnapshot> { Unmanaged.fromOpaque(bits) }
}
#else
@usableFromInline
enum _BorrowedObservers: BitwiseCopyable {
    case one(Unmanaged<_ObserverEntry>)
    case several(Unmanaged<_ObserverSnapshot>)

    /// Takes one reference to `entry`, which `release()` gives back.
    init(retaining entry: _ObserverEntry) {
        self = .one(Unmanaged.passRetained(entry))
    }

    /// Takes one reference to `snapshot`, which `release()` gives back.
    init(retaining snapshot: _ObserverSnapshot) {
        self = .several(Unmanaged.passRetained(snapshot))
    }

    /// Whether this is a single observer (`single`), not a snapshot (`snapshot`).
    @inlinable
    @inline(__always)
    var isSingle: Bool {
        if case .one = self { return true }
        return false
    }

    @inlinable
    @inline(__always)
    var single: Unmanaged<_ObserverEntry> {
        guard case .one(let entry) = self else { preconditionFailure("KeyValueObserving: not a single observer") }
        return entry
    }

    @inlinable
    @inline(__always)
    var snapshot: Unmanaged<_ObserverSnapshot> {
        guard case .several(let snapshot) = self else { preconditionFailure("KeyValueObserving: not a snapshot") }
        return snapshot
    }
}
#endif

extension _BorrowedObservers {
    func release() {
        if isSingle { single.release() } else { snapshot.release() }
    }
}
