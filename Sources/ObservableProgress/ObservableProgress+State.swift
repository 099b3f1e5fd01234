/// Everything a progress node knows, guarded by the node's lock: its units, its place in the tree,
/// its record of its children and its control state. Its mutating methods change the state and
/// return what the node must do once its lock is released (notify, tell its parent, run handlers,
/// reach its children): nothing here calls out.
struct _ProgressState {
    var counts: _ProgressCounts
    /// What `counts` computes to, kept so an update computes it once (after the change) and the
    /// "before" comes for free.
    var values: _ProgressValues
    var rate: _ProgressRate

    // The tree, seen from this node as a child.
    /// The node this one reports to; `nil` for a root. Set once (`addChild`) and never changed
    /// afterwards, even when this node finishes and leaves the parent's tree: updates walk up the
    /// tree without retaining the nodes on the way, which is safe only because each node keeps its
    /// parent, unchanged, for as long as it lives. Strong: a parent lives as long as its children.
    var parent: ObservableProgress?
    /// `parent`, unretained, for the walk up the tree (reading a strong reference would retain it);
    /// `nil` until the node starts reporting.
    var parentReference: Unmanaged<ObservableProgress>?
    /// The parent's record of this node, which addresses this node's messages (part of the
    /// parent's state: never read here), retained and unretained; set with `parentReference`.
    var recordInParent: _ChildRecord?
    var recordReference: Unmanaged<_ChildRecord>?
    /// The units of `parent` this node stands for: set with `parentReference`, never changed.
    var pendingUnitCountInParent: Int64 = 0
    /// Increases with every message sent to `parent`, so the parent applies each child's latest
    /// state only, whatever order the updating threads reach it in.
    var version: UInt64 = 0
    /// The fraction whose contribution was last sent to `parent` (0 once finished or while
    /// indeterminate: no contribution).
    var sentFraction: Double = 0

    // The tree, seen from this node as a parent.
    var children = _ProgressChildren()

    // Control.
    var cancelled = false
    var paused = false
    /// Increases with every pause or resume this node passes down, so a child applies the latest.
    var pauseGeneration: UInt64 = 0
    /// The latest `pauseGeneration` of the parent this node applied: pushes from the parent that
    /// arrive out of order (two threads pausing and resuming it) are ignored.
    var appliedParentPauseGeneration: UInt64 = 0
    var cancellable = true
    var pausable = false
    var handlers = _ControlHandlers()

    init(totalUnitCount: Int64, now: UInt64) {
        counts = _ProgressCounts(total: totalUnitCount, completed: 0)
        values = counts.values
        rate = _ProgressRate(fraction: 0, now: now)
    }

    // MARK: Units

    /// Applies `mutate` to the counts; returns the values before and after, and whether `message`
    /// was filled for the parent.
    @inline(__always)
    mutating func update(
        _ mutate: (inout _ProgressCounts) -> Void,
        clock: _ProgressClock,
        message: inout _ChildMessage
    ) -> (before: _ProgressValues, after: _ProgressValues, mustTell: Bool) {
        let now = rate.time(clock)
        let before = values
        mutate(&counts)
        let after = counts.values
        values = after
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: now) }
        let mustTell = fillMessage(&message, after: after, changedFrom: before, force: false, now: now)
        return (before, after, mustTell)
    }

    /// Applies a child's message (see `_ProgressChildren.apply`); returns the values before and
    /// after, and whether `message` was rewritten for this node's parent, or `nil` if it changed
    /// nothing.
    @inline(__always)
    mutating func apply(_ message: inout _ChildMessage) -> (before: _ProgressValues, after: _ProgressValues, mustTell: Bool)? {
        let before = values
        guard children.apply(message, to: &counts) else { return nil }
        let after = counts.values
        values = after
        let time = message.time
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: time) }
        let mustTell = fillMessage(&message, after: after, changedFrom: before, force: false, now: time)
        return (before, after, mustTell)
    }

    /// Fills `message` with what the parent must hear after a change to `values`: the new
    /// contribution, or that this node finished. Returns `false` (and leaves `message` alone) if
    /// there is no parent or nothing changed for it. The message is filled in place, not returned: it is copied at every level of the walk
    /// otherwise.
    @inline(__always)
    mutating func fillMessage(
        _ message: inout _ChildMessage,
        after values: _ProgressValues,
        changedFrom before: _ProgressValues?,
        force: Bool,
        now: UInt64
    ) -> Bool {
        guard let parentReference, let recordReference else { return false }
        // The contribution is a function of the fraction (the pending units never change), so the
        // fraction tells whether it changed, and it is computed only when it is sent.
        let contributing = values.isFinished || values.isIndeterminate ? 0 : values.fraction
        let finishedChanged = before.map { $0.isFinished != values.isFinished } ?? false
        guard force || finishedChanged || contributing != sentFraction else { return false }
        sentFraction = contributing
        version &+= 1
        message.parent = parentReference
        message.record = recordReference
        message.version = version
        message.contribution = _ProgressUnits(fraction: contributing, times: pendingUnitCountInParent)
        message.isFinished = values.isFinished
        message.time = now
        return true
    }

    // MARK: Control

    /// Marks the node cancelled; returns the handlers to run and the children to cancel, or `nil`
    /// if it was cancelled already.
    mutating func cancel() -> (handlers: [@Sendable () -> Void], children: [ObservableProgress])? {
        guard !cancelled else { return nil }
        cancelled = true
        return (handlers.takeCancellation(), children.live)
    }

    /// Sets the pause state; returns whether it changed, the handlers to run, the generation to
    /// push down and the children to push it to, or `nil` for an out-of-order push from the parent.
    mutating func setPaused(
        _ value: Bool,
        parentGeneration: UInt64?
    ) -> (changed: Bool, handlers: [@Sendable () -> Void], generation: UInt64, children: [ObservableProgress])? {
        if let parentGeneration {
            guard parentGeneration > appliedParentPauseGeneration else { return nil }
            appliedParentPauseGeneration = parentGeneration
        }
        let changed = paused != value
        paused = value
        pauseGeneration &+= 1
        let run = changed ? handlers.handlers(pausing: value) : []
        return (changed, run, pauseGeneration, children.live)
    }
}
