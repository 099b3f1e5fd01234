import Synchronization

/// The observers of one object, created on its first registration and owned by the object (one
/// strong reference, released in `KeyValueObservable.deinit`) and by each live token.
///
/// Registrations name an `@Observed` property by the key path its accessor receives (learned by the
/// registration probe). The setter names it by the byte offset of its storage, which costs nothing
/// (it folds to a constant), and hands over the key path only lazily, in a closure: the first set of
/// each property on this object calls it, and the registry learns which offset is which key path.
/// From then on a set finds its observers in the published set table by offset, without the lock
/// (`ObserverRegistry+ReadPath.swift`); and `observedMask`, read without the lock, lets sets of
/// properties nobody observes skip even that. Zero-sized properties share offsets, so they are
/// matched by key path instead, under the lock. Keys that are not `@Observed` properties (their
/// observers can only be notified manually) never match a setter.
///
/// The storage is split as in swift-async-algorithms: every mutable field is in one `State` value
/// (`ObserverRegistry+State.swift`), whose mutating methods never run user code and return what must
/// be released or called once the lock is dropped; this class owns the lock and the atomics that
/// setters read without it, and runs those returned actions. The lock is taken in one place,
/// `withLock` (under `withState`, which also republishes the atomics, and `readState`): a
/// transition runs inside it and the effects (handler calls, releases) after it. Each concern is in
/// its own file: `+SetPath` (finding a set's observers), `+Registration` (adding and removing),
/// `+Teardown`, `+AnyKey`, `+ToMany` (silencing the setter during a to-many mutation), `+Batches`
/// and `+BatchDelivery`, `+ManualChanges`, `+Introspection`.
///
/// No user code runs under the lock: handlers are called by the setter after it has taken a
/// snapshot and unlocked; entries and user key paths (which own handlers, captures and subscript
/// arguments) are released only after unlocking; user key paths are compared (which may call a
/// subscript argument's `==`) outside it.
@usableFromInline
final class _ObserverRegistry: @unchecked Sendable {
    // Invariant: `state` is only accessed with `mutex` held (and in deinit, when no one else can
    // reach `self`). Every other stored property is an atomic: `observedMask` and `slowPathFlags`
    // are only written with `mutex` held, right after the `state` change they summarise
    // (releasing), and read without it (acquiring); `nextID` is a counter; `setTables` publishes
    // the set table to lock-free readers (`_EpochPublished`; writers hold `mutex`, the lock it
    // guards its retired tables with). `mutex` is destroyed in deinit, when no one else can reach
    // `self`. The mutex makes every
    // access to `state` exclusive, so the dynamic exclusivity checks (a thread-local access set, on
    // every set of an observed property) are redundant: `@exclusivity(unchecked)`.
    private let mutex = PlatformLock()
    @exclusivity(unchecked) var state = State()

    /// One bit per storage offset class (`_maskBit(forOffset:)`) that may have observers; all bits
    /// while some observed property's offset is still unknown, or while there are observers of
    /// every key.
    @usableFromInline let observedMask = Atomic<UInt64>(0)
    /// Why a set must take the locked path (`_SlowPath` bits: observers of every key, an open
    /// batch, a silenced setter), or 0. One load for all of them on the set path. Stored from the
    /// state with the lock held (`storeStateFlags`).
    @usableFromInline let slowPathFlags = Atomic<UInt8>(0)
    /// The next registration id: from 1, per registry, never reaching the top bit, which a token
    /// keeps for its "invalidated" flag (`KeyValueObservation.idAndState`).
    private let nextID = Atomic<UInt64>(1)
    /// The observers of the `@Observed` properties by storage offset, as the set path reads them
    /// without the lock (`ObserverRegistry+ReadPath.swift`): no table until a set needs it after a
    /// change of the observed keys. Published only with the lock held.
    @usableFromInline let setTables = _EpochPublished<_ObserverSetTable>()
    /// The size of the object's heap block, in bytes from its start: an `@Observed`
    /// property's storage must end within it for a set to write through the storage offset
    /// (`holdsStorage`).
    @usableFromInline let storageEnd: Int

    /// A registry for an object whose heap block ends `storageEnd` bytes after its start.
    init(storageEnd: Int) {
        self.storageEnd = storageEnd
    }

    deinit {
        // No reader can exist: a set holds the object, which holds the registry. `setTables` frees
        // its tables as it goes.
    }

    @usableFromInline
    func makeID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    /// Whether `size` bytes at `offset` lie within `object`, this registry's object, after its
    /// header: where a set may write through an `@Observed` property's storage offset
    /// (`Observed._storageOffset`). Two compares: the offset is a constant, `storageEnd` is loaded.
    @inlinable
    @inline(__always)
    func holdsStorage(of object: AnyObject, at offset: Int, size: Int) -> Bool {
        let base = UnsafeMutableRawPointer(Unmanaged.passUnretained(object).toOpaque())
        return offset >= _getUnsafePointerToStoredProperties(object) - base && offset <= storageEnd &- size
    }

    /// Whether the object has observers of every key.
    @inlinable
    var hasAnyKeyObservers: Bool {
        slowPathFlags.load(ordering: .acquiring) & _SlowPath.anyKey != 0
    }

    /// Runs `body` with the lock held: the one place the registry takes it. `body` is a transition of
    /// the state: it runs no user code, calls no handler and releases nothing that owns user code
    /// (entries, snapshots, user key paths); it returns, or fills in an `inout` action of the caller,
    /// what to deliver, call or release, and the caller does that after this returns. Transitions
    /// that reach the set table use this one; the others `withState`.
    @inline(__always)
    func withLock<Result>(_ body: () -> Result) -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return body()
    }

    /// Runs the transition `body` on the state (see `withLock`), then republishes the atomics that
    /// summarise it (`publish()`) and, after unlocking, frees the set tables no reader can be using.
    @inline(__always)
    func withState<Result>(_ body: (inout State) -> Result) -> Result {
        let result = withLock {
            let result = body(&state)
            publish()
            return result
        }
        reclaimIfNeeded()
        return result
    }

    /// Runs the read-only transition `body` on the state under the lock, publishing nothing.
    @inline(__always)
    func readState<Result>(_ body: (inout State) -> Result) -> Result {
        withLock { body(&state) }
    }

    /// Stores `observedMask` and `slowPathFlags` from the state, and unpublishes the set table if the
    /// observed keys changed (the set path has the next one built). Called with the lock held; the
    /// caller calls `reclaimIfNeeded()` after unlocking.
    func publish() {
        retireStaleSetTable()
        observedMask.store(state.observedMask, ordering: .releasing)
        storeStateFlags()
    }

    /// Stores `slowPathFlags` from the state, if they differ. Called with the lock held.
    @inline(__always)
    func storeStateFlags() {
        let flags = state.slowPathFlags
        // Most transitions leave the flags as they are: then nothing is stored.
        if slowPathFlags.load(ordering: .relaxed) != flags { slowPathFlags.store(flags, ordering: .releasing) }
    }
}

/// Why a set must take the locked path, as bits of `_ObserverRegistry.slowPathFlags`.
@usableFromInline
enum _SlowPath {
    /// The object has observers of every key.
    @inlinable static var anyKey: UInt8 { 1 }
    /// Some thread's record holds an open batch.
    @inlinable static var batch: UInt8 { 2 }
    /// Some thread is mutating a to-many property through the library (its setter is silenced).
    @inlinable static var silencedSetter: UInt8 { 4 }
}

/// The bit of `_ObserverRegistry.observedMask` for a storage offset. Distinct offsets may share a bit
/// (then a set takes the lock to find out); an offset's bit is always the same.
@inlinable
func _maskBit(forOffset offset: Int) -> UInt64 {
    1 &<< UInt64(truncatingIfNeeded: (offset &>> 3) & 63)
}

/// `Optional`, seen through its wrapped type (a path continues through an optional child).
protocol _OptionalType {
    static var _wrappedType: Any.Type { get }
}

extension Optional: _OptionalType {
    static var _wrappedType: Any.Type { Wrapped.self }
}

/// Where a registration goes in the registry.
enum _SlotKey {
    /// An `@Observed` property, named by the key path its accessor receives.
    case observedProperty(AnyKeyPath, isZeroSized: Bool)
    /// A key that is not an `@Observed` property, matched by key-path equality.
    case keyPath(AnyKeyPath)
}

extension _SlotKey {
    func isSame(as other: _SlotKey) -> Bool {
        switch (self, other) {
        case (.observedProperty(let a, let zeroA), .observedProperty(let b, let zeroB)): zeroA == zeroB && _sameKey(a, b)
        case (.keyPath(let a), .keyPath(let b)): _sameKey(a, b)
        default: false
        }
    }
}

/// Whether two keys name the same property: the same object for uniqued key-path literals, else
/// equal (key paths of generic classes are not uniqued).
func _sameKey(_ a: AnyKeyPath, _ b: AnyKeyPath) -> Bool {
    a === b || a == b
}
