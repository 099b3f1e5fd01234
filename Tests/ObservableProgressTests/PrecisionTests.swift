import Testing
import TestSupport
@testable import ObservableProgress

@Suite("Progress precision")
struct PrecisionTests {
    @Test func aChildAtThreeTenthsGivesItsParentExactlyThreeTenths() {
        let root = ObservableProgress(totalUnitCount: 1)
        let child = ObservableProgress(totalUnitCount: 10, parent: root, pendingUnitCount: 1)
        child.complete(count: 3)
        #expect(root.fractionCompleted == 0.3)
        #expect(root.description.hasPrefix("30% completed"))
    }

    @Test func aChildWhoseTotalShrinksGivesItsParentTheExactFraction() {
        let root = ObservableProgress(totalUnitCount: 1)
        let child = ObservableProgress(totalUnitCount: 10, parent: root, pendingUnitCount: 1)
        child.completedUnitCount = 4
        child.totalUnitCount = 5
        #expect(root.fractionCompleted == 0.8)
    }

    @Test func aNodeWithoutUnfinishedChildrenReportsExactlyCompletedOverTotal() {
        var random = SplitMix(seed: 7)
        for _ in 0..<1_000 {
            let total = Int64.random(in: 1...(1 << 31), using: &random)
            let pending = Int64.random(in: 1...total, using: &random)
            let root = ObservableProgress(totalUnitCount: total)
            let child = ObservableProgress(totalUnitCount: 7, parent: root, pendingUnitCount: pending)
            child.completedUnitCount = 3
            root.completedUnitCount = Int64.random(in: 0..<(total - pending), using: &random)
            child.completedUnitCount = 0  // the child is at zero: no contribution left
            #expect(root.fractionCompleted == Double(root.completedUnitCount) / Double(total))
            child.completedUnitCount = 7  // the child finishes and credits its pending units
            #expect(root.fractionCompleted == Double(root.completedUnitCount) / Double(total))
        }
    }

    @Test func everyNodeOfRandomTreesIsWithinFourUlpOfTheExactFraction() throws {
        var random = SplitMix(seed: 2024)
        var worst = 0
        for _ in 0..<200 {
            let tree = RandomTree(depth: 4, using: &random)
            // Random updates in random order: counts and totals, never finishing a node.
            for _ in 0..<40 {
                let node = tree.nodes.randomElement(using: &random)!
                if Bool.random(using: &random) {
                    node.progress.completedUnitCount = Int64.random(in: 0..<node.progress.totalUnitCount, using: &random)
                } else {
                    node.progress.totalUnitCount = Int64.random(in: (node.progress.completedUnitCount + 1)...(1 << 31), using: &random)
                }
            }
            for node in tree.nodes {
                let ulps = try #require(
                    node.ulpsFromExactFraction(upTo: 4),
                    "\(node.progress.fractionCompleted) is more than 4 ulp from the exact fraction in \(node.shape)")
                worst = max(worst, ulps)
                if node.children.isEmpty {
                    #expect(
                        node.progress.fractionCompleted == Double(node.progress.completedUnitCount) / Double(node.progress.totalUnitCount))
                }
            }
        }
        #expect(worst <= 4)
    }

    @Test func tinyFractionsDeepInATreeKeepTheirPrecision() throws {
        // Nothing completed above a leaf at 3 of 2^31 − 1 units, under levels of 2^31 units: the
        // root's fraction is about 2^-124, and each level still rounds only once.
        let leaf = RandomTree.Node(progress: ObservableProgress(totalUnitCount: (1 << 31) - 1), pendingInParent: 1)
        var top = leaf
        for pending: Int64 in [1, 3, 5] {
            let node = RandomTree.Node(progress: ObservableProgress(totalUnitCount: 1 << 31), pendingInParent: pending)
            node.progress.addChild(top.progress, withPendingUnitCount: top.pendingInParent)
            node.children = [top]
            top = node
        }
        leaf.progress.completedUnitCount = 3
        var node: RandomTree.Node? = top
        while let current = node {
            #expect(current.ulpsFromExactFraction(upTo: 4) != nil, "\(current.progress.fractionCompleted) in \(current.shape)")
            node = current.children.first
        }
        #expect(top.progress.fractionCompleted > 0)
    }

    @Test func countsNearTheLimitsOfInt64StayExact() {
        let root = ObservableProgress(totalUnitCount: 1 << 62)
        let child = ObservableProgress(totalUnitCount: 3, parent: root, pendingUnitCount: 1 << 62)
        child.completedUnitCount = 1
        #expect(root.fractionCompleted == 1.0 / 3)
        let big = ObservableProgress(totalUnitCount: .max)
        let half = ObservableProgress(totalUnitCount: 2, parent: big, pendingUnitCount: .max - 1)
        big.completedUnitCount = 1
        half.completedUnitCount = 1
        // (1 + (2^63 − 2) / 2) / (2^63 − 1) = 2^62 / (2^63 − 1), which rounds to 1/2
        #expect(big.fractionCompleted == 0.5)
    }

    @Test func descriptionRoundsThePercentageToNearest() {
        let progress = ObservableProgress(totalUnitCount: 1_000)
        progress.completedUnitCount = 296
        #expect(progress.description.hasPrefix("30% completed"))
        progress.completedUnitCount = 294
        #expect(progress.description.hasPrefix("29% completed"))
        progress.completedUnitCount = 4
        #expect(progress.description.hasPrefix("0% completed"))
    }
}

// MARK: A random tree and its exact fractions

/// A progress tree with random totals (up to 2^31), pending counts and completed counts, and the
/// exact rational value of each node's fraction.
final class RandomTree {
    final class Node {
        let progress: ObservableProgress
        let pendingInParent: Int64
        var children: [Node] = []

        init(progress: ObservableProgress, pendingInParent: Int64) {
            self.progress = progress
            self.pendingInParent = pendingInParent
        }

        /// The exact fraction, numerator over denominator: (completed + Σ child × pending) / total.
        var exactFraction: (numerator: BigUInt, denominator: BigUInt) {
            var numerator = BigUInt(UInt64(progress.completedUnitCount))
            var denominator = BigUInt(1)
            for child in children {
                let (childNumerator, childDenominator) = child.exactFraction
                // n/d + p·a/b = (n·b + p·a·d) / (d·b)
                numerator = numerator * childDenominator + childNumerator * BigUInt(UInt64(child.pendingInParent)) * denominator
                denominator = denominator * childDenominator
            }
            return (numerator, denominator * BigUInt(UInt64(progress.totalUnitCount)))
        }

        /// The subtree, for a failure message: completed/total, then the children with their pending counts.
        var shape: String {
            "\(progress.completedUnitCount)/\(progress.totalUnitCount) ["
                + children.map { "\($0.pendingInParent): \($0.shape)" }.joined(separator: ", ") + "]"
        }

        /// How many ulp (rounded up, 0 if exact) `fractionCompleted` is from the exact fraction, or
        /// `nil` if more than `limit`.
        func ulpsFromExactFraction(upTo limit: Int) -> Int? {
            let value = progress.fractionCompleted
            let (numerator, denominator) = exactFraction
            if value == 0 { return numerator == BigUInt(0) ? 0 : nil }
            // value = m · 2^q with ulp 2^q; |m·2^q − n/d| ≤ k·2^q ⟺ |m·d − n·2^-q| ≤ k·d (q < 0).
            let q = Int(value.exponent) - 52
            let m = BigUInt(value.significandBitPattern | 1 << 52)
            let scaledValue = q >= 0 ? (m * denominator) << q : m * denominator
            let scaledExact = q >= 0 ? numerator : numerator << -q
            let distance = scaledValue >= scaledExact ? scaledValue - scaledExact : scaledExact - scaledValue
            for k in 0...limit where distance <= BigUInt(UInt64(k)) * (q >= 0 ? denominator << q : denominator) {
                return k
            }
            return nil
        }
    }

    let nodes: [Node]

    /// A tree of `depth` levels: each node has 0 to 3 children (the root at least one), totals
    /// mixing small and large counts, every node unfinished.
    init<Random: RandomNumberGenerator>(depth: Int, using random: inout Random) {
        func total() -> Int64 {
            switch Int.random(in: 0..<4, using: &random) {
            case 0: Int64.random(in: 1...10, using: &random)
            case 1: Int64.random(in: 1...1_000, using: &random)
            default: Int64.random(in: 1...(1 << 31), using: &random)
            }
        }
        let root = Node(progress: ObservableProgress(totalUnitCount: total()), pendingInParent: 0)
        var nodes = [root]
        var level = [root]
        for depthBelow in 1..<depth {
            var next: [Node] = []
            for parent in level {
                let count = Int.random(in: (depthBelow == 1 ? 1 : 0)...3, using: &random)
                for _ in 0..<count {
                    let pending = Int64.random(in: 1...parent.progress.totalUnitCount, using: &random)
                    let child = Node(progress: ObservableProgress(totalUnitCount: total()), pendingInParent: pending)
                    parent.progress.addChild(child.progress, withPendingUnitCount: pending)
                    parent.children.append(child)
                    next.append(child)
                }
            }
            nodes += next
            level = next
        }
        self.nodes = nodes
        for node in nodes.reversed() where node.progress.totalUnitCount > 0 {
            node.progress.completedUnitCount = Int64.random(in: 0..<node.progress.totalUnitCount, using: &random)
        }
    }
}

/// A minimal arbitrary-precision unsigned integer (little-endian 32-bit limbs), for exact fractions.
struct BigUInt: Comparable {
    var limbs: [UInt32]

    init(_ value: UInt64) {
        limbs = [UInt32(truncatingIfNeeded: value), UInt32(truncatingIfNeeded: value >> 32)]
        normalize()
    }

    private init(limbs: [UInt32]) {
        self.limbs = limbs
        normalize()
    }

    private mutating func normalize() {
        while let last = limbs.last, last == 0 { limbs.removeLast() }
    }

    static func + (a: BigUInt, b: BigUInt) -> BigUInt {
        var result: [UInt32] = []
        var carry: UInt64 = 0
        for index in 0..<max(a.limbs.count, b.limbs.count) {
            let sum = UInt64(index < a.limbs.count ? a.limbs[index] : 0) + UInt64(index < b.limbs.count ? b.limbs[index] : 0) + carry
            result.append(UInt32(truncatingIfNeeded: sum))
            carry = sum >> 32
        }
        result.append(UInt32(carry))
        return BigUInt(limbs: result)
    }

    /// `a − b`, for `a ≥ b`.
    static func - (a: BigUInt, b: BigUInt) -> BigUInt {
        precondition(a >= b, "BigUInt subtraction would be negative")
        var result: [UInt32] = []
        var borrow: Int64 = 0
        for index in 0..<a.limbs.count {
            var difference = Int64(a.limbs[index]) - Int64(index < b.limbs.count ? b.limbs[index] : 0) - borrow
            borrow = difference < 0 ? 1 : 0
            if difference < 0 { difference += 1 << 32 }
            result.append(UInt32(difference))
        }
        return BigUInt(limbs: result)
    }

    static func * (a: BigUInt, b: BigUInt) -> BigUInt {
        var result = [UInt32](repeating: 0, count: a.limbs.count + b.limbs.count + 1)
        for (i, x) in a.limbs.enumerated() {
            var carry: UInt64 = 0
            for (j, y) in b.limbs.enumerated() {
                let product = UInt64(x) * UInt64(y) + UInt64(result[i + j]) + carry
                result[i + j] = UInt32(truncatingIfNeeded: product)
                carry = product >> 32
            }
            result[i + b.limbs.count] = UInt32(carry)
        }
        return BigUInt(limbs: result)
    }

    static func << (a: BigUInt, shift: Int) -> BigUInt {
        precondition(shift >= 0, "BigUInt shifts left only")
        var result = [UInt32](repeating: 0, count: shift / 32) + a.limbs + [0]
        let bits = shift % 32
        if bits > 0 {
            var carry: UInt32 = 0
            for index in (shift / 32)..<result.count {
                let limb = result[index]
                result[index] = (limb << bits) | carry
                carry = limb >> (32 - bits)
            }
        }
        return BigUInt(limbs: result)
    }

    static func < (a: BigUInt, b: BigUInt) -> Bool {
        if a.limbs.count != b.limbs.count { return a.limbs.count < b.limbs.count }
        for index in a.limbs.indices.reversed() where a.limbs[index] != b.limbs[index] {
            return a.limbs[index] < b.limbs[index]
        }
        return false
    }
}
