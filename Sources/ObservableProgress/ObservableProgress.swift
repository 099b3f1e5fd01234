import KeyValueObserving
import Synchronization

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
/// made on and, when an ancestor is observed, each ancestor in turn, each under its own lock (never
/// two at once): O(depth). When no ancestor is observed, the change is not sent up: the node lists
/// itself once as changed with its parent (and the parent with its own), and reading an ancestor's
/// fraction (or its throughput, time remaining or description) first asks the listed descendants for
/// their contributions. An update below ancestors nobody observes thus costs about what an update of
/// a lone node costs. A node that finishes still tells its parent at once, and while updates go on,
/// one every quarter of a second is sent up, so the ancestors' throughput keeps its samples.
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
    // Invariant: `state` is accessed only with `lock` held, except in `deinit`, when no other
    // thread can reach the object. Each node's state is guarded by its own lock only: what a parent
    // knows of a child is in the parent's state (`_ProgressChildren`). No code but this module's
    // bookkeeping runs under a lock: no handler, no user closure, no other node's lock. The lock
    // makes every access exclusive, so the dynamic exclusivity checks are redundant
    // (`@exclusivity(unchecked)`).
    let lock = PlatformLock()
    @exclusivity(unchecked) var state: _ProgressState
    /// The parent, for the walk up that asks whether an ancestor is observed without taking a
    /// lock (`isObservedAbove`): stored once (releasing), when the node starts reporting to it,
    /// and never changed (as `state.parent`).
    let parentLink = Atomic<Unmanaged<ObservableProgress>?>(nil)
    /// Where the node reads the time (for its throughput and time remaining). Immutable.
    let clock: _ProgressClock

    /// A progress that tracks `totalUnitCount` units of work. A total below zero, or a total and a
    /// completed count of zero, make it indeterminate.
    public init(totalUnitCount: Int64) {
        clock = _ProgressClock()
        state = _ProgressState(totalUnitCount: totalUnitCount, now: clock.now())
        super.init()
    }

    /// A progress that reads the time from `clock` (a manual clock in tests).
    package init(totalUnitCount: Int64, clock: _ProgressClock) {
        self.clock = clock
        state = _ProgressState(totalUnitCount: totalUnitCount, now: clock.now())
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
        // A child dropped before finishing leaves the parent's record of its children (its
        // contribution stays, as in Foundation, where the parent would have kept the child alive).
        if let parent = state.parent, let record = state.recordInParent {
            if state.isOutdatedInParent {
                // The parent has not applied the latest contribution: it does now, and keeps it.
                var message = _ChildMessage(to: parent)
                _ = state.fillForParent(&message, now: clock.now())
                deliver(&message, exact: isObservedAbove, notifying: false)
            }
            parent.lock.lock()
            parent.state.children.detach(record)
            parent.lock.unlock()
        }
    }

    // MARK: Units

    /// The total units of work. Setting it rescales `fractionCompleted`; a value below zero makes
    /// the progress indeterminate. Observable.
    ///
    /// `totalUnitCount += n` and `-= n` are exact when threads do them at once, as for
    /// `completedUnitCount`.
    public var totalUnitCount: Int64 {
        get {
            reportRead(.totalUnitCount, Int64.self)
            return withLock { $0.values.total }
        }
        set { update { $0.total = newValue } }
        _modify {
            let read = withLock { $0.values.total }
            var value = read
            // Deferred, so a mutation that throws keeps what it changed, as a setter would.
            defer {
                if value != read { update { $0.total = _ProgressCounts.merging(value, read: read, into: $0.total, "totalUnitCount") } }
            }
            yield &value
        }
    }

    /// The units completed by this node itself (children that finished credited their pending
    /// units here). May exceed `totalUnitCount` (over-completion is allowed, as in Foundation:
    /// `fractionCompleted` then exceeds 1). Observable.
    ///
    /// `completedUnitCount = n` sets the count, whatever it was: of two threads setting it at
    /// once, the later wins. `completedUnitCount += n` and `-= n` are exact however many threads do
    /// them at once (8 threads × 100,000 `+= 1` end at 800,000), as `complete(count:)` is: an
    /// in-place mutation reads the count under the lock, mutates a copy (no lock is held meanwhile,
    /// so `swap(&p.completedUnitCount, &p.totalUnitCount)` is fine), then applies the difference
    /// it made to the value it read in one locked update. Any other in-place mutation is applied
    /// the same way: `completedUnitCount *= 2` adds the value it read, and a change another thread
    /// made in the meantime is kept. Observers hear of each such update once, with `.old` and
    /// `.new` the counts just before and after it (which differ by exactly `n` for `+= n`), not the
    /// value read before the mutation.
    public var completedUnitCount: Int64 {
        get {
            reportRead(.completedUnitCount, Int64.self)
            return withLock { $0.values.completed }
        }
        set { update { $0.completed = newValue } }
        _modify {
            let read = withLock { $0.values.completed }
            var value = read
            // Deferred, so a mutation that throws keeps what it changed, as a setter would.
            defer {
                if value != read {
                    update { $0.completed = _ProgressCounts.merging(value, read: read, into: $0.completed, "completedUnitCount") }
                }
            }
            yield &value
        }
    }

    /// Adds `count` completed units atomically: concurrent workers never lose units. The same as
    /// `completedUnitCount += count`, in one locked update where `+=` takes a read and an update.
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
    ///
    /// - Complexity: O(1) when nothing below changed since the last read or while an observer
    ///   watches this node or an ancestor; otherwise O(number of descendants that changed since).
    public var fractionCompleted: Double {
        reportRead(.fractionCompleted, Double.self)
        return withRefreshedLock { $0.values.fraction }
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

    /// Reads or changes the state under the lock. `body` must not call out.
    @inline(__always)
    func withLock<Result>(_ body: (inout _ProgressState) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }
}
