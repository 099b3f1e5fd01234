import KeyValueObserving

/// A thread-safe, observable progress tree with the semantics of Foundation's `Progress`, for
/// server and command-line Swift: every key (`fractionCompleted`, `completedUnitCount`,
/// `isFinished`, `isCancelled`, …) can be observed with `observe` and `values(for:)`, with `.old`
/// and `.prior`, on the thread that made the update.
///
/// ```swift
/// let overall = ObservableProgress(totalUnitCount: 2)
/// let download = ObservableProgress(totalUnitCount: 100, parent: overall, pendingUnitCount: 1)
/// let token = overall.observe(\.fractionCompleted, options: [.new]) { _, change in
///     print(change.newValue!)   // 0.25 after download.completedUnitCount = 50
/// }
/// download.completedUnitCount = 50
/// ```
///
/// **The tree.** A node's `fractionCompleted` is its own completed units plus, for each unfinished
/// child, the child's fraction times the units of this node it was given (its *pending* units), over
/// its total. A child that finishes credits its pending units to the parent's `completedUnitCount`
/// and leaves the tree; an indeterminate child contributes nothing. An update changes the node it is
/// made on and then each ancestor in turn, each under its own lock (never two at once): O(depth).
///
/// **Observation.** Progress keys notify only when their value actually changes. A node's observers
/// are notified after the node's lock is released and before its parent is updated, on the thread
/// that made the update; the parent's observers come next, and so on up to the root. Notifications
/// carry the values computed under the lock, so `.old` and `.new` are exact; a `.prior`
/// notification carries the old value but is delivered after the update took effect (a handler
/// never runs under the lock). When several threads update one tree, each notification is exact for
/// its own update, but notifications of different threads may reach an observer in a different order
/// than the updates took effect. Throttled observation (`observe(_:throttledTo:on:handler:)`,
/// `values(for:throttledTo:)`) always ends with the latest value.
///
/// **Control.** `cancel()`, `pause()` and `resume()` apply to the node and its whole subtree,
/// including children added later; handlers registered with `onCancel`, `onPause` and `onResume`
/// run once per event, never under a lock.
public final class ObservableProgress: KeyValueObservable, @unchecked Sendable {
    // Invariant: every `var` of this class is accessed only with `lock` held, except the ones marked
    // "parent's lock", which are accessed only with the *parent's* lock held (they are the parent's
    // record of this child), and two reads without it: the parent reads `pendingUnitCountInParent`
    // when this node finishes (written once under `lock` before the first message, so the message's
    // hand-over orders the two), and `deinit` reads `parent` (no other thread can reach the object
    // then). No code but this module's bookkeeping runs under a lock: no handler, no
    // user closure, no other node's lock. `lock` is destroyed in `deinit`, when no other thread can
    // reach the object. The locks make every access exclusive, so the dynamic exclusivity checks are
    // redundant (`@exclusivity(unchecked)`).
    let lock = LockPrimitive()

    @exclusivity(unchecked) var counts: _ProgressCounts
    /// What `counts` computes to, kept so an update computes it once (after the change) and the
    /// "before" comes for free.
    @exclusivity(unchecked) var values: _ProgressValues
    @exclusivity(unchecked) var rate: _ProgressRate

    // The tree, seen from this node.
    /// The node this one reports to; `nil` for a root. Set once (`addChild`) and never changed
    /// afterwards, even when this node finishes and leaves the parent's tree: updates walk up the
    /// tree without retaining the nodes on the way, which is safe only because each node keeps its
    /// parent, unchanged, for as long as it lives. Strong: a parent lives as long as its children.
    @exclusivity(unchecked) var parent: ObservableProgress?
    /// `parent`, unretained, for the walk up the tree (reading a strong reference would retain it).
    @exclusivity(unchecked) var parentReference: Unmanaged<ObservableProgress>?
    /// The units of `parent` this node stands for. Set with `parent`, before the first message to
    /// it, and never changed: the parent reads it, without this node's lock, when this node finishes.
    @exclusivity(unchecked) var pendingUnitCountInParent: Int64 = 0
    /// Increases with every message sent to `parent`, so the parent applies each child's latest
    /// state only, whatever order the updating threads reach it in.
    @exclusivity(unchecked) var version: UInt64 = 0
    /// The fraction whose contribution was last sent to `parent` (0 once finished or while
    /// indeterminate: no contribution).
    @exclusivity(unchecked) var sentFraction: Double = 0
    /// The unfinished children, weakly: a child keeps its parent alive, not the reverse, so a tree
    /// nobody holds is freed even if it never finishes.
    @exclusivity(unchecked) var children: [ObjectIdentifier: _WeakChild] = [:]

    // Control.
    @exclusivity(unchecked) var cancelled = false
    @exclusivity(unchecked) var paused = false
    /// Increases with every pause or resume this node passes down, so a child applies the latest.
    @exclusivity(unchecked) var pauseGeneration: UInt64 = 0
    /// The latest `pauseGeneration` of the parent this node applied: pushes from the parent that
    /// arrive out of order (two threads pausing and resuming it) are ignored.
    @exclusivity(unchecked) var appliedParentPauseGeneration: UInt64 = 0
    @exclusivity(unchecked) var cancellable = true
    @exclusivity(unchecked) var pausable = false
    @exclusivity(unchecked) var handlers = _ControlHandlers()

    // Parent's lock: the parent's record of this child.
    /// Whether this node counts among the parent's children.
    @exclusivity(unchecked) var isAttached = false
    /// The latest `version` the parent applied.
    @exclusivity(unchecked) var appliedVersion: UInt64 = 0
    /// This child's contribution included in the parent's `childUnits`.
    @exclusivity(unchecked) var appliedContribution = _ProgressUnits.zero

    /// A progress that tracks `totalUnitCount` units of work. A total below zero, or a total and a
    /// completed count of zero, make it indeterminate.
    public init(totalUnitCount: Int64) {
        counts = _ProgressCounts(total: totalUnitCount, completed: 0)
        values = counts.values
        rate = _ProgressRate(fraction: 0, now: _coarseNanoseconds())
        super.init()
    }

    /// A progress of `totalUnitCount` units that stands for `pendingUnitCount` units of `parent`:
    /// `ObservableProgress(totalUnitCount: 100, parent: overall, pendingUnitCount: 1)` is
    /// `parent.addChild(_:withPendingUnitCount:)` in one step.
    public convenience init(totalUnitCount: Int64, parent: ObservableProgress, pendingUnitCount: Int64) {
        self.init(totalUnitCount: totalUnitCount)
        parent.addChild(self, withPendingUnitCount: pendingUnitCount)
    }

    deinit {
        // A child dropped before finishing leaves the parent's list of children (its contribution
        // stays, as in Foundation, where the parent would have kept the child alive).
        if let parent {
            parent.lock.lock()
            if isAttached {
                isAttached = false
                parent.children[ObjectIdentifier(self)] = nil
            }
            parent.lock.unlock()
        }
        lock.destroy()
    }

    // MARK: Units

    /// The total units of work. Setting it rescales `fractionCompleted`; a value below zero makes
    /// the progress indeterminate. Observable.
    public var totalUnitCount: Int64 {
        get {
            reportRead(.totalUnitCount, Int64.self)
            return withLock { $0.values.total }
        }
        set { update { $0.total = newValue } }
    }

    /// The units completed by this node itself (children that finished credited their pending
    /// units here). May exceed `totalUnitCount` (over-completion is allowed, as in Foundation:
    /// `fractionCompleted` then exceeds 1). Observable.
    ///
    /// `completedUnitCount += 1` is a read and then a write: two threads doing it at once can lose
    /// an increment. Use `complete(count:)` from concurrent workers.
    public var completedUnitCount: Int64 {
        get {
            reportRead(.completedUnitCount, Int64.self)
            return withLock { $0.values.completed }
        }
        set { update { $0.completed = newValue } }
    }

    /// Adds `count` completed units atomically: concurrent workers never lose units.
    ///
    /// - Complexity: O(depth of the tree); one lock at a time.
    public func complete(count: Int64 = 1) {
        update { counts in
            let (sum, overflow) = counts.completed.addingReportingOverflow(count)
            precondition(!overflow, "ObservableProgress.complete(count: \(count)) overflows completedUnitCount \(counts.completed)")
            counts.completed = sum
        }
    }

    /// The fraction of the work completed, children included: 0 when indeterminate, above 1 when
    /// over-completed. Observable; notified only when it changes.
    public var fractionCompleted: Double {
        reportRead(.fractionCompleted, Double.self)
        return withLock { $0.values.fraction }
    }

    /// Whether the completed or total count is below zero, or both are zero. Observable.
    public var isIndeterminate: Bool {
        reportRead(.isIndeterminate, Bool.self)
        return withLock { $0.values.isIndeterminate }
    }

    /// Whether the progress is determinate and its completed count reached its total (a finished
    /// child has left its parent's tree). Observable.
    public var isFinished: Bool {
        reportRead(.isFinished, Bool.self)
        return withLock { $0.values.isFinished }
    }

    /// Reads state under the lock.
    @inline(__always)
    func withLock<Result>(_ body: (ObservableProgress) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(self)
    }
}

/// A weak reference to a child, for cancellation and pausing.
struct _WeakChild {
    weak var node: ObservableProgress?
}
