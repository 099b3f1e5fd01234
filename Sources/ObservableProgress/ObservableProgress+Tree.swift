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
        child.appliedContribution = 0
        children[ObjectIdentifier(child)] = _WeakChild(node: child)
        let inheritsCancel = cancelled
        let inheritsPause = paused
        let pauseStamp = pauseGeneration
        lock.unlock()
        // 3. The child starts reporting, with its current state.
        child.lock.lock()
        child.parentReference = Unmanaged.passUnretained(self)
        child.pendingUnitCountInParent = pendingUnitCount
        let message = child.messageToParent(child.values, force: true, now: _coarseNanoseconds())
        child.lock.unlock()
        if let message { deliver(message) }
        if inheritsCancel { child.cancel() }
        if inheritsPause { child.setPaused(true, parentGeneration: pauseStamp) }
    }

    /// Applies `mutate` to this node's counts under its lock, then notifies and propagates.
    @inline(__always)
    func update(_ mutate: (inout _ProgressCounts) -> Void) {
        lock.lock()
        let now = rate.time()
        let before = values
        mutate(&counts)
        let after = counts.values
        values = after
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: now) }
        let message = messageToParent(after, force: false, changedFrom: before, now: now)
        lock.unlock()
        notifyObservers(from: before, to: after)
        if let message { deliver(message) }
    }

    /// What the parent must hear after a change to `values`, with the lock held: the new
    /// contribution, or that this node finished. `nil` if there is no parent or nothing changed for
    /// it.
    @inline(__always)
    func messageToParent(_ values: _ProgressValues, force: Bool, changedFrom before: _ProgressValues? = nil, now: UInt64) -> _ChildMessage? {
        guard let parentReference else { return nil }
        let contribution = values.isFinished || values.isIndeterminate
            ? 0
            : _fixedPoint(values.fraction * Double(pendingUnitCountInParent))
        let finishedChanged = before.map { $0.isFinished != values.isFinished } ?? false
        guard force || finishedChanged || contribution != sentContribution else { return nil }
        sentContribution = contribution
        version &+= 1
        return _ChildMessage(
            parent: parentReference,
            child: Unmanaged.passUnretained(self),
            version: version,
            contribution: contribution,
            isFinished: values.isFinished,
            time: now
        )
    }

    /// Delivers a child's message to its parent, then the parent's to its own parent, and so on:
    /// one lock at a time, each node's observers notified before the next node is updated.
    ///
    /// No node on the way is retained: the caller holds the first child, each child holds its
    /// parent, and a child's `parent` never changes once set (see `parent`), so every node on the
    /// path outlives the walk. Retaining them would cost more than the update itself: a node that
    /// is weakly referenced (every child is, by its parent) keeps its reference counts in a side
    /// table, where each retain and release is several times slower.
    func deliver(_ first: _ChildMessage) {
        var message = first
        while let next = message.parent._withUnsafeGuaranteedRef({ $0.apply(message) }) {
            message = next
        }
    }

    /// Applies a child's message under this node's lock; notifies this node's observers; returns
    /// the message for this node's parent, if any.
    @inline(__always)
    private func apply(_ message: _ChildMessage) -> _ChildMessage? {
        message.child._withUnsafeGuaranteedRef { child in apply(message, from: child) }
    }

    @inline(__always)
    private func apply(_ message: _ChildMessage, from child: ObservableProgress) -> _ChildMessage? {
        lock.lock()
        // A stale message (a newer one from the same child was applied already) or one from a
        // child that left changes nothing.
        guard child.isAttached, message.version > child.appliedVersion else {
            lock.unlock()
            return nil
        }
        child.appliedVersion = message.version
        let before = values
        if message.isFinished {
            // The finished child credits its pending units and leaves the tree.
            counts.childUnits -= child.appliedContribution
            child.appliedContribution = 0
            child.isAttached = false
            children[ObjectIdentifier(child)] = nil
            let (sum, overflow) = counts.completed.addingReportingOverflow(child.pendingUnitCountInParent)
            counts.completed = overflow ? .max : sum
        } else {
            counts.childUnits += message.contribution - child.appliedContribution
            child.appliedContribution = message.contribution
        }
        let after = counts.values
        values = after
        if after.fraction != before.fraction { rate.record(fraction: after.fraction, now: message.time) }
        let forward = messageToParent(after, force: false, changedFrom: before, now: message.time)
        lock.unlock()
        notifyObservers(from: before, to: after)
        return forward
    }
}

/// What a child tells its parent: its latest contribution (fixed point, in the parent's units), or
/// that it finished. Unretained references: see `deliver(_:)` for why both outlive the message.
struct _ChildMessage {
    let parent: Unmanaged<ObservableProgress>
    let child: Unmanaged<ObservableProgress>
    let version: UInt64
    let contribution: Int128
    let isFinished: Bool
    /// When the update was made (coarse clock), for the throughput estimate of every level.
    let time: UInt64
}
