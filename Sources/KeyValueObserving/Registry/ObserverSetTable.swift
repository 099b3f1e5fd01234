/// The observers of an object's `@Observed` properties by storage offset, immutable, as the set path
/// reads them without the lock (`ObserverRegistry+ReadPath.swift`).
///
/// An open-addressed hash table in one allocation: a slot per offset whose property is known (the
/// resolved slots of the registry, with their observers: a single one itself, several in their
/// snapshot, `_BorrowedObservers`; and the offsets a set has revealed that have no observers, with
/// none). A look-up is a multiplication, a shift and usually one comparison,
/// whatever the number of observed keys. While the object has observers of every key, the table also
/// carries them (in its header) and, for each known offset, its key and whether a set of it notifies:
/// a set then tells them without the lock (`Observed._setNotifyingAnyKeyUnlocked`). The table holds
/// one strong reference to each single observer, snapshot and key, released when the table is freed (after every
/// reader that may still use it has left: `_EpochPublished`). A `_HashTable` of `_ObserverSetEntry`.
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
    /// The property's key as its accessor names it, while the object has observers of every key
    /// (`nil` otherwise, or if the registry does not know it).
    @usableFromInline var key: Unmanaged<AnyKeyPath>?
    /// For a property without observers, whether its class lets a set notify
    /// (`automaticallyNotifiesObservers(for:)`); `nil` if not asked yet.
    @usableFromInline var notifiesAutomatically: Bool?

    /// What the header carries.
    @usableFromInline
    struct Extra: BitwiseCopyable {
        /// Some storage slot's offset is still unknown: an offset the table does not have may be its,
        /// and only the registry (under its lock) can tell.
        @usableFromInline let hasUnresolvedSlots: Bool
        /// The observers of every key, `nil` if there are none.
        @usableFromInline let anyKey: Unmanaged<_AnyKeySnapshot>?
    }

    @usableFromInline
    static var free: _ObserverSetEntry { _ObserverSetEntry(offset: .min, observers: nil, key: nil, notifiesAutomatically: nil) }

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
        key?.release()
    }

    /// Whether a set of the property notifies: its observers' answer, else the class's, if known.
    @inlinable
    @inline(__always)
    var notifies: Bool? {
        guard let observers else { return notifiesAutomatically }
        // A single observer is in the table alone only where sets notify.
        return observers.isSingle || observers.snapshot._withUnsafeGuaranteedRef { $0.notifiesAutomatically }
    }

    @usableFromInline
    static func release(_ extra: Extra) {
        extra.anyKey?.release()
    }
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
    static func make(count: Int, hasUnresolvedSlots: Bool, anyKey: _AnyKeySnapshot?) -> _ObserverSetTable {
        make(count: count, extra: .init(hasUnresolvedSlots: hasUnresolvedSlots, anyKey: anyKey.map { Unmanaged.passRetained($0) }))
    }

    @inlinable
    @inline(__always)
    func lookUp(offset: Int) -> _ObserverSetLookUp {
        guard let element = element(for: offset) else { return extra.hasUnresolvedSlots ? .unknown : .none }
        guard let observers = element.observers else { return .none }
        return .observers(observers)
    }

    /// The element of the property stored at `offset`, if the table knows its key and whether a set
    /// of it notifies (borrowed: valid while the caller is a reader); `nil` if the registry must be
    /// asked under its lock.
    @inlinable
    @inline(__always)
    func knownElement(offset: Int) -> _ObserverSetEntry? {
        guard let element = element(for: offset), element.key != nil,
            element.observers != nil || element.notifiesAutomatically != nil
        else { return nil }
        return element
    }

    /// The observers of every key, `nil` if there are none (borrowed: valid while the caller is a reader).
    @inlinable
    @inline(__always)
    var anyKeyObservers: Unmanaged<_AnyKeySnapshot>? { extra.anyKey }

    /// Adds `offset` with its observers (retained by the caller: the table takes that reference) and
    /// its key (retained here), unless the table has it already. Only before the table is published.
    func insert(offset: Int, observers: _BorrowedObservers?, key: AnyKeyPath?, notifiesAutomatically: Bool? = nil) {
        guard element(for: offset) == nil else {
            observers?.release()
            return
        }
        insert(
            _ObserverSetEntry(
                offset: offset,
                observers: observers,
                key: key.map { Unmanaged.passRetained($0) },
                notifiesAutomatically: notifiesAutomatically
            ))
    }
}

extension _ObserverRegistry.State {
    /// The set table for this state, or `nil` when no offset is known and nothing observes every key
    /// (then `observedMask` keeps every set away from the table or, while an observed offset is
    /// unknown, the set path asks the registry under its lock).
    mutating func makeSetTable() -> _ObserverSetTable? {
        var resolved = 0
        var hasUnresolvedSlots = false
        for index in slots.indices where slots[index].kind == .storage {
            if slots[index].offset == nil { hasUnresolvedSlots = true } else { resolved += 1 }
        }
        let anyKey = anyKeyObservers.observers.isEmpty ? nil : anyKeyObservers
        // Without an observed `@Observed` property the mask keeps every set away from the table; with
        // only unresolved ones, a table is worth building once some offset is known. Observers of
        // every key are told from the table, which then carries the keys (else nothing reads them).
        guard resolved > 0 || (hasUnresolvedSlots && !learnedOffsets.isEmpty) || anyKey != nil else { return nil }
        let table = _ObserverSetTable.make(
            count: resolved + learnedOffsets.count, hasUnresolvedSlots: hasUnresolvedSlots, anyKey: anyKey)
        let carriesKeys = anyKey != nil
        for index in slots.indices where slots[index].kind == .storage {
            if let offset = slots[index].offset {
                // A single observer that needs nothing before the store is in the table itself.
                let observers =
                    slots[index].deliversAlone
                    ? _BorrowedObservers(retaining: slots[index].single.unsafelyUnwrapped)
                    : _BorrowedObservers(retaining: snapshot(ofSlotAt: index))
                table.insert(offset: offset, observers: observers, key: carriesKeys ? slots[index].keyPath : nil)
            }
        }
        for index in learnedOffsets.indices {
            let offset = learnedOffsets[index].offset
            guard carriesKeys else {
                table.insert(offset: offset, observers: nil, key: nil)
                continue
            }
            let decision = automaticNotification.first { $0.offset == offset }?.notifies
            table.insert(offset: offset, observers: nil, key: learnedOffsets[index].key, notifiesAutomatically: decision)
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
