/// A non-negative number of units as a 256-bit fixed-point number with 184 fractional bits: a
/// child's contribution to its parent (its fraction times its pending units), and the sum of them
/// that the parent keeps.
///
/// Why so wide: a contribution is computed exactly (a `Double` fraction times an `Int64` count is
/// a 117-bit integer times a power of two) and kept exactly for every fraction from 2^-132 up, so
/// sums are exact and independent of the order the children's updates arrive in, and a parent's
/// fraction is rounded once, when the sum is converted to a `Double`, and once more by the
/// division by its total. Each level thus adds at most one ulp to its children's error: a tree of
/// four levels is within 3.5 ulp of the exact rational value, however small its fractions (in a
/// tree of five levels of up to 2^31 units, the smallest fraction a node passes up is 2^-93).
/// With 64 fractional bits, a contribution below 2^-11 units lost precision, and a parent with
/// nothing completed of its own was off by thousands of ulp.
///
/// Arithmetic wraps modulo 2^256. A contribution is clamped to 2^64 units (more than an `Int64`
/// count of units times a fraction of 1), so the sum a parent holds cannot overflow below 256
/// children at the clamp.
struct _ProgressUnits: Equatable {
    /// Bits 128–255: 72 integer bits and the first 56 fractional bits.
    var high: UInt128
    /// Bits 0–127: the remaining 128 fractional bits.
    var low: UInt128

    static var zero: _ProgressUnits { _ProgressUnits(high: 0, low: 0) }

    /// The largest contribution, 2^64 units.
    static var maximum: _ProgressUnits { _ProgressUnits(high: 1 &<< 120, low: 0) }

    /// `fraction × units`, exactly (rounded to the nearest 2^-184 of a unit for a fraction below
    /// 2^-132), clamped to 2^64 units. `fraction` is that of an unfinished determinate node: never negative
    /// or NaN (those would contribute nothing).
    @inline(__always)
    init(fraction: Double, times units: Int64) {
        let bits = fraction.bitPattern
        // The sign bit lands above the exponent: a negative fraction has a "biased exponent" of
        // 2048 or more. Zero, subnormals (far below 2^-184 units), negative values, infinities and
        // NaN contribute nothing; so does a node that stands for no units.
        let biasedExponent = Int(truncatingIfNeeded: bits &>> 52)
        guard UInt(bitPattern: biasedExponent &- 1) < 2046, units > 0 else {
            self = .zero
            return
        }
        // A fraction below 1 times an `Int64` is below 2^63; above 1, rounding is monotonic: a
        // product that rounds below 2^64 is below 2^64 exactly.
        guard bits < (1.0).bitPattern || fraction * Double(units) < 0x1p64 else {
            self = .maximum
            return
        }
        // fraction = significand × 2^(biasedExponent − 1075), and the result is in units of 2^-184.
        let significand = bits & 0xF_FFFF_FFFF_FFFF | 1 &<< 52
        let shift = biasedExponent &- (1075 &- 184)
        let (productHigh, productLow) = significand.multipliedFullWidth(by: UInt64(units))
        let product = UInt128(productHigh) &<< 64 | UInt128(productLow)
        if shift >= 128 {
            self.init(high: product &<< (shift &- 128), low: 0)
        } else if shift > 0 {
            self.init(high: product &>> (128 &- shift), low: product &<< shift)
        } else if shift > -117 {
            // A fraction below 2^-132: rounded to nearest (product < 2^117, so a shift of 117 or
            // more leaves less than a half).
            let half = UInt128(1) &<< (-shift &- 1)
            self.init(high: 0, low: (product &+ half) &>> -shift)
        } else {
            self = .zero
        }
    }

    @inline(__always)
    init(high: UInt128, low: UInt128) {
        self.high = high
        self.low = low
    }

    @inline(__always)
    static func &+ (a: _ProgressUnits, b: _ProgressUnits) -> _ProgressUnits {
        let (low, carry) = a.low.addingReportingOverflow(b.low)
        return _ProgressUnits(high: a.high &+ b.high &+ (carry ? 1 : 0), low: low)
    }

    @inline(__always)
    static func &- (a: _ProgressUnits, b: _ProgressUnits) -> _ProgressUnits {
        let (low, borrow) = a.low.subtractingReportingOverflow(b.low)
        return _ProgressUnits(high: a.high &- b.high &- (borrow ? 1 : 0), low: low)
    }

    @inline(__always)
    static func &+= (a: inout _ProgressUnits, b: _ProgressUnits) {
        a = a &+ b
    }

    @inline(__always)
    static func &-= (a: inout _ProgressUnits, b: _ProgressUnits) {
        a = a &- b
    }

    /// `(completed + self) / total` for a determinate node with a positive total and a completed
    /// count of at least zero: exactly `Double(completed) / Double(total)` when the children
    /// contribute nothing; otherwise the sum is rounded once to a `Double` and divided once.
    @inline(__always)
    func fraction(plus completed: Int64, over total: Int64) -> Double {
        if high == 0, low == 0 { return Double(completed) / Double(total) }
        let (sum, carry) = high.addingReportingOverflow(UInt128(UInt64(completed)) &<< 56)
        // Only 2^72 units or more carry out: then the two parts are rounded separately.
        let units =
            carry
            ? Double(completed) + double
            : _ProgressUnits(high: sum, low: low).double
        return units / Double(total)
    }

    /// The value in units, correctly rounded.
    @inline(__always)
    var double: Double {
        let words = (
            UInt64(truncatingIfNeeded: high &>> 64), UInt64(truncatingIfNeeded: high),
            UInt64(truncatingIfNeeded: low &>> 64), UInt64(truncatingIfNeeded: low)
        )
        // The first nonzero 64-bit word from the top (the `index`th), the word below it, and
        // whether any bit below those two is set.
        let first: UInt64, second: UInt64, rest: Bool, index: Int
        if words.0 != 0 {
            (first, second, rest, index) = (words.0, words.1, words.2 | words.3 != 0, 0)
        } else if words.1 != 0 {
            (first, second, rest, index) = (words.1, words.2, words.3 != 0, 1)
        } else if words.2 != 0 {
            (first, second, rest, index) = (words.2, words.3, false, 2)
        } else if words.3 != 0 {
            (first, second, rest, index) = (words.3, 0, false, 3)
        } else {
            return 0
        }
        // The top 64 significant bits, with every bit below them folded into a sticky bit, which
        // lies below the rounding position of a 53-bit significand: they round exactly as all 256
        // bits would.
        let zeros = first.leadingZeroBitCount
        var significand = first &<< zeros | (second &>> 1) &>> (63 &- zeros)
        if second &<< zeros != 0 || rest { significand |= 1 }
        // The value is significand × 2^(256 − 64 − zeros − 64 × index − 184).
        return Double(significand) * Double(bitPattern: UInt64(1031 &- zeros &- 64 &* index) &<< 52)
    }
}
