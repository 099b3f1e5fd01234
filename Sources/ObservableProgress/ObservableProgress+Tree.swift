import KeyValueObserving

extension ObservableProgress {
    /// Makes `child` report to this progress, standing for `pendingUnitCount` of its units. The
    /// child's current fraction counts at once; a child that is already finished credits its
    /// pending units at once and does not join the tree. A child added to a cancelled or paused
    /// progress is cancelled or paused too.
    ///
    /// Traps if `child` already has a parent, is this progress or one of its ancestors, or if
    /// `pendingUnitCount` is negative.
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
        // 1. The parent counts the child first, so no message the child sends from now on is lost.
        lock.lock()
        child.isAttached = true
        child.appliedVersion = 0
        child.appliedContribution = 0
        children[ObjectIdentifier(child)] = _WeakChild(node: child)
        let inheritsCancel = cancelled
        let inheritsPause = paused
        lock.unlock()
        // 2. The child points to its parent and sends its current state.
        child.lock.lock()
        let hadParent = child.parent != nil
        if !hadParent {
            child.parent = self
            child.pendingUnitCountInParent = pendingUnitCount
        }
        let message = hadParent ? nil : child.messageToParent(child.counts.values, force: true)
        child.lock.unlock()
        precondition(!hadParent, "ObservableProgress.addChild: the child already has a parent; a progress reports to one parent")
        if let message { deliver(message) }
        if inheritsCancel { child.cancel() }
        if inheritsPause { child.pause() }
    }

    /// Applies `mutate` to this node's counts under its lock, then notifies and propagates.
    @inline(__always)
    func update(_ mutate: (inout _ProgressCounts) -> Void) {
        let now = _coarseNanoseconds()
        lock.lock()
        let before = counts.values
        mutate(&counts)
        let after = counts.values
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: now) }
        let message = messageToParent(after, force: false, changedFrom: before)
        lock.unlock()
        notifyObservers(from: before, to: after)
        if let message { deliver(message) }
    }

    /// What the parent must hear after a change to `values`, with the lock held: the new
    /// contribution, or that this node finished. `nil` if there is no parent or nothing changed for
    /// it.
    @inline(__always)
    func messageToParent(_ values: _ProgressValues, force: Bool, changedFrom before: _ProgressValues? = nil) -> _ChildMessage? {
        guard let parent else { return nil }
        let contribution = values.isFinished || values.isIndeterminate
            ? 0
            : _fixedPoint(values.fraction * Double(pendingUnitCountInParent))
        let finishedChanged = before.map { $0.isFinished != values.isFinished } ?? false
        guard force || finishedChanged || contribution != sentContribution else { return nil }
        sentContribution = contribution
        version &+= 1
        return _ChildMessage(
            parent: parent,
            child: self,
            version: version,
            contribution: contribution,
            isFinished: values.isFinished,
            pendingUnitCount: pendingUnitCountInParent
        )
    }

    /// Delivers a child's message to its parent, then the parent's to its own parent, and so on:
    /// one lock at a time, each node's observers notified before the next node is updated.
    func deliver(_ message: _ChildMessage) {
        var next: _ChildMessage? = message
        while let message = next {
            next = message.parent.apply(message)
        }
    }

    /// Applies a child's message under this node's lock; notifies this node's observers; returns
    /// the message for this node's parent, if any.
    private func apply(_ message: _ChildMessage) -> _ChildMessage? {
        let child = message.child
        let now = _coarseNanoseconds()
        lock.lock()
        // A stale message (a newer one from the same child was applied already) or one from a
        // child that left changes nothing.
        guard child.isAttached, message.version > child.appliedVersion else {
            lock.unlock()
            return nil
        }
        child.appliedVersion = message.version
        let before = counts.values
        if message.isFinished {
            // The finished child credits its pending units and leaves the tree.
            counts.childUnits -= child.appliedContribution
            child.appliedContribution = 0
            child.isAttached = false
            children[ObjectIdentifier(child)] = nil
            let (sum, overflow) = counts.completed.addingReportingOverflow(message.pendingUnitCount)
            counts.completed = overflow ? .max : sum
        } else {
            counts.childUnits += message.contribution - child.appliedContribution
            child.appliedContribution = message.contribution
        }
        let after = counts.values
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: now) }
        let forward = messageToParent(after, force: false, changedFrom: before)
        lock.unlock()
        if message.isFinished { child.leave(self) }
        notifyObservers(from: before, to: after)
        return forward
    }

    /// Forgets `parent` once it has let this finished node go.
    private func leave(_ parent: ObservableProgress) {
        lock.lock()
        let left = self.parent === parent ? self.parent.take() : nil
        lock.unlock()
        withExtendedLifetime(left) {}
    }
}

/// What a child tells its parent: its latest contribution (fixed point, in the parent's units), or
/// that it finished.
struct _ChildMessage {
    let parent: ObservableProgress
    let child: ObservableProgress
    let version: UInt64
    let contribution: Int128
    let isFinished: Bool
    let pendingUnitCount: Int64
}
