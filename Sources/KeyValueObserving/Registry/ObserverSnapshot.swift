/// The observers of one key at one moment, immutable. The registry replaces a key's snapshot on every
/// registration and removal; a key with a single observer has none until a path beyond the set table
/// asks for one (`_ObserverRegistry.Slot`), and the set table holds that observer itself
/// (`_BorrowedObservers`). A setter borrows the current one from the published set table, with no
/// lock and no retain, for the time of its read section (`ObserverRegistry+ReadPath.swift`); the slow
/// path (`Observed+SlowPath.swift`) and a batch's end take it under the lock (a retain, or the copy of
/// the slots array that holds it) and deliver from it after unlocking. Either way handlers never run
/// under the lock and may register or invalidate.
///
/// The entries are tail-allocated, in registration order: a snapshot is one allocation, and freeing
/// it releases its entries directly (an array would be a second allocation, destroyed through the
/// runtime's generic `swift_arrayDestroy`).
@usableFromInline
final class _ObserverSnapshot: ManagedBuffer<_ObserverSnapshot.Header, _ObserverEntry> {
    // Not `Sendable` (a `ManagedBuffer` cannot be), but safe to share between threads: header and
    // entries are written only by `make(count:notifiesAutomatically:fill:)`, before the snapshot is
    // shared, and immutable afterwards until deinit; the entries are themselves thread-safe.

    @usableFromInline
    struct Header {
        @usableFromInline let count: Int
        @usableFromInline let isPlain: Bool
        @usableFromInline let needsOld: Bool
        @usableFromInline let needsWillChange: Bool
        @usableFromInline let hasIndirect: Bool
        @usableFromInline let indirectNeedsWillChange: Bool
        @usableFromInline let notifiesAutomatically: Bool
    }

    // The header is read through its pointer: the `header` property of `ManagedBuffer` is a class
    // property, with a dynamic exclusivity check on every access.
    /// The number of entries.
    @inlinable var count: Int { withUnsafeMutablePointerToHeader { $0.pointee.count } }
    /// Every entry is direct and none asked for `.old` or `.prior`: the set path needs nothing but the new value.
    @inlinable var isPlain: Bool { withUnsafeMutablePointerToHeader { $0.pointee.isPlain } }
    /// Some direct entry needs the value before the change (`.old` or `.prior`).
    @inlinable var needsOld: Bool { withUnsafeMutablePointerToHeader { $0.pointee.needsOld } }
    /// Some entry needs work before the change: a direct `.prior`, or any indirect entry.
    @inlinable var needsWillChange: Bool { withUnsafeMutablePointerToHeader { $0.pointee.needsWillChange } }
    @inlinable var hasIndirect: Bool { withUnsafeMutablePointerToHeader { $0.pointee.hasIndirect } }
    /// Some indirect entry needs its value before the change (`.old` or `.prior`).
    @inlinable var indirectNeedsWillChange: Bool { withUnsafeMutablePointerToHeader { $0.pointee.indirectNeedsWillChange } }
    /// `false` when the class turned automatic notification off for this key
    /// (`automaticallyNotifiesObservers(for:)`): sets do not notify, only `didChangeValue(for:)` does.
    @inlinable var notifiesAutomatically: Bool { withUnsafeMutablePointerToHeader { $0.pointee.notifiesAutomatically } }

    /// Calls `body` with each entry, unretained (valid while the caller holds the snapshot), and its
    /// index, in registration order.
    @inlinable
    @inline(__always)
    func forEachEntry(_ body: (_ index: Int, _ entry: Unmanaged<_ObserverEntry>) -> Void) {
        withUnsafeMutablePointers { header, elements in
            let count = header.pointee.count
            var index = 0
            while index < count {
                body(index, Unmanaged.passUnretained(elements[index]))
                index &+= 1
            }
        }
    }

    /// The entries, in registration order (a view that holds the snapshot).
    var entries: Entries { Entries(snapshot: self) }

    struct Entries: RandomAccessCollection {
        let snapshot: _ObserverSnapshot
        var startIndex: Int { 0 }
        var endIndex: Int { snapshot.count }
        subscript(index: Int) -> _ObserverEntry {
            precondition(index >= 0 && index < snapshot.count, "_ObserverSnapshot: entry index out of range")
            return snapshot.withUnsafeMutablePointerToElements { $0[index] }
        }
    }

    /// No observers.
    // Invariant: immutable (see above), so sharing it between threads is safe.
    nonisolated(unsafe) static let none = make(count: 0, notifiesAutomatically: true) { _ in }

    /// A snapshot of `entries`.
    static func make(entries: some Collection<_ObserverEntry>, notifiesAutomatically: Bool) -> _ObserverSnapshot {
        make(count: entries.count, notifiesAutomatically: notifiesAutomatically) { elements in
            // Traps if `entries` yields fewer or more than `count`: no element is left uninitialised.
            _ = UnsafeMutableBufferPointer(start: elements, count: entries.count).initialize(fromContentsOf: entries)
        }
    }

    /// A snapshot of `first` and `second` (with no array to allocate, under the registry's lock).
    static func make(_ first: _ObserverEntry, _ second: _ObserverEntry, notifiesAutomatically: Bool) -> _ObserverSnapshot {
        make(count: 2, notifiesAutomatically: notifiesAutomatically) { elements in
            elements.initialize(to: first)
            (elements + 1).initialize(to: second)
        }
    }

    /// This snapshot's entries followed by `entry`.
    func appending(_ entry: _ObserverEntry) -> _ObserverSnapshot {
        withUnsafeMutablePointerToElements { old in
            Self.make(count: count + 1, notifiesAutomatically: notifiesAutomatically) { elements in
                elements.initialize(from: old, count: count)
                (elements + count).initialize(to: entry)
            }
        }
    }

    /// This snapshot's entries without the one at `index`.
    func removing(at index: Int) -> _ObserverSnapshot {
        withUnsafeMutablePointerToElements { old in
            Self.make(count: count - 1, notifiesAutomatically: notifiesAutomatically) { elements in
                elements.initialize(from: old, count: index)
                (elements + index).initialize(from: old + index + 1, count: count - index - 1)
            }
        }
    }

    /// A snapshot of `count` entries, which `fill` initialises.
    private static func make(
        count: Int,
        notifiesAutomatically: Bool,
        fill: (UnsafeMutablePointer<_ObserverEntry>) -> Void
    ) -> _ObserverSnapshot {
        // Room for a power of two of entries: a key whose observers come and go then replaces its
        // snapshot with one of the same size, which the allocator hands back from its cache (exact
        // sizes would leave a freed block of every size behind in the allocator's caches).
        let capacity = count <= 1 ? count : 1 &<< (Int.bitWidth - (count - 1).leadingZeroBitCount)
        let buffer = create(minimumCapacity: capacity) { _ in
            Header(
                count: 0, isPlain: true, needsOld: false, needsWillChange: false, hasIndirect: false,
                indirectNeedsWillChange: false, notifiesAutomatically: notifiesAutomatically)
        }
        let snapshot = unsafeDowncast(buffer, to: _ObserverSnapshot.self)
        snapshot.withUnsafeMutablePointers { header, elements in
            fill(elements)
            var needsOld = false
            var needsPrior = false
            var hasIndirect = false
            var indirectNeedsWillChange = false
            for entry in UnsafeMutableBufferPointer(start: elements, count: count) {
                let wantsBefore = !entry.options.isDisjoint(with: [.old, .prior])
                if entry.isDirect {
                    needsOld = needsOld || wantsBefore || entry.removesDuplicates
                    needsPrior = needsPrior || entry.options.contains(.prior)
                } else {
                    hasIndirect = true
                    indirectNeedsWillChange = indirectNeedsWillChange || wantsBefore
                }
            }
            header.pointee = Header(
                count: count,
                isPlain: !needsOld && !hasIndirect,
                needsOld: needsOld,
                needsWillChange: needsPrior || indirectNeedsWillChange,
                hasIndirect: hasIndirect,
                indirectNeedsWillChange: indirectNeedsWillChange,
                notifiesAutomatically: notifiesAutomatically
            )
        }
        return snapshot
    }

    /// The index of the entry of registration `id`, if it is here.
    func index(ofID id: UInt64) -> Int? {
        var found: Int?
        forEachEntry { index, entry in
            if found == nil && entry._withUnsafeGuaranteedRef({ $0.id }) == id { found = index }
        }
        return found
    }

    deinit {
        withUnsafeMutablePointers { header, elements in
            // One release per entry: `deinitialize(count:)` would go through the runtime's generic
            // `swift_arrayDestroy` and a value witness per element.
            for index in 0..<header.pointee.count { _ = (elements + index).move() }
        }
    }
}

// The delivery loops, called by the `@Observed` setter. They are generic over the value, never over a
// key path, and inlinable so that the client specialises them. Entries are borrowed without a
// retain (`_withUnsafeGuaranteedRef`), and so are their handlers: the caller holds the snapshot, which
// holds them, for the whole loop.
extension _ObserverSnapshot {
    /// Delivers a change to a snapshot of direct observers that want no old value. `object` is of
    /// static type `Root` (the class that declares the property, on the set path): observers
    /// registered with that root type get the change from one call of their handler, the others
    /// through `handler(_:_:)`.
    @inlinable
    @inline(__always)
    func deliverPlain<Root: AnyObject, Value>(_ newValue: Value, on object: Root) {
        forEachEntry { _, unretained in
            unretained._withUnsafeGuaranteedRef { Self.deliverPlain(newValue, to: $0, on: object) }
        }
    }

    /// Delivers a change, after the store, to one direct observer that wants no old value.
    @inlinable
    @inline(__always)
    static func deliverPlain<Root: AnyObject, Value>(_ newValue: Value, to entry: _ObserverEntry, on object: Root) {
        let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
        guard observer.isActive else { return }
        let change = KeyValueObservedChange(settingNew: observer.options.contains(.new) ? newValue : nil, old: nil)
        if observer.rootType == ObjectIdentifier(Root.self) {
            // The observer was registered with this very class: its handler takes `Root`.
            unsafeDowncast(observer, to: _RootedDirectObserver<Root, Value>.self).rootedHandler(object, change)
        } else {
            observer.handler(object, change)
        }
    }

    /// Delivers a change, after the store, to a key's only observer, which needs nothing before it
    /// (the set table holds such an observer without a snapshot: `_BorrowedObservers`).
    @inlinable
    @inline(__always)
    static func deliverAlone<Root: AnyObject, Value>(_ newValue: Value, to entry: _ObserverEntry, on object: Root) {
        if entry.isDirect {
            deliverPlain(newValue, to: entry, on: object)
        } else {
            entry.didChange(object)
        }
    }

    /// Before the store: prior notifications, in registration order, and the old values of observers
    /// that read through their key paths (indexed like `entries`), or `nil` if none needs one.
    ///
    /// `oldValue` and `newValue` are whole values (`newValue` only where known before the store: it
    /// lets observers that remove duplicates skip `.prior`). With `toMany`, direct observers are told
    /// of that to-many change instead of a `.setting`.
    @inlinable
    func willChange<Value>(
        on object: AnyObject,
        oldValue: Value?,
        newValue: Value? = nil,
        batch: _BatchState? = nil,
        valueHasChanged: Bool = false,
        toMany: _ToManyChange<Value>? = nil
    ) -> ContiguousArray<Any?>? {
        guard needsWillChange else { return nil }
        var pending: ContiguousArray<Any?>? = indirectNeedsWillChange ? ContiguousArray(repeating: nil, count: count) : nil
        forEachEntry { index, unretained in
            unretained._withUnsafeGuaranteedRef { entry in
                // In a batch, an observer hears of the first change that reaches it only. A direct
                // observer observes one key, whose first change is the only one that gets here.
                if let batch, !entry.isDirect, !batch.prime(entry.id) { return }
                if entry.isDirect {
                    let options = entry.options
                    guard options.contains(.prior), entry.isActive else { return }
                    let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
                    if let newValue, observer.skips(oldValue, newValue) { return }
                    if let toMany {
                        observer.handler(object, KeyValueObservedChange(toMany: toMany, options: options, isPrior: true))
                        return
                    }
                    observer.handler(
                        object,
                        KeyValueObservedChange(settingNew: nil, old: options.contains(.old) ? oldValue : nil, isPrior: true)
                    )
                } else if pending != nil {
                    pending![index] = entry.willChange(object, valueHasChanged: valueHasChanged)
                }
            }
        }
        return pending
    }

    /// After the store: the change notifications, in registration order. With `toMany`, direct
    /// observers are told of that to-many change instead of a `.setting` (`oldValue` and `newValue`,
    /// the whole values, then only serve observers that remove duplicates).
    @inlinable
    func didChange<Value>(
        _ newValue: Value,
        oldValue: Value?,
        pending: ContiguousArray<Any?>?,
        on object: AnyObject,
        batch: _BatchState? = nil,
        toMany: _ToManyChange<Value>? = nil
    ) {
        forEachEntry { index, unretained in
            unretained._withUnsafeGuaranteedRef { entry in
                // In a batch, an observer is notified once, for the first key that reached it (a direct
                // observer observes one key, delivered once).
                if let batch, !entry.isDirect, !batch.deliver(entry.id) { return }
                if entry.isDirect {
                    guard entry.isActive else { return }
                    let options = entry.options
                    let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
                    if observer.skips(oldValue, newValue) { return }
                    if let toMany {
                        observer.handler(object, KeyValueObservedChange(toMany: toMany, options: options, isPrior: false))
                        return
                    }
                    observer.handler(
                        object,
                        KeyValueObservedChange(
                            settingNew: options.contains(.new) ? newValue : nil,
                            old: options.contains(.old) ? oldValue : nil
                        )
                    )
                } else if let pending {
                    entry.didChange(object, old: pending[index])
                } else {
                    // No indirect entry asked for a value before the change: no `Any?` to pass.
                    entry.didChange(object)
                }
            }
        }
    }
}
