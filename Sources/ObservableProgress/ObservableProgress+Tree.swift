import KeyValueObserving

extension ObservableProgress {
    /// Makes `child` report to this progress, standing for `pendingUnitCount` of its units. The
    /// child's current fraction counts at once; a child that is already finished credits its
    /// pending units at once and does not join the tree. A child added to a cancelled or paused
    /// progress is cancelled or paused too.
    ///
    /// Traps if `child` already has a parent, is this progress or one of its ancestors, or if
    /// `pendingUnitCount` is negative. (The ancestor check reads the tree as it is: two threads
    /// making two nodes each other's child at the same moment are not caught.)
    ///
    /// - Complexity: O(depth of the tree).
    public func addChild(_ child: ObservableProgress, withPendingUnitCount pendingUnitCount: Int64) {
        precondition(pendingUnitCount >= 0, "ObservableProgress.addChild: pendingUnitCount must not be negative (got \(pendingUnitCount))")
        precondition(child !== self, "ObservableProgress.addChild: a progress cannot be its own child")
        var ancestor = withLock { $0.parent }
        while let node = ancestor {
            precondition(
                node !== child, "ObservableProgress.addChild: the child is an ancestor of this progress; a tree cannot have cycles")
            ancestor = node.withLock { $0.parent }
        }
        // 1. Claim the child: it reports to one parent, and from here on to this one. It sends
        // nothing yet (`parentReference` is still nil).
        let hadParent = child.withLock { state in
            defer { if state.parent == nil { state.parent = self } }
            return state.parent != nil
        }
        precondition(!hadParent, "ObservableProgress.addChild: the child already has a parent; a progress reports to one parent")
        // 2. The parent records the child, so no message the child sends from now on is lost; it
        // reads what the child inherits in the same step, so a concurrent cancel, pause or resume
        // either sees the child or is seen here.
        let (record, inheritsCancel, inheritsPause, pauseStamp) = withLock { state in
            (state.children.attach(child, pendingUnitCount: pendingUnitCount), state.cancelled, state.paused, state.pauseGeneration)
        }
        // 3. The child starts reporting, with its current state.
        var message = _ChildMessage(to: self)
        let now = child.clock.now()
        let mustTell = child.withLock { state in
            state.parentReference = Unmanaged.passUnretained(self)
            state.recordInParent = record
            state.recordReference = Unmanaged.passUnretained(record)
            state.pendingUnitCountInParent = pendingUnitCount
            return state.fillMessage(&message, after: state.values, changedFrom: nil, force: true, now: now)
        }
        if mustTell { deliver(&message) }
        if inheritsCancel { child.cancel() }
        if inheritsPause { child.setPaused(true, parentGeneration: pauseStamp) }
    }

    /// Applies `mutate` to this node's counts under its lock, then notifies and propagates.
    @inline(__always)
    func update(_ mutate: (inout _ProgressCounts) -> Void) {
        var message = _ChildMessage(to: self)
        lock.lock()
        let (before, after, mustTell) = state.update(mutate, clock: clock, message: &message)
        lock.unlock()
        notifyObservers(from: before, to: after)
        if mustTell { deliver(&message) }
    }

    /// Delivers a child's message to its parent, then the parent's to its own parent, and so on:
    /// one lock at a time, each node's observers notified before the next node is updated.
    ///
    /// No node on the way is retained: the caller holds the first child, each child holds its
    /// parent (and its record in the parent), and a child's `parent` never changes once set (see
    /// `_ProgressState.parent`), so every node and record on the path outlives the walk. Retaining them would cost more than the update
    /// itself: a node that is weakly referenced (every child is, by its parent) keeps its reference
    /// counts in a side table, where each retain and release is several times slower.
    func deliver(_ message: inout _ChildMessage) {
        while message.parent._withUnsafeGuaranteedRef({ parent in parent.apply(&message) }) {}
    }

    /// Applies a child's message under this node's lock and notifies this node's observers. Returns
    /// whether this node's parent must hear of it, with `message` rewritten for it.
    @inline(__always)
    private func apply(_ message: inout _ChildMessage) -> Bool {
        lock.lock()
        guard let (before, after, mustTell) = state.apply(&message) else {
            lock.unlock()
            return false
        }
        lock.unlock()
        notifyObservers(from: before, to: after)
        return mustTell
    }
}

/// What a child tells its parent: its latest contribution (fixed point, in the parent's units), or
/// that it finished. Unretained references: see `deliver(_:)` for why both outlive the message.
struct _ChildMessage {
    var parent: Unmanaged<ObservableProgress>
    /// The parent's record of the child; `nil` only until the message is filled in.
    var record: Unmanaged<_ChildRecord>?
    var version: UInt64 = 0
    var contribution = _ProgressUnits.zero
    var isFinished = false
    /// When the update was made (coarse clock), for the throughput estimate of every level.
    var time: UInt64 = 0

    /// A message not filled in yet (see `_ProgressState.fillMessage`); `node` stands in for the
    /// parent until then.
    @inline(__always)
    init(to node: ObservableProgress) {
        parent = Unmanaged.passUnretained(node)
    }
}
