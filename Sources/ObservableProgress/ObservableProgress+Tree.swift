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
            precondition(node !== child, "ObservableProgress.addChild: the child is an ancestor of this progress; a tree cannot have cycles")
            ancestor = node.withLock { $0.parent }
        }
        // 1. Claim the child: it reports to one parent, and from here on to this one. It sends
        // nothing yet (`parentReference` is still nil).
        child.lock.lock()
        let hadParent = child.parent != nil
        if !hadParent { child.parent = self }
        child.lock.unlock()
        precondition(!hadParent, "ObservableProgress.addChild: the child already has a parent; a progress reports to one parent")
        // 2. The parent counts the child, so no message the child sends from now on is lost; it
        // reads what the child inherits in the same step, so a concurrent cancel, pause or resume
        // either sees the child or is seen here.
        lock.lock()
        child.isAttached = true
        child.appliedVersion = 0
        child.appliedContribution = .zero
        children[ObjectIdentifier(child)] = _WeakChild(node: child)
        let inheritsCancel = cancelled
        let inheritsPause = paused
        let pauseStamp = pauseGeneration
        lock.unlock()
        // 3. The child starts reporting, with its current state.
        child.lock.lock()
        child.parentReference = Unmanaged.passUnretained(self)
        child.pendingUnitCountInParent = pendingUnitCount
        var message = _ChildMessage(placeholderFor: child)
        let mustTell = child.fillMessage(&message, after: child.values, changedFrom: nil, force: true, now: _coarseNanoseconds())
        child.lock.unlock()
        if mustTell { deliver(&message) }
        if inheritsCancel { child.cancel() }
        if inheritsPause { child.setPaused(true, parentGeneration: pauseStamp) }
    }

    /// Applies `mutate` to this node's counts under its lock, then notifies and propagates.
    @inline(__always)
    func update(_ mutate: (inout _ProgressCounts) -> Void) {
        var message = _ChildMessage(placeholderFor: self)
        lock.lock()
        let now = rate.time()
        let before = values
        mutate(&counts)
        let after = counts.values
        values = after
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: now) }
        let mustTell = fillMessage(&message, after: after, changedFrom: before, force: false, now: now)
        lock.unlock()
        notifyObservers(from: before, to: after)
        if mustTell { deliver(&message) }
    }

    /// Fills `message` with what the parent must hear after a change to `values`, with the lock
    /// held: the new contribution, or that this node finished. Returns `false` (and leaves
    /// `message` alone) if there is no parent or nothing changed for it. The message is filled in
    /// place, not returned: it is copied at every level of the walk otherwise.
    @inline(__always)
    func fillMessage(
        _ message: inout _ChildMessage,
        after values: _ProgressValues,
        changedFrom before: _ProgressValues?,
        force: Bool,
        now: UInt64
    ) -> Bool {
        guard let parentReference else { return false }
        // The contribution is a function of the fraction (the pending units never change), so the
        // fraction tells whether it changed, and it is computed only when it is sent.
        let contributing = values.isFinished || values.isIndeterminate ? 0 : values.fraction
        let finishedChanged = before.map { $0.isFinished != values.isFinished } ?? false
        guard force || finishedChanged || contributing != sentFraction else { return false }
        sentFraction = contributing
        version &+= 1
        message.parent = parentReference
        message.child = Unmanaged.passUnretained(self)
        message.version = version
        message.contribution = _ProgressUnits(fraction: contributing, times: pendingUnitCountInParent)
        message.isFinished = values.isFinished
        message.time = now
        return true
    }

    /// Delivers a child's message to its parent, then the parent's to its own parent, and so on:
    /// one lock at a time, each node's observers notified before the next node is updated.
    ///
    /// No node on the way is retained: the caller holds the first child, each child holds its
    /// parent, and a child's `parent` never changes once set (see `parent`), so every node on the
    /// path outlives the walk. Retaining them would cost more than the update itself: a node that
    /// is weakly referenced (every child is, by its parent) keeps its reference counts in a side
    /// table, where each retain and release is several times slower.
    func deliver(_ message: inout _ChildMessage) {
        while message.parent._withUnsafeGuaranteedRef({ parent in
            message.child._withUnsafeGuaranteedRef { child in parent.apply(&message, from: child) }
        }) {}
    }

    /// Applies a child's message under this node's lock and notifies this node's observers. Returns
    /// whether this node's parent must hear of it, with `message` rewritten for it.
    @inline(__always)
    private func apply(_ message: inout _ChildMessage, from child: ObservableProgress) -> Bool {
        lock.lock()
        // A stale message (a newer one from the same child was applied already) or one from a
        // child that left changes nothing.
        guard child.isAttached, message.version > child.appliedVersion else {
            lock.unlock()
            return false
        }
        child.appliedVersion = message.version
        let before = values
        if message.isFinished {
            // The finished child credits its pending units and leaves the tree.
            counts.childUnits &-= child.appliedContribution
            child.appliedContribution = .zero
            child.isAttached = false
            children[ObjectIdentifier(child)] = nil
            let (sum, overflow) = counts.completed.addingReportingOverflow(child.pendingUnitCountInParent)
            counts.completed = overflow ? .max : sum
        } else {
            // Wrapping arithmetic: contributions are clamped to 2^64 units (`_ProgressUnits`), so
            // no realistic number of children overflows the sum, and the checks cost an update.
            counts.childUnits &+= message.contribution &- child.appliedContribution
            child.appliedContribution = message.contribution
        }
        let after = counts.values
        values = after
        let time = message.time
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: time) }
        let forward = fillMessage(&message, after: after, changedFrom: before, force: false, now: time)
        lock.unlock()
        notifyObservers(from: before, to: after)
        return forward
    }
}

/// What a child tells its parent: its latest contribution (fixed point, in the parent's units), or
/// that it finished. Unretained references: see `deliver(_:)` for why both outlive the message.
struct _ChildMessage {
    var parent: Unmanaged<ObservableProgress>
    var child: Unmanaged<ObservableProgress>
    var version: UInt64 = 0
    var contribution = _ProgressUnits.zero
    var isFinished = false
    /// When the update was made (coarse clock), for the throughput estimate of every level.
    var time: UInt64 = 0

    /// A message not filled in yet (see `fillMessage`).
    @inline(__always)
    init(placeholderFor node: ObservableProgress) {
        parent = Unmanaged.passUnretained(node)
        child = parent
    }
}
