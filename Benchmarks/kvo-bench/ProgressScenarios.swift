import Foundation
import KeyValueObserving
import ObservableProgress

/// A chain of progress nodes, each standing for its parent's single unit, so that every update of
/// the leaf changes the fraction of every level (a leaf of 1,000,000 units moves each level by a
/// millionth). The leaf is reset to 0 before it would finish (a finished child leaves the tree):
/// the reset is itself one update, counted as one operation.
final class ProgressChain {
    static let leafUnits: Int64 = 1_000_000
    let nodes: [ObservableProgress]
    let leaf: ObservableProgress
    let root: ObservableProgress
    /// The leaf's completed count, as the loop knows it.
    @exclusivity(unchecked) var expectedCompleted: Int64 = 0

    init(depth: Int) {
        nodes = Self.nodes(depth: depth) { units, parent in
            parent.map { ObservableProgress(totalUnitCount: units, parent: $0, pendingUnitCount: 1) }
                ?? ObservableProgress(totalUnitCount: units)
        }
        leaf = nodes[nodes.count - 1]
        root = nodes[0]
    }

    /// Counts the next unit of the leaf: `true` when the caller adds it, `false` when the leaf was
    /// reset to 0 instead.
    @inline(__always) func advance() -> Bool {
        if expectedCompleted == Self.leafUnits - 1 {
            expectedCompleted = 0
            leaf.completedUnitCount = 0
            return false
        }
        expectedCompleted &+= 1
        return true
    }

    /// The nodes of a chain `depth` levels deep, root first, made by `make` from a node's units
    /// and its parent (nil for the root): one unit each, `leafUnits` for the leaf.
    static func nodes<Node>(depth: Int, _ make: (_ units: Int64, _ parent: Node?) -> Node) -> [Node] {
        var nodes = [make(depth == 1 ? leafUnits : 1, nil)]
        for level in 1..<max(depth, 1) {
            nodes.append(make(level == depth - 1 ? leafUnits : 1, nodes[level - 1]))
        }
        return nodes
    }
}

@inline(never) func incrementLeaf(_ chain: ProgressChain) {
    if chain.advance() { chain.leaf.complete() }
}

/// The same unit added with `completedUnitCount += 1`: a locked read and a locked update.
@inline(never) func incrementLeafInPlace(_ chain: ProgressChain) {
    if chain.advance() { chain.leaf.completedUnitCount += 1 }
}

/// The same shape built from Foundation's `Progress` (unobservable on Linux).
final class FoundationProgressChain {
    let nodes: [Progress]
    let leaf: Progress
    @exclusivity(unchecked) var expectedCompleted: Int64 = 0

    init(depth: Int) {
        nodes = ProgressChain.nodes(depth: depth) { units, parent in
            parent.map { Progress(totalUnitCount: units, parent: $0, pendingUnitCount: 1) } ?? Progress(totalUnitCount: units)
        }
        leaf = nodes[nodes.count - 1]
    }
}

@inline(never) func incrementLeaf(_ chain: FoundationProgressChain) {
    if chain.expectedCompleted == ProgressChain.leafUnits - 1 {
        chain.expectedCompleted = 0
        chain.leaf.completedUnitCount = 0
    } else {
        chain.expectedCompleted &+= 1
        chain.leaf.completedUnitCount += 1
    }
}

extension Scenarios {
    /// Progress trees: a per-unit leaf update against Foundation's `Progress`, and how its cost
    /// grows with the depth of the tree.
    static var progressScenarios: [Scenario] {
        func foundation(depth: Int, name: String, summary: String, chart: [ChartPoint] = []) -> Scenario {
            Scenario(name: name, group: .progress, summary: summary, chart: chart) {
                let chain = opaque(FoundationProgressChain(depth: depth))
                return .loop { values in
                    for _ in values { incrementLeaf(chain) }
                } check: { _, _ in
                    chain.leaf.completedUnitCount == chain.expectedCompleted
                        ? nil : "leaf completed \(chain.leaf.completedUnitCount), expected \(chain.expectedCompleted)"
                }
            }
        }
        func ours(
            depth: Int, observed: Bool, inPlace: Bool = false, name: String, summary: String, baseline: String?,
            target: Scenario.Target?, comparisons: [String] = [], chart: [ChartPoint] = []
        ) -> Scenario {
            Scenario(
                name: name, group: .progress, summary: summary, baseline: baseline, target: target, comparisons: comparisons, chart: chart
            ) {
                let chain = opaque(ProgressChain(depth: depth))
                let counter = Counter()
                let tokens =
                    observed
                    ? [
                        chain.root.observe(\.fractionCompleted, options: [.new]) { _, change in counter.record(change.newValue) }
                    ]
                    : []
                return .loop(retaining: tokens, resetting: counter) { values in
                    if inPlace {
                        for _ in values { incrementLeafInPlace(chain) }
                    } else {
                        for _ in values { incrementLeaf(chain) }
                    }
                } check: { iterations, _ in
                    if chain.leaf.completedUnitCount != chain.expectedCompleted {
                        return "leaf completed \(chain.leaf.completedUnitCount), expected \(chain.expectedCompleted)"
                    }
                    guard observed else { return nil }
                    if counter.count != iterations { return "root observer ran \(counter.count) times, expected \(iterations)" }
                    let fraction = Double(chain.expectedCompleted) / Double(ProgressChain.leafUnits)
                    guard let last = counter.last, abs(last - fraction) < 1e-6 else {
                        return "root observer last saw \(counter.last.map { "\($0)" } ?? "nil"), expected \(fraction)"
                    }
                    return nil
                }
            }
        }
        return [
            foundation(
                depth: 2, name: "foundation-progress-child",
                summary: "Foundation Progress: completedUnitCount += 1 on a child with a parent (no observer possible on Linux)"
            ),
            foundation(
                depth: 3, name: "foundation-progress-3-levels",
                summary: "Foundation Progress: completedUnitCount += 1 on the leaf of a 3-level tree",
                chart: [ChartPoint(.progressTreeDepth, ChartSeries.foundationProgress, x: 3)]
            ),
        ]
            + [1, 2, 4, 5, 6].map { depth in
                foundation(
                    depth: depth, name: "foundation-progress-depth-\(depth)",
                    summary:
                        "Foundation Progress: leaf update in a tree \(depth) level\(depth == 1 ? "" : "s") deep (no observer possible)",
                    chart: [ChartPoint(.progressTreeDepth, ChartSeries.foundationProgress, x: Double(depth))]
                )
            } + [
                ours(
                    depth: 3, observed: false, name: "progress-leaf-unobserved",
                    summary: "ObservableProgress: complete() on the leaf of a 3-level tree, no observer",
                    baseline: "foundation-progress-child", target: .ratioAtMost(0.5),
                    comparisons: ["foundation-progress-3-levels"]
                ),
                ours(
                    depth: 3, observed: false, inPlace: true, name: "progress-leaf-increment",
                    summary: "ObservableProgress: completedUnitCount += 1 on the leaf of a 3-level tree, no observer (exact under threads)",
                    baseline: "foundation-progress-child", target: .ratioAtMost(0.5),
                    comparisons: ["foundation-progress-3-levels"]
                ),
                ours(
                    depth: 3, observed: true, name: "progress-leaf-observed-root",
                    summary:
                        "ObservableProgress: complete() on the leaf of a 3-level tree, [.new] observer of the root's fractionCompleted",
                    baseline: "foundation-progress-child", target: .ratioAtMost(1.0),
                    comparisons: ["foundation-progress-3-levels"]
                ),
            ]
            + (1...6).map { depth in
                ours(
                    depth: depth, observed: true, name: "progress-depth-\(depth)",
                    summary: "ObservableProgress: leaf update in a tree \(depth) level\(depth == 1 ? "" : "s") deep, observer on the root",
                    baseline: depth == 1 ? nil : "progress-depth-1", target: nil,
                    chart: [ChartPoint(.progressTreeDepth, "ObservableProgress (observer on the root)", x: Double(depth))]
                )
            }
    }
}
