/// The observers of one key at one moment, immutable. The registry replaces a key's snapshot on every
/// registration and removal; a setter takes the current one under the lock (one retain) and delivers
/// from it after unlocking, so handlers never run under the lock and may register or invalidate.
@usableFromInline
final class _ObserverSnapshot: @unchecked Sendable {
    // Invariant: immutable after init; the entries are themselves thread-safe.
    @usableFromInline let entries: ContiguousArray<_ObserverEntry>
    /// Every entry is direct and none asked for `.old` or `.prior`: the set path needs nothing but the new value.
    @usableFromInline let isPlain: Bool
    /// Some direct entry needs the value before the change (`.old` or `.prior`).
    @usableFromInline let needsOld: Bool
    /// Some entry needs work before the change: a direct `.prior`, or any indirect entry.
    @usableFromInline let needsWillChange: Bool
    @usableFromInline let hasIndirect: Bool

    init(entries: ContiguousArray<_ObserverEntry>) {
        self.entries = entries
        var needsOld = false
        var needsPrior = false
        var hasIndirect = false
        for entry in entries {
            if entry.isDirect {
                needsOld = needsOld || !entry.options.isDisjoint(with: [.old, .prior])
                needsPrior = needsPrior || entry.options.contains(.prior)
            } else {
                hasIndirect = true
            }
        }
        self.needsOld = needsOld
        self.hasIndirect = hasIndirect
        self.needsWillChange = needsPrior || hasIndirect
        self.isPlain = !needsOld && !hasIndirect
    }
}
