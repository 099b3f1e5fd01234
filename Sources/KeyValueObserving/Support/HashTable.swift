/// What a `_HashTable` holds: plain words (references unmanaged), one key each.
@usableFromInline
package protocol _HashTableElement: BitwiseCopyable {
    associatedtype Key: Equatable
    /// What the table's header carries beside its geometry (`Void` if nothing).
    associatedtype Extra: BitwiseCopyable = Void

    /// A free element: its `hashKey` is one no element has.
    static var free: Self { get }
    var hashKey: Key { get }
    var isFree: Bool { get }
    /// A well-mixed hash of `key` (a multiplication by an odd constant): the table takes its top bits.
    static func hash(of key: Key) -> UInt
    /// Releases what the element owns, once, when the table is freed.
    func release()
    /// Releases what the header's extra owns, once, when the table is freed.
    static func release(_ extra: Extra)
}

extension _HashTableElement where Extra == Void {
    package static func release(_ extra: Extra) {}
}

/// A `_HashTable`'s header.
@usableFromInline
package struct _HashTableHeader<Extra: BitwiseCopyable> {
    /// Capacity − 1 (the capacity is a power of two).
    @usableFromInline let mask: Int
    /// 64 − log2(capacity): the shift of the multiplicative hash.
    @usableFromInline let shift: Int
    /// How many elements are not free.
    @usableFromInline var count: Int
    @usableFromInline let extra: Extra
}

/// Fibonacci hashing's multiplier, 2⁶⁴ / φ (odd).
@inlinable
package var _goldenMultiplier: UInt { 0x9E37_79B9_7F4A_7C15 }

/// The open-addressed multiplicative-hash table of the lock-free readers (the set path's observers
/// by offset, `ObserverSetTable.swift`; the `@Observed` keys of classes, `ObservedKeyCache.swift`),
/// in one allocation, published with `_EpochPublished`.
///
/// A look-up is a multiplication, a shift and usually one comparison (linear probing, at most half
/// full, so that a search for an absent key ends quickly).
///
/// A table is filled by `insert` before it is published, and immutable from then until it is
/// freed: a reader never sees an element being written. To change a published table, the writer
/// fills a new one (`copy(reserving:)`) and publishes it, which orders every element it wrote
/// before any reader's load of the new table (`_EpochPublished`).
@usableFromInline
package final class _HashTable<Entry: _HashTableElement>: ManagedBuffer<_HashTableHeader<Entry.Extra>, Entry> {
    /// The entries' type (the generic parameter is not a member type).
    @usableFromInline package typealias Element = Entry

    // Invariant: header and elements are written only by `make` and `insert`, before the table is
    // published; afterwards immutable until deinit, which runs only once no reader can reach it.

    /// An empty table with room for `count` elements, to be filled by `insert` before it is published.
    package static func make(count: Int, extra: Entry.Extra) -> _HashTable {
        var capacity = 2
        var shift = 63
        while capacity < count * 2 {
            capacity *= 2
            shift -= 1
        }
        let header = _HashTableHeader(mask: capacity - 1, shift: shift, count: 0, extra: extra)
        let table = unsafeDowncast(create(minimumCapacity: capacity) { _ in header }, to: _HashTable.self)
        table.withUnsafeMutablePointerToElements { $0.initialize(repeating: .free, count: capacity) }
        return table
    }

    /// A new table with this one's elements and extra, and room for `additional` more: the way to
    /// add to a published table (fill the copy, publish it). The elements and the extra are copied
    /// bit for bit, with no retain: only for tables whose elements own nothing (`release()` does
    /// nothing), such as the key cache's; the set table's own references, so it is never copied.
    package func copy(reserving additional: Int) -> _HashTable {
        let (count, extra) = withUnsafeMutablePointerToHeader { ($0.pointee.count, $0.pointee.extra) }
        let copy = Self.make(count: count + additional, extra: extra)
        forEach { copy.insert($0) }
        return copy
    }

    /// Adds `element` unless the table has its key already; `false` if it had. Only before the table
    /// is published; the table takes over what the element owns only if it is added.
    @discardableResult
    package func insert(_ element: Entry) -> Bool {
        withUnsafeMutablePointers { header, elements in
            var index = Self.home(of: element.hashKey, header: header.pointee)
            while !elements[index].isFree {
                if elements[index].hashKey == element.hashKey { return false }
                index = (index &+ 1) & header.pointee.mask
            }
            precondition((header.pointee.count + 1) * 2 <= header.pointee.mask + 1, "a hash table filled past half")
            elements[index] = element
            header.pointee.count += 1
            return true
        }
    }

    /// The element index where the search for `key` starts.
    @inlinable
    @inline(__always)
    static func home(of key: Entry.Key, header: _HashTableHeader<Entry.Extra>) -> Int {
        Int(truncatingIfNeeded: Entry.hash(of: key) &>> UInt(bitPattern: header.shift)) & header.mask
    }

    /// The element with `key`, or `nil`.
    @inlinable
    @inline(__always)
    package func element(for key: Entry.Key) -> Entry? {
        withUnsafeMutablePointers { header, elements in
            var index = Self.home(of: key, header: header.pointee)
            while true {
                let element = elements[index]
                if element.hashKey == key { return element }
                if element.isFree { return nil }
                index = (index &+ 1) & header.pointee.mask
            }
        }
    }

    /// What the header carries beside the geometry.
    @inlinable
    @inline(__always)
    package var extra: Entry.Extra {
        // Through the pointer: the `header` property would check exclusivity dynamically.
        withUnsafeMutablePointerToHeader { $0.pointee.extra }
    }

    /// How many elements the table holds.
    package var count: Int { withUnsafeMutablePointerToHeader { $0.pointee.count } }

    /// Calls `body` with each element, in table order.
    package func forEach(_ body: (Entry) -> Void) {
        withUnsafeMutablePointers { header, elements in
            for index in 0...header.pointee.mask where !elements[index].isFree { body(elements[index]) }
        }
    }

    deinit {
        withUnsafeMutablePointers { header, elements in
            Entry.release(header.pointee.extra)
            for index in 0...header.pointee.mask where !elements[index].isFree { elements[index].release() }
            elements.deinitialize(count: header.pointee.mask + 1)
        }
    }
}
