/// A node's record of its unfinished children: what each one last contributed, guarded by the
/// node's own lock (never the child's).
///
/// Each child has one `_ChildRecord`, made by the parent when the child joins. The child keeps a
/// reference to it only to address its messages (it never reads it), so applying a message costs
/// a pointer access rather than a hashed lookup; the record says whether the child still counts,
/// so a stale message from a child that left is ignored.
///
/// It also lists the children whose latest contribution this node has not applied yet: a child
/// whose ancestors nobody observes does not send each change up, it lists itself here once, and
/// this node asks it for its contribution when its own fraction is read (see `refresh()`).
struct _ProgressChildren {
    private var records: [ObjectIdentifier: _ChildRecord] = [:]
    /// The children that changed since this node last applied their contribution, each listed
    /// once (`_ChildRecord.isListedOutdated`); records of children that left are skipped.
    private var outdated: [_ChildRecord] = []

    /// Whether a child's latest contribution may be missing from this node's counts.
    var hasOutdated: Bool {
        @inline(__always) get { !outdated.isEmpty }
    }

    /// Records `child`, standing for `pendingUnitCount` units of this node.
    mutating func attach(_ child: ObservableProgress, pendingUnitCount: Int64) -> _ChildRecord {
        let record = _ChildRecord(node: child, pendingUnitCount: pendingUnitCount)
        records[ObjectIdentifier(record)] = record
        return record
    }

    /// Forgets a child deallocated before it finished (its contribution stays, as in Foundation,
    /// where the parent would have kept the child alive).
    mutating func detach(_ record: _ChildRecord) {
        guard record.isAttached else { return }
        leave(record)
    }

    /// Applies a child's message to its record and to `counts`. Returns `false` for a message that
    /// changes nothing: a stale one (a newer one from the same child was applied already) or one
    /// from a child that left.
    @inline(__always)
    mutating func apply(_ message: _ChildMessage, to counts: inout _ProgressCounts) -> Bool {
        message.record.unsafelyUnwrapped._withUnsafeGuaranteedRef { record in
            guard record.isAttached, message.version > record.appliedVersion else { return false }
            record.appliedVersion = message.version
            if message.isFinished {
                // The finished child credits its pending units and leaves the tree.
                counts.childUnits &-= record.appliedContribution
                let (sum, overflow) = counts.completed.addingReportingOverflow(record.pendingUnitCount)
                counts.completed = overflow ? .max : sum
                leave(record)
            } else {
                // Wrapping arithmetic: contributions are clamped to 2^64 units (`_ProgressUnits`),
                // so no realistic number of children overflows the sum, and the checks cost an update.
                counts.childUnits &+= message.contribution &- record.appliedContribution
                record.appliedContribution = message.contribution
            }
            return true
        }
    }

    /// Lists the child of `record` as changed since this node last applied its contribution.
    mutating func markOutdated(_ record: Unmanaged<_ChildRecord>) {
        record._withUnsafeGuaranteedRef { record in
            guard record.isAttached, !record.isListedOutdated else { return }
            record.isListedOutdated = true
            outdated.append(record)
        }
    }

    /// The listed children still in the tree, retained, and an empty list.
    mutating func takeOutdated() -> [ObservableProgress] {
        // The storage stays, for the children that list themselves again.
        defer { outdated.removeAll(keepingCapacity: true) }
        return outdated.compactMap { record in
            record.isListedOutdated = false
            return record.isAttached ? record.node : nil
        }
    }

    /// The children still alive, retained (for cancelling and pausing them).
    var live: [ObservableProgress] {
        records.values.compactMap(\.node)
    }

    private mutating func leave(_ record: _ChildRecord) {
        record.isAttached = false
        record.appliedContribution = .zero
        records[ObjectIdentifier(record)] = nil
    }
}

/// What a parent knows of one child. Part of the parent's state: every field is accessed only with
/// the parent's lock held (hence `@exclusivity(unchecked)`); the child holds a reference to it, to
/// address its messages, and never reads it.
final class _ChildRecord {
    /// The child, weakly: a child keeps its parent alive, not the reverse, so a tree nobody holds
    /// is freed even if it never finishes.
    @exclusivity(unchecked) weak var node: ObservableProgress?
    /// The units of the parent the child stands for; credited when it finishes.
    let pendingUnitCount: Int64
    /// Whether the child counts among the parent's children (until it finishes or is deallocated).
    @exclusivity(unchecked) var isAttached = true
    /// The latest message `version` applied, so each child's latest state is applied only, whatever
    /// order the updating threads deliver its messages in.
    @exclusivity(unchecked) var appliedVersion: UInt64 = 0
    /// The child's contribution included in the parent's `childUnits`.
    @exclusivity(unchecked) var appliedContribution = _ProgressUnits.zero
    /// Whether the record is in the parent's list of children with a contribution not applied yet.
    @exclusivity(unchecked) var isListedOutdated = false

    init(node: ObservableProgress, pendingUnitCount: Int64) {
        self.node = node
        self.pendingUnitCount = pendingUnitCount
    }
}
