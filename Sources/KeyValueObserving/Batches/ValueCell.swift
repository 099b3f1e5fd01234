/// Room for one value whose type only the code that stores it knows: in place when it fits in three
/// words and moves bitwise (an `Int`, a `String`, most small structs), else in a box whose reference
/// the first word holds. The cell owns the value but does not release it: `take` moves it out,
/// exactly once.
@usableFromInline
struct _ValueCell {
    @usableFromInline var words: (UInt, UInt, UInt) = (0, 0, 0)

    @inlinable
    init() {}

    @inlinable
    static func fitsInPlace<Value>(_: Value.Type) -> Bool {
        MemoryLayout<Value>.size <= MemoryLayout<(UInt, UInt, UInt)>.size
            && MemoryLayout<Value>.alignment <= MemoryLayout<UInt>.alignment
            && _isBitwiseTakable(Value.self)
    }

    /// The size of a value of `Value` if it is trivial (no references to count) and fits in place;
    /// else -1.
    @inlinable
    static func trivialSize<Value>(_: Value.Type) -> Int {
        _isPOD(Value.self) && fitsInPlace(Value.self) ? MemoryLayout<Value>.size : -1
    }

    /// Stores `value` in the cell at `cell`, which holds no value.
    @inlinable
    static func store<Value>(_ value: Value, in cell: UnsafeMutablePointer<_ValueCell>) {
        if fitsInPlace(Value.self) {
            UnsafeMutableRawPointer(cell).initializeMemory(as: Value.self, to: value)
        } else {
            cell.pointee.words.0 = UInt(bitPattern: Unmanaged.passRetained(_ValueBox(value)).toOpaque())
        }
    }

    /// Copies the value stored at `source` into the cell if it is trivial, `size` (`trivialSize`)
    /// bytes long; `false` if `size` is -1.
    @inline(__always)
    mutating func copyTrivialValue(from source: UnsafeRawPointer, size: Int) -> Bool {
        switch size {
        case 8: words.0 = UInt(truncatingIfNeeded: source.loadUnaligned(as: UInt64.self))
        case 1: words.0 = UInt(source.load(as: UInt8.self))
        case 0: break
        case -1: return false
        default: withUnsafeMutableBytes(of: &words) { $0.baseAddress!.copyMemory(from: source, byteCount: size) }
        }
        return true
    }

    /// Moves the value out of the cell at `cell`, which then holds no value.
    @inlinable
    static func take<Value>(_: Value.Type, from cell: UnsafeMutablePointer<_ValueCell>) -> Value {
        if fitsInPlace(Value.self) {
            return UnsafeMutableRawPointer(cell).assumingMemoryBound(to: Value.self).move()
        }
        return Unmanaged<_ValueBox<Value>>.fromOpaque(UnsafeRawPointer(bitPattern: cell.pointee.words.0)!).takeRetainedValue().value
    }
}

@usableFromInline
final class _ValueBox<Value> {
    @usableFromInline let value: Value

    @inlinable
    init(_ value: Value) {
        self.value = value
    }
}
