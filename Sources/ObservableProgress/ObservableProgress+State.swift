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
    /// When the contribution was last sent to `parent` (the time the message carried).
    var sentTime: UInt64 = 0
    /// Whether `parent` has not applied this node's latest contribution: this node is listed
    /// among its outdated children (or is being listed), and stays listed until the parent asks
    /// for its contribution (`refresh()`). Set by the first change not sent, so later changes
    /// cost nothing more.
    var isOutdatedInParent = false
    /// Whether an ancestor was found to have an observer registry (`isObservedAbove`), which it
    /// keeps for life: then every change is sent up at once.
    var hasObservedAncestor = false

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

    /// Applies `mutate` to the counts; returns the values before and after, and what the parent
    /// must hear (see `propagation`).
    @inline(__always)
    mutating func update(
        _ mutate: (inout _ProgressCounts) -> Void,
        clock: _ProgressClock,
        exact: Bool,
        message: inout _ChildMessage
    ) -> (before: _ProgressValues, after: _ProgressValues, propagation: _Propagation) {
        let now = rate.time(clock)
        let before = values
        mutate(&counts)
        let after = counts.values
        values = after
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: now) }
        return (before, after, propagation(&message, after: after, changedFrom: before, now: now, exact: exact))
    }

    /// Applies a child's message (see `_ProgressChildren.apply`); returns the values before and
    /// after, and what this node's parent must hear (with `message` rewritten for it), or `nil`
    /// if the message changed nothing.
    @inline(__always)
    mutating func apply(
        _ message: inout _ChildMessage,
        exact: Bool
    ) -> (before: _ProgressValues, after: _ProgressValues, propagation: _Propagation)? {
        let before = values
        guard children.apply(message, to: &counts) else { return nil }
        let after = counts.values
        values = after
        let time = message.time
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: time) }
        return (before, after, propagation(&message, after: after, changedFrom: before, now: time, exact: exact))
    }

    /// What the parent must hear after a change from `before` to `values`: nothing (no parent, no
    /// change for it, or it knows already that this node is outdated); the new contribution or
    /// that this node finished, filled into `message` to send now; or that this node is outdated
    /// (`message` then holds the parent and the record to list it by).
    ///
    /// A change is sent at once when `exact` (an ancestor may have observers, who get every
    /// change with exact values), when this node finishes or stops being finished (which credits
    /// units to the parent), and when the last message is a rate sample interval old (so every
    /// ancestor's throughput keeps its samples). Otherwise it is not sent: nobody watches the
    /// ancestors' fractions, which are computed when read (`refresh()`), and an update costs
    /// the node's own bookkeeping only.
    @inline(__always)
    mutating func propagation(
        _ message: inout _ChildMessage,
        after values: _ProgressValues,
        changedFrom before: _ProgressValues,
        now: UInt64,
        exact: Bool
    ) -> _Propagation {
        guard let parentReference, let recordReference else { return .none }
        // The contribution is a function of the fraction (the pending units never change), so the
        // fraction tells whether it changed, and it is computed only when it is sent.
        let contributing = values.isFinished || values.isIndeterminate ? 0 : values.fraction
        let finishedChanged = before.isFinished != values.isFinished
        guard finishedChanged || contributing != sentFraction else { return .none }
        message.parent = parentReference
        message.record = recordReference
        guard exact || finishedChanged || now &- sentTime >= _ProgressRate.sampleInterval else {
            if isOutdatedInParent { return .none }
            isOutdatedInParent = true
            return .markOutdated
        }
        fill(&message, contributing: contributing, isFinished: values.isFinished, now: now)
        return .send
    }

    /// Fills `message` with this node's contribution now, for a parent that asks for it
    /// (`refresh()`) or that this node joins. Returns whether this node must be listed as
    /// outdated in its parent again: its own outdated children changed it since it was asked.
    mutating func fillForParent(_ message: inout _ChildMessage, now: UInt64) -> Bool {
        guard let parentReference, let recordReference else { return false }
        let values = self.values
        message.parent = parentReference
        message.record = recordReference
        fill(
            &message, contributing: values.isFinished || values.isIndeterminate ? 0 : values.fraction, isFinished: values.isFinished,
            now: now)
        isOutdatedInParent = children.hasOutdated
        return isOutdatedInParent
    }

    /// Fills in what `message` says beyond its addressee (filled by the caller). The message is
    /// filled in place, not returned: it is copied at every level of the walk otherwise.
    @inline(__always)
    mutating func fill(_ message: inout _ChildMessage, contributing: Double, isFinished: Bool, now: UInt64) {
        sentFraction = contributing
        sentTime = now
        version &+= 1
        message.version = version
        message.contribution = _ProgressUnits(fraction: contributing, times: pendingUnitCountInParent)
        message.isFinished = isFinished
        message.time = now
    }

    /// Lists the child of `record` as outdated; returns this node's parent and record in it if
    /// this node must now be listed as outdated there too (it was not listed yet).
    mutating func markOutdated(_ record: Unmanaged<_ChildRecord>) -> (
        parent: Unmanaged<ObservableProgress>, record: Unmanaged<_ChildRecord>
    )? {
        children.markOutdated(record)
        guard !isOutdatedInParent, let parentReference, let recordReference else { return nil }
        isOutdatedInParent = true
        return (parentReference, recordReference)
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

/// What a node must do for its parent after a change, once its lock is released.
enum _Propagation {
    /// Nothing.
    case none
    /// Send the message, filled in, to the parent now.
    case send
    /// List this node as outdated in its parent, and each ancestor in its own parent up to the
    /// first listed already (the message holds the parent and the record).
    case markOutdated
}
