#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
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
class _TrackerCore: _Invalidatable, @unchecked Sendable {
    // Invariant: `owner` and `isActive` are atomics; `depth`, `inputs` and the subclass's value are
    // only accessed by the thread that holds `owner` (acquired with acquiring, released with
    // releasing ordering); `wantsPrior`, `fileID` and `line` are immutable.
    final let owner = Atomic<UInt>(0)
    final let isActive = Atomic<Bool>(true)
    final var depth = 0
    final var inputs: [_TrackedInput] = []
    final let wantsPrior: Bool
    final let fileID: String
    final let line: UInt
    /// The registration on the root that tells of its deallocation, if the observation has a root:
    /// set by `start` before anything else can reach the tracker, then never written.
    final var rootDeinit: (registry: _ObserverRegistry, id: UInt64)?
    private let hasReported = Atomic<Bool>(false)

    init(wantsPrior: Bool, fileID: String, line: UInt) {
        self.wantsPrior = wantsPrior
        self.fileID = fileID
        self.line = line
        _kvo_add_live_trackers(1)
    }

    deinit {
        _kvo_add_live_trackers(-1)
    }

    /// Evaluates and delivers a change (or, with `prior`, the notification before one). Called by
    /// the owning thread only; does nothing once the root is gone.
    func evaluateAndDeliver(prior: Bool) {}

    /// Tells why the observation goes quiet: its sequences finish.
    func didGoQuiet() {}

    /// This thread's token in `owner`: its `pthread_t`, an aligned address (bit 0 is free).
    @inline(__always)
    static var thisThread: UInt {
        pthread_self_token()
    }

    // MARK: Ownership

    enum Acquisition { case owner, nested, deferred, inactive }

    /// Takes the tracker for this thread, or tells the owner to evaluate again.
    @inline(__always)
    final func acquire() -> Acquisition {
        guard isActive.load(ordering: .relaxed) else { return .inactive }
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

    func invalidate() {
        guard isActive.exchange(false, ordering: .acquiringAndReleasing) else { return }
        if let rootDeinit { rootDeinit.registry.remove(id: rootDeinit.id) }
        // Free: take it for good (no one evaluates again) and remove the inputs. Owned: the owner
        // removes them when it lets the tracker go.
        let me = Self.thisThread
        var state = owner.load(ordering: .acquiring)
        while true {
            if state == 0 {
                let (exchanged, found) = owner.compareExchange(expected: 0, desired: me, ordering: .acquiring)
                if exchanged {
                    depth = 1
                    removeInputs()
                    owner.store(0, ordering: .releasing)
                    return
                }
                state = found
            } else {
                if state & ~1 != me {
                    let (exchanged, found) = owner.compareExchange(expected: state, desired: state | 1, ordering: .releasing)
                    if !exchanged {
                        state = found
                        continue
                    }
                }
                return
            }
        }
    }

    /// The root was deallocated: the observation goes quiet.
    final func rootDidDeinit() {
        invalidate()
        didGoQuiet()
    }

    /// Owner only, once the observation ended: removes every input's observer (outside any lock of
    /// the tracker) and releases the expression and the handler, with what they captured.
    final func removeInputs() {
        let removed = inputs
        inputs = []
        for input in removed { input.registry.remove(id: input.id) }
        releaseClosures()
    }

    /// Owner only: drops the expression and the handler (the observation ended).
    func releaseClosures() {}

    /// Reports, once, an evaluation that read nothing observable: it could never notify.
    final func reportReadNothing(objectType: Any.Type) {
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

@inline(__always)
private func pthread_self_token() -> UInt {
    #if canImport(Darwin)
    UInt(bitPattern: pthread_self())
    #else
    UInt(pthread_self())
    #endif
}

/// A tracked observation of `Value`, delivered to a handler that takes the root (`Root`; the free
/// form's root is a constant object of its own).
final class _Tracker<Root: AnyObject, Value>: _TrackerCore, @unchecked Sendable {
    // Invariant: see `_TrackerCore`; `value` and `recorder` are the owner's; `root` is a weak
    // reference, loaded atomically; the closures are `@Sendable` and immutable.
    private weak let root: Root?
    /// The owner's, like `value`: `nil` once the observation ended (invalidation releases them).
    private var expression: (@Sendable (Root) -> Value)?
    private var handler: (@Sendable (Root, KeyValueObservedChange<Value>) -> Void)?
    private let isDuplicate: (@Sendable (Value, Value) -> Bool)?
    private let options: KeyValueObservingOptions
    private var value: Value?
    /// Whether a `.prior` notification was sent and its change not delivered yet: a batch sends
    /// `.prior` at the first change of each key, the observation once.
    private var isPriorSent = false
    private lazy var recorder = _TrackingRecorder(tracker: self)
    /// Called once when the observation goes quiet because its root died (sequences finish). Set
    /// before `start`, then never written.
    var onQuiet: (@Sendable () -> Void)?

    init(
        root: Root,
        options: KeyValueObservingOptions,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        fileID: String,
        line: UInt,
        expression: @escaping @Sendable (Root) -> Value,
        handler: @escaping @Sendable (Root, KeyValueObservedChange<Value>) -> Void
    ) {
        self.root = root
        self.expression = expression
        self.handler = handler
        self.isDuplicate = isDuplicate
        self.options = options
        super.init(wantsPrior: options.contains(.prior), fileID: fileID, line: line)
    }

    /// The first evaluation, on the registering thread: observes what it reads, delivers `.initial`
    /// if asked, then whatever other threads changed meanwhile.
    func start(root: Root, isRooted: Bool) {
        guard acquire() == .owner else { return }
        if isRooted, let observable = root as? KeyValueObservable {
            let registry = observable._registryCreatingIfNeeded()
            let id = registry.makeID()
            if registry.onObjectDeinit(id: id, { [weak self] in self?.rootDidDeinit() }) { rootDeinit = (registry, id) }
        }
        guard let expression, let handler else { return release() }
        let first = evaluate(root, expression)
        value = first
        if inputs.isEmpty { reportReadNothing(objectType: Root.self) }
        if options.contains(.initial) {
            handler(root, KeyValueObservedChange(settingNew: options.contains(.new) ? first : nil, old: nil))
        }
        release()
    }

    private func evaluate(_ root: Root, _ expression: (Root) -> Value) -> Value {
        recorder.start(previous: inputs, root: root)
        let new = expression(root)
        let (found, removed) = recorder.finish()
        if let found { inputs = found }
        for input in removed { input.registry.remove(id: input.id) }
        return new
    }

    override func evaluateAndDeliver(prior: Bool) {
        guard let root, let expression, let handler else { return }
        if prior {
            guard !isPriorSent, isActive.load(ordering: .acquiring) else { return }
            isPriorSent = true
            handler(root, KeyValueObservedChange(settingNew: nil, old: options.contains(.old) ? value : nil, isPrior: true))
            return
        }
        guard !recorder.isRecording else {
            // The expression changed one of its own inputs while it was evaluated: evaluated again
            // after this evaluation (`release`), not inside it.
            owner.bitwiseOr(1, ordering: .releasing)
            return
        }
        let new = evaluate(root, expression)
        let old = value
        value = new
        isPriorSent = false
        if let isDuplicate, let old, isDuplicate(old, new) { return }
        guard isActive.load(ordering: .acquiring) else { return }
        handler(root, KeyValueObservedChange(settingNew: options.contains(.new) ? new : nil, old: options.contains(.old) ? old : nil))
    }

    override func releaseClosures() {
        expression = nil
        handler = nil
    }

    override func didGoQuiet() {
        onQuiet?()
    }
}

/// The free form's root: the expression captures what it reads.
final class _NoTrackingRoot: Sendable {
    static let shared = _NoTrackingRoot()
}
