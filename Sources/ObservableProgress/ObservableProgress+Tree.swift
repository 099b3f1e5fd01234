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
        // 3. The child starts reporting, with its current state (and lists itself as outdated if
        // its own outdated children changed it).
        var message = _ChildMessage(to: self)
        let now = child.clock.now()
        let listAgain = child.withLock { state in
            state.parentReference = Unmanaged.passUnretained(self)
            state.recordInParent = record
            state.recordReference = Unmanaged.passUnretained(record)
            state.pendingUnitCountInParent = pendingUnitCount
            child.parentLink.store(Unmanaged.passUnretained(self), ordering: .releasing)
            return state.fillForParent(&message, now: now)
        }
        child.deliver(&message, exact: child.isObservedAbove, notifying: true)
        if listAgain { Self.markOutdated(message) }
        if inheritsCancel { child.cancel() }
        if inheritsPause { child.setPaused(true, parentGeneration: pauseStamp) }
    }

    /// Whether an ancestor may have observers (of any key): then every change of this node's
    /// contribution is sent up at once, and each ancestor's observers get exact values. Otherwise
    /// the ancestors' fractions are brought up to date when read (`refresh()`). A few atomic loads
    /// per level, no lock.
    ///
    /// Unretained: each node keeps its parent, which never changes once set (see
    /// `_ProgressState.parent`), so every node on the way outlives the walk.
    var isObservedAbove: Bool {
        @inline(__always) get {
            var next = parentLink.load(ordering: .acquiring)
            while let node = next {
                let (observed, parent) = node._withUnsafeGuaranteedRef { node in
                    (node._mayHaveObservers, node.parentLink.load(ordering: .acquiring))
                }
                if observed { return true }
                next = parent
            }
            return false
        }
    }

    /// Applies `mutate` to this node's counts under its lock, then notifies and propagates.
    @inline(__always)
    func update(_ mutate: (inout _ProgressCounts) -> Void) {
        var message = _ChildMessage(to: self)
        lock.lock()
        var exact = state.hasObservedAncestor
        if !exact, isObservedAbove {
            exact = true
            startSendingEveryChange()
        }
        if state.children.hasOutdated, exact || _mayHaveObservers {
            // Observed here: the values notified must include every descendant's latest change.
            lock.unlock()
            refresh()
            lock.lock()
        }
        let (before, after, propagation) = state.update(mutate, clock: clock, exact: exact, message: &message)
        lock.unlock()
        notifyObservers(from: before, to: after)
        switch propagation {
        case .none: break
        case .send: deliver(&message, exact: exact, notifying: true)
        case .markOutdated: Self.markOutdated(message)
        }
    }

    /// Called under the lock by the first update that finds an observed ancestor: remembers it
    /// (an object's observer registry, once created, lives as long as the object, and every
    /// ancestor outlives this node), and brings the whole tree up to date before the update, so
    /// the first change the observers hear of starts from the value a read would have returned.
    /// Doing it later, once the update is made, would take the update in with the catching up,
    /// which nobody hears of.
    @inline(never)
    private func startSendingEveryChange() {
        state.hasObservedAncestor = true
        lock.unlock()
        var root = Unmanaged.passUnretained(self)
        while let parent = root._withUnsafeGuaranteedRef({ $0.parentLink.load(ordering: .acquiring) }) { root = parent }
        root._withUnsafeGuaranteedRef { $0.refresh() }
        lock.lock()
    }

    /// Delivers a child's message to its parent, then the parent's to its own parent, and so on:
    /// one lock at a time, each node's observers notified (unless not `notifying`) before the next
    /// node is updated.
    ///
    /// No node on the way is retained: the caller holds the first child, each child holds its
    /// parent (and its record in the parent), and a child's `parent` never changes once set (see
    /// `_ProgressState.parent`), so every node and record on the path outlives the walk. Retaining
    /// them would cost more than the update itself: a node that is weakly referenced (every child
    /// is, by its parent) keeps its reference counts in a side table, where each retain and
    /// release is several times slower.
    func deliver(_ message: inout _ChildMessage, exact: Bool, notifying: Bool) {
        while true {
            switch message.parent._withUnsafeGuaranteedRef({ parent in parent.apply(&message, exact: exact, notifying: notifying) }) {
            case .none: return
            case .send: continue
            case .markOutdated:
                Self.markOutdated(message)
                return
            }
        }
    }

    /// Applies a child's message under this node's lock and notifies this node's observers (if
    /// `notifying`). Returns what this node's parent must hear, with `message` rewritten for it.
    @inline(__always)
    private func apply(_ message: inout _ChildMessage, exact: Bool, notifying: Bool) -> _Propagation {
        let finishing = message.isFinished
        lock.lock()
        guard let (before, after, propagation) = state.apply(&message, exact: exact) else {
            lock.unlock()
            return .none
        }
        lock.unlock()
        if notifying {
            // A child that does not finish changes this node's fraction only.
            if finishing {
                notifyObservers(from: before, to: after)
            } else {
                notifyObservers(fractionFrom: before.fraction, to: after.fraction)
            }
        }
        return propagation
    }

    /// Lists the node that `message` comes from as outdated in its parent (the message's
    /// addressee), then the parent in its own parent, and so on up to the first node listed
    /// already: one lock at a time, nothing retained (see `deliver(_:exact:notifying:)`).
    static func markOutdated(_ message: _ChildMessage) {
        var parent = message.parent
        var record = message.record.unsafelyUnwrapped
        while let next = parent._withUnsafeGuaranteedRef({ parent in parent.markOutdated(record) }) {
            (parent, record) = next
        }
    }

    private func markOutdated(_ record: Unmanaged<_ChildRecord>) -> (
        parent: Unmanaged<ObservableProgress>, record: Unmanaged<_ChildRecord>
    )? {
        lock.lock()
        defer { lock.unlock() }
        return state.markOutdated(record)
    }

    /// Brings this node's counts up to date with the changes of its descendants that were not sent
    /// up (see `_ProgressState.propagation`): asks each child listed as outdated for its
    /// contribution, after bringing the child up to date the same way. Depth first, one lock at
    /// a time. What changes while it runs is listed again, for the next read.
    ///
    /// Nobody is notified: what it applies is already in the values a read returns (which
    /// refreshes first). Observers see it as part of the next change they hear of: an observed
    /// node has no outdated children, except those listed before its first observer registered,
    /// which the first update after that brings in before it changes anything
    /// (`startSendingEveryChange()`), and those of an update racing with the registration.
    ///
    /// - Complexity: O(number of outdated descendants).
    @inline(never)
    func refresh() {
        let outdated = withLock { $0.children.takeOutdated() }
        guard !outdated.isEmpty else { return }
        let exact = _mayHaveObservers || isObservedAbove
        for child in outdated {
            child.refresh()
            var message = _ChildMessage(to: self)
            // Stamped with the time it is asked: its fraction is still that of its last update, so
            // a throughput sample the parent takes from it is right for that time.
            let now = child.clock.now()
            let listAgain = child.withLock { state in state.fillForParent(&message, now: now) }
            child.deliver(&message, exact: exact, notifying: false)
            if listAgain { Self.markOutdated(message) }
        }
    }

    /// Reads the state under the lock once it includes every descendant's latest change
    /// (`refresh()`): for the values computed from the children's contributions.
    @inline(__always)
    func withRefreshedLock<Result>(_ body: (inout _ProgressState) -> Result) -> Result {
        lock.lock()
        if state.children.hasOutdated {
            lock.unlock()
            refresh()
            lock.lock()
        }
        defer { lock.unlock() }
        return body(&state)
    }
}

/// What a child tells its parent: its latest contribution (fixed point, in the parent's units), or
/// that it finished. Unretained references: see `deliver(_:exact:notifying:)` for why both outlive the message.
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
