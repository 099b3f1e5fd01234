import _KeyValueObservingShims

/// While a batch's changes are delivered (`coalescingChanges`), the tracked observations among
/// their observers are not evaluated at each change: this thread's deferral collects them, and
/// each is evaluated and delivered once when the batch's delivery is over (its `.prior`
/// notification, sent at the batch's first change of each key, is sent once: see `_TrackerCore`).
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

    /// Starts deferring this thread's changes of tracked inputs, for a batch's delivery: the
    /// returned deferral's `end()` evaluates each tracked observation they touched once. `nil` (and
    /// nothing to end) while no tracked observation exists in the process, or when a deferral runs
    /// already on this thread (it evaluates at its own end).
    @inline(__always)
    static func begin() -> _TrackingDeferral? {
        guard _kvo_has_live_trackers() != 0 else { return nil }
        return beginDeferring()
    }

    @inline(never)
    private static func beginDeferring() -> _TrackingDeferral? {
        guard _kvo_get_thread_deferral() == nil else { return nil }
        let deferral = _TrackingDeferral()
        _kvo_set_thread_deferral(Unmanaged.passUnretained(deferral).toOpaque())
        return deferral
    }

    /// Stops deferring and evaluates the tracked observations whose inputs changed meanwhile.
    func end() {
        _kvo_set_thread_deferral(nil)
        // Changes the handlers make from here on are delivered as usual, nested.
        for tracker in trackers { tracker.inputDidChange() }
    }

    func add(_ tracker: _TrackerCore) {
        if seen.insert(ObjectIdentifier(tracker)).inserted { trackers.append(tracker) }
    }
}
