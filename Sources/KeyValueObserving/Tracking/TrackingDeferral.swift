import _KeyValueObservingShims

/// While a batch's changes are delivered (`coalescingChanges`), the tracked observations among
/// their observers are not evaluated at each change: this thread's deferral collects them, and
/// each is evaluated and delivered once when the batch's delivery is over (its `.prior`
/// notification, sent at the batch's first change of each key, is sent once: see `_Tracker`).
///
/// Not thread-safe: a deferral is used by its own thread only (`_kvo_thread_deferral`).
final class _TrackingDeferral {
    private var trackers: [_TrackerCore] = []
    private var seen: Set<ObjectIdentifier> = []

    /// This thread's deferral, if it is delivering a batch.
    @inline(__always)
    static var current: _TrackingDeferral? {
        guard let pointer = _kvo_get_thread_deferral() else { return nil }
        return Unmanaged<_TrackingDeferral>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Runs `deliver` (a batch's delivery) with changes of tracked inputs deferred to its end. While
    /// no tracked observation exists in the process, or when a deferral runs already on this thread
    /// (it evaluates at its own end), just runs it.
    @inline(__always)
    static func deferringTrackedChanges(_ deliver: () -> Void) {
        guard _kvo_has_live_trackers() != 0, _kvo_get_thread_deferral() == nil else { return deliver() }
        runDeferring(deliver)
    }

    @inline(never)
    private static func runDeferring(_ deliver: () -> Void) {
        let deferral = _TrackingDeferral()
        _kvo_set_thread_deferral(Unmanaged.passUnretained(deferral).toOpaque())
        deliver()
        _kvo_set_thread_deferral(nil)
        // Changes the handlers make from here on are delivered as usual, nested.
        for tracker in deferral.trackers { tracker.inputDidChange() }
    }

    func add(_ tracker: _TrackerCore) {
        if seen.insert(ObjectIdentifier(tracker)).inserted { trackers.append(tracker) }
    }
}
