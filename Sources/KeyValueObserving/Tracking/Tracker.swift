import Synchronization
import _KeyValueObservingShims

/// The engine of one tracked observation (`observeTracking`, `KeyValueObservation.tracking`):
/// evaluates the expression while its thread records the observable reads it makes, observes
/// exactly those, and evaluates again and delivers after any of them changes.
///
/// **One delivering thread at a time.** `owner` holds the token of the thread that evaluates and
/// delivers (its `pthread_self()`), or 0, with bit 0 set when another thread asked for an
/// evaluation meanwhile. A thread that finds the tracker free takes it with a compare-and-swap; the
/// owner's own changes (a handler that sets an input) nest, depth-first, as KVO's do; a change from
/// another thread only sets bit 0 and returns (the writer does not wait), and the owner evaluates
/// again, without `.prior`, before it lets the tracker go. So deliveries never overlap, and each
/// delivery's old value is the previous delivery's new value. No lock is held while the expression
/// or the handler runs: the owner's exclusive state (`depth`, the inputs, the last value, the
/// recorder) is handed from owner to owner by the acquire/release of `owner`.
///
/// The core is not generic: the work that knows the expression's types (evaluate, compare, build
/// the change, call the handler) is `step`, a closure built in the client by the inlinable API
/// (`_TrackedState.step`), so it is specialised there and makes no run-time metadata look-ups.
@usableFromInline
final class _TrackerCore: _Invalidatable, @unchecked Sendable {
    // Invariant: `owner` and `isActive` are atomics; `depth`, `inputs`, `stepReference` and `recorderReference` are
    // only accessed by the thread that holds `owner` (acquired with acquiring, released with
    // releasing ordering), or before the tracker is published (`start`), so no access overlaps
    // another (`@exclusivity(unchecked)`); `wantsPrior`, `fileID` and `line` are immutable.
    final let owner = Atomic<UInt>(0)
    @usableFromInline final let isActive = Atomic<Bool>(true)
    @exclusivity(unchecked) final var depth = 0
    @exclusivity(unchecked) final var inputs: [_TrackedInput] = [] {
        didSet {
            identities.deallocate()
            // No inputs, no memory (no base address): the cursor then expects nothing.
            guard !inputs.isEmpty else { return identities = UnsafeMutableBufferPointer(start: nil, count: 0) }
            identities = .allocate(capacity: inputs.count)
            _ = identities.initialize(from: inputs.lazy.map { _TrackedInputIdentity(objectID: $0.objectID, offset: $0.offset ?? -1) })
        }
    }
    /// `inputs`' objects and offsets, plain values in memory of the tracker's own: comparing a read
    /// with them retains nothing.
    @exclusivity(unchecked) final var identities = UnsafeMutableBufferPointer<_TrackedInputIdentity>(start: nil, count: 0)
    /// Evaluates and delivers (see `_TrackedState.step`), owned (+1) by the tracker; `nil` once the
    /// observation ended, which releases the expression and the handler with what they captured.
    /// Unmanaged, so that calling it retains nothing: only the owner replaces it (`removeInputs`,
    /// at the outermost `release`), never while it runs.
    @exclusivity(unchecked) private var stepReference: Unmanaged<_TrackedStepFunction>?
    /// Owned (+1) by the tracker, released in deinit: unmanaged, so that using it retains nothing.
    @exclusivity(unchecked) private var recorderReference: Unmanaged<_TrackingRecorder>?

    /// Runs `body` with the recorder, retaining nothing.
    @inline(__always)
    private func withRecorder<Result>(_ body: (_TrackingRecorder) -> Result) -> Result {
        recorderReference.unsafelyUnwrapped._withUnsafeGuaranteedRef(body)
    }

    /// Sets what evaluates and delivers (before `start`).
    @usableFromInline
    final func _setStep(_ step: @escaping (_TrackerCore, _TrackedStep) -> Void) {
        stepReference?.release()
        stepReference = Unmanaged.passRetained(_TrackedStepFunction(step))
    }

    /// Calls the step function, if the observation has not ended.
    @inline(__always)
    private func callStep(_ step: _TrackedStep) {
        guard let stepReference else { return }
        stepReference._withUnsafeGuaranteedRef { $0.call(self, step) }
    }
    final let wantsPrior: Bool
    final let fileID: String
    final let line: UInt
    /// The registration on the root that tells of its deallocation, if the observation has a root:
    /// set by `start` before anything else can reach the tracker, then never written.
    final var rootDeinit: (registry: _ObserverRegistry, id: UInt64)?
    private let hasReported = Atomic<Bool>(false)

    @usableFromInline
    init(wantsPrior: Bool, fileID: String, line: UInt) {
        self.wantsPrior = wantsPrior
        self.fileID = fileID
        self.line = line
        precondition(
            _TrackedInputIdentity.isLaidOutAsTheCursorReadsIt, "_TrackedInputIdentity is not laid out as _kvo_read_is_expected reads it")
        recorderReference = Unmanaged.passRetained(_TrackingRecorder(tracker: self))
        _kvo_add_live_trackers(1)
    }

    deinit {
        stepReference?.release()
        recorderReference?.release()
        identities.deallocate()
        _kvo_add_live_trackers(-1)
    }

    /// Called once when the observation goes quiet because its root died (sequences finish). Set
    /// before `start`, then never written.
    final var onQuiet: (@Sendable () -> Void)?

    @usableFromInline
    final func _setOnQuiet(_ onQuiet: (@Sendable () -> Void)?) {
        self.onQuiet = onQuiet
    }

    /// Evaluates and delivers a change (or, with `prior`, the notification before one). Called by
    /// the owning thread only; does nothing once the observation ended or its root is gone.
    @inline(__always)
    final func evaluateAndDeliver(prior: Bool) {
        callStep(prior ? .prior : .change)
    }

    // MARK: Evaluation (for `step`)

    /// Whether an evaluation is being recorded: an expression that changed one of its own inputs.
    @usableFromInline
    final var isEvaluating: Bool {
        withRecorder { $0.isRecording }
    }

    /// Asks the owner (this thread) to evaluate again once the current evaluation is over.
    @usableFromInline
    final func evaluateAgainLater() {
        owner.bitwiseOr(1, ordering: .releasing)
    }

    /// Starts recording the reads of an evaluation from `root`.
    @usableFromInline
    final func beginEvaluation(root: AnyObject) {
        withRecorder { $0.start(root: root) }
    }

    /// Stops recording: the inputs are what the evaluation read (new ones observed as they were
    /// read, those no longer read removed).
    @usableFromInline
    final func endEvaluation() {
        // The common case, kept apart: the evaluation read what the previous one read.
        if withRecorder({ $0.finishReadingThePreviousInputs() }) { return }
        let (found, removed) = withRecorder { $0.finish() }
        if let found { inputs = found }
        for input in removed { input.registry.remove(id: input.id) }
    }

    /// After the first evaluation: reports, once, one that read nothing observable.
    @usableFromInline
    final func checkFirstEvaluation(rootType: Any.Type) {
        if inputs.isEmpty { reportReadNothing(objectType: rootType) }
    }

    /// Whether deliveries may still start (checked right before each call of the handler).
    @usableFromInline
    final var mayDeliver: Bool {
        isActive.load(ordering: .acquiring)
    }

    /// This thread's token in `owner`: its `pthread_t`, an aligned address (bit 0 is free).
    @inline(__always)
    static var thisThread: UInt {
        _ThreadID.current.token
    }

    // MARK: Ownership

    enum Acquisition { case owner, nested, deferred, inactive }

    /// Takes the tracker for this thread, or tells the owner to evaluate again.
    @inline(__always)
    final func acquire() -> Acquisition {
        guard isActive.load(ordering: .relaxed) else { return .inactive }
        return take()
    }

    /// `acquire()`, active or not.
    @inline(__always)
    private func take() -> Acquisition {
        let me = Self.thisThread
        var state = owner.load(ordering: .acquiring)
        while true {
            if state == 0 {
                let (exchanged, found) = owner.compareExchange(expected: 0, desired: me, ordering: .acquiring)
                if exchanged {
                    depth = 1
                    return .owner
                }
                state = found
            } else if state & ~1 == me {
                depth += 1
                return .nested
            } else {
                let (exchanged, found) = owner.compareExchange(expected: state, desired: state | 1, ordering: .releasing)
                if exchanged { return .deferred }
                state = found
            }
        }
    }

    /// Lets the tracker go, after evaluating and delivering again for every change another thread
    /// announced meanwhile; at the outermost level, removes the inputs if the observation ended.
    @inline(__always)
    final func release() {
        if depth > 1 {
            depth -= 1
            return
        }
        let me = Self.thisThread
        while true {
            if !isActive.load(ordering: .acquiring) { removeInputs() }
            let (exchanged, found) = owner.compareExchange(expected: me, desired: 0, ordering: .releasing)
            if exchanged { return }
            // Bit 0: another thread changed an input while this one delivered (or the expression
            // changed one of its own inputs). Cleared before evaluating: a change announced after
            // this sets it again.
            _ = found
            _ = owner.exchange(me, ordering: .acquiringAndReleasing)
            if isActive.load(ordering: .acquiring) { evaluateAndDeliver(prior: false) }
        }
    }

    // MARK: Changes of the inputs

    final func inputWillChange() {
        switch acquire() {
        case .owner, .nested:
            evaluateAndDeliver(prior: true)
            release()
        case .deferred, .inactive:
            return
        }
    }

    final func inputDidChange() {
        if let deferral = _TrackingDeferral.current {
            deferral.add(self)
            return
        }
        switch acquire() {
        case .owner, .nested:
            if isActive.load(ordering: .acquiring) { evaluateAndDeliver(prior: false) }
            release()
        case .deferred, .inactive:
            return
        }
    }

    // MARK: Ending

    @usableFromInline
    func invalidate() {
        guard isActive.exchange(false, ordering: .acquiringAndReleasing) else { return }
        if let rootDeinit { rootDeinit.registry.remove(id: rootDeinit.id) }
        // Free (or this thread's, from a handler): taken and let go, which removes the inputs of
        // an observation that ended. Another thread's: it removes them when it lets it go.
        switch take() {
        case .owner, .nested: release()
        case .deferred, .inactive: return
        }
    }

    /// The root was deallocated: the observation goes quiet.
    final func rootDidDeinit() {
        invalidate()
        onQuiet?()
    }

    /// Owner only, once the observation ended: removes every input's observer (outside any lock of
    /// the tracker) and releases the expression and the handler, with what they captured.
    final func removeInputs() {
        let removed = inputs
        inputs = []
        for input in removed { input.registry.remove(id: input.id) }
        let step = stepReference
        stepReference = nil
        step?.release()
    }

    /// Reports, once, an evaluation that read nothing observable: it could never notify.
    private func reportReadNothing(objectType: Any.Type) {
        guard !hasReported.exchange(true, ordering: .relaxed) else { return }
        KeyValueObservingDiagnosticCenter.report(
            KeyValueObservingDiagnostic(
                kind: .untrackedExpression, objectType: objectType, keyPath: \KeyValueObservation.self,
                detail: "the tracked expression read nothing observable (no @Observed property, progress key or defaults key), so "
                    + "it can never notify. Fix: read the observable properties in the expression itself; a plain stored "
                    + "property or a value the closure captured is not tracked.",
                fileID: fileID, line: line))
    }
}

extension _TrackerCore {
    /// The first evaluation, on the registering thread: observes what it reads, delivers `.initial`
    /// if asked, then whatever other threads changed meanwhile. `root` is told of its deallocation
    /// (the observation then goes quiet) if the observation has one.
    @usableFromInline
    final func start(root: KeyValueObservable?) {
        guard acquire() == .owner else { return }
        if let root {
            let registry = root._registryCreatingIfNeeded()
            let id = registry.makeID()
            // Held strongly (a weak reference would put every retain of the tracker on the slow
            // path): invalidation removes the handler, and the root's deallocation consumes it.
            if registry.onObjectDeinit(id: id, { self.rootDidDeinit() }) { rootDeinit = (registry, id) }
        }
        callStep(.initial)
        release()
    }
}

/// What a tracked observation evaluates and delivers, with its types: the expression, the handler,
/// the last result. Its `step` is inlined into a closure built in the client (the core calls it),
/// so it is specialised for the expression's types there.
@usableFromInline
final class _TrackedState<Root: AnyObject, Value>: @unchecked Sendable {
    // Invariant: `value` and `isPriorSent` are accessed only by `step`, which only the core's
    // owning thread calls; the rest is immutable.
    /// The root, not retained (see `_UnretainedReference`).
    @usableFromInline let rootReference: _UnretainedReference<Root>
    @usableFromInline let expression: @Sendable (Root) -> Value
    @usableFromInline let handler: @Sendable (Root, KeyValueObservedChange<Value>) -> Void
    @usableFromInline let isDuplicate: (@Sendable (Value, Value) -> Bool)?
    @usableFromInline let options: KeyValueObservingOptions
    @usableFromInline @exclusivity(unchecked) var value: Value?
    /// Whether a `.prior` notification was sent and its change not delivered yet: a batch sends
    /// `.prior` at the first change of each key, the observation once.
    @usableFromInline @exclusivity(unchecked) var isPriorSent = false

    @inlinable
    init(
        root: Root,
        options: KeyValueObservingOptions,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        expression: @escaping @Sendable (Root) -> Value,
        handler: @escaping @Sendable (Root, KeyValueObservedChange<Value>) -> Void
    ) {
        rootReference = _UnretainedReference(root)
        self.options = options
        self.isDuplicate = isDuplicate
        self.expression = expression
        self.handler = handler
    }

    /// The root, strongly, or `nil` once its deinitialisation began.
    @inlinable
    var root: Root? {
        rootReference.object
    }

    @inlinable
    func step(_ core: _TrackerCore, _ step: _TrackedStep) {
        guard let root else { return }
        if step == .prior {
            guard !isPriorSent, core.mayDeliver else { return }
            isPriorSent = true
            handler(root, KeyValueObservedChange(settingNew: nil, old: options.contains(.old) ? value : nil, isPrior: true))
            return
        }
        guard !core.isEvaluating else {
            // The expression changed one of its own inputs while it was evaluated: evaluated again
            // after this evaluation (`release`), not inside it.
            return core.evaluateAgainLater()
        }
        core.beginEvaluation(root: root)
        let new = expression(root)
        core.endEvaluation()
        let old = value
        value = new
        isPriorSent = false
        if step == .initial {
            core.checkFirstEvaluation(rootType: Root.self)
            if options.contains(.initial) {
                handler(root, KeyValueObservedChange(settingNew: options.contains(.new) ? new : nil, old: nil))
            }
            return
        }
        if let isDuplicate, let old, isDuplicate(old, new) { return }
        guard core.mayDeliver else { return }
        handler(root, KeyValueObservedChange(settingNew: options.contains(.new) ? new : nil, old: options.contains(.old) ? old : nil))
    }
}

/// The step function of a tracked observation (`_TrackedState.step`, specialised in the client),
/// in an object of its own that the core holds unmanaged.
@usableFromInline
final class _TrackedStepFunction {
    let call: (_TrackerCore, _TrackedStep) -> Void

    init(_ call: @escaping (_TrackerCore, _TrackedStep) -> Void) {
        self.call = call
    }
}

/// What the core asks `step` for.
@usableFromInline
enum _TrackedStep {
    /// The first evaluation (and `.initial`).
    case initial
    /// The notification before a change.
    case prior
    /// An evaluation after a change, and its delivery.
    case change
}

/// The free form's root: the expression captures what it reads.
@usableFromInline
final class _NoTrackingRoot: Sendable {
    @usableFromInline static let shared = _NoTrackingRoot()
}
