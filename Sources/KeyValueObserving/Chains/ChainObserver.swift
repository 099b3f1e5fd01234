import Synchronization

/// One step of a key-path chain, with its types erased: how to observe the step's key on an object of
/// the step's root type, and how to read the next object of the chain from it.
@usableFromInline
struct _ChainSegment: Sendable {
    /// Observes the key on `object`, calling `handler(isPrior)` for every change (and before it, if
    /// `prior` is true).
    let observe: @Sendable (AnyObject, _ prior: Bool, @escaping @Sendable (Bool) -> Void) -> KeyValueObservation
    /// The next object of the chain (`nil` for a nil intermediate, and for the last step).
    let next: @Sendable (AnyObject) -> AnyObject?

    @usableFromInline
    init(
        observe: @escaping @Sendable (AnyObject, Bool, @escaping @Sendable (Bool) -> Void) -> KeyValueObservation,
        next: @escaping @Sendable (AnyObject) -> AnyObject?
    ) {
        self.observe = observe
        self.next = next
    }

    /// A step through `keyPath`, whose value is the next object (or the final value, for the last
    /// step: pass `next: { _ in nil }`).
    @inlinable
    static func step<Root: KeyValueObservable, Value>(
        _ keyPath: KeyPath<Root, Value>,
        fileID: String,
        line: UInt,
        next: @escaping @Sendable (Value) -> AnyObject?
    ) -> _ChainSegment {
        // Key paths are immutable: sharing this one with the closures below is safe.
        nonisolated(unsafe) let keyPath = keyPath
        return _ChainSegment(
            observe: { object, prior, handler in
                unsafeDowncast(object, to: Root.self).observe(keyPath, options: prior ? [.prior] : [], fileID: fileID, line: line) { _, change in
                    handler(change.isPrior)
                }
            },
            next: { object in next(unsafeDowncast(object, to: Root.self)[keyPath: keyPath]) }
        )
    }
}

/// An observer that only learns that a property is about to change and has changed.
final class _SignalObserver: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`).
    let handler: @Sendable (_ isPrior: Bool, _ valueHasChanged: Bool) -> Void

    init(id: UInt64, handler: @escaping @Sendable (_ isPrior: Bool, _ valueHasChanged: Bool) -> Void) {
        self.handler = handler
        // `.prior`: the setter then calls `willChange` on it.
        super.init(id: id, options: [.prior], isDirect: false)
    }

    override func willChange(_ object: AnyObject, valueHasChanged: Bool) -> Any? {
        if isActive { handler(true, valueHasChanged) }
        return nil
    }

    override func didChange(_ object: AnyObject, old: Any?) {
        if isActive { handler(false, false) }
    }
}

/// Observes `root.s₀.s₁…sₙ₋₁` through observable intermediates: segment *i* is observed on the object
/// at level *i*, and when an intermediate is replaced (or becomes nil) the levels after it are
/// re-targeted to the new object, so the old one is no longer reported (nor retained: every level
/// is held weakly).
///
/// Every change of any segment calls `willChange` (before) and `didChange` (after) with the root, on
/// the changing thread. No lock is held while observers are registered or removed, or while the
/// callbacks run; the chain's lock only guards the swap of its levels.
@usableFromInline
final class _ChainObserver: _Invalidatable, @unchecked Sendable {
    // Invariant: `segments`, `wantsPrior` and the callbacks are immutable; `levels` and `root` are
    // only accessed with `lock` held; `isActive` is atomic.
    private let segments: [_ChainSegment]
    private let wantsPrior: Bool
    private let willChange: @Sendable (AnyObject) -> Void
    private let didChange: @Sendable (AnyObject) -> Void
    private let lock = Lock()
    private weak var root: AnyObject?
    private var levels: [Level] = []
    private let isActive = Atomic<Bool>(true)

    private struct Level {
        weak var object: AnyObject?
        let token: KeyValueObservation
    }

    /// - Parameter wantsPrior: Whether `willChange` is needed; without it, segments are observed
    ///   without `.prior`, which halves the work per change.
    @usableFromInline
    init(
        root: AnyObject,
        segments: [_ChainSegment],
        wantsPrior: Bool = true,
        willChange: @escaping @Sendable (AnyObject) -> Void,
        didChange: @escaping @Sendable (AnyObject) -> Void
    ) {
        self.root = root
        self.segments = segments
        self.wantsPrior = wantsPrior
        self.willChange = willChange
        self.didChange = didChange
        retarget(from: 0, startingAt: root)
    }

    /// Stops observing. After it returns, no callback starts.
    @usableFromInline
    func invalidate() {
        guard isActive.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let old = lock.withLock { () -> [Level] in
            defer { levels = [] }
            return levels
        }
        for level in old { level.token.invalidate() }
    }

    /// Observes segments `level…` starting from `object` (the object at `level`), replacing what was
    /// observed there before.
    private func retarget(from level: Int, startingAt object: AnyObject?) {
        var fresh: [Level] = []
        var current = object
        for index in level..<segments.count {
            guard let observed = current else { break }
            let token = segments[index].observe(observed, wantsPrior) { [weak self] isPrior in
                self?.segmentChanged(at: index, isPrior: isPrior)
            }
            fresh.append(Level(object: observed, token: token))
            current = index + 1 < segments.count ? segments[index].next(observed) : nil
        }
        let replaced = lock.withLock { () -> [Level] in
            let replaced = Array(levels.dropFirst(level))
            levels = Array(levels.prefix(level)) + fresh
            return replaced
        }
        for old in replaced { old.token.invalidate() }
        if !isActive.load(ordering: .acquiring) {
            // Invalidated meanwhile: do not leave the fresh observers behind.
            for new in fresh { new.token.invalidate() }
        }
    }

    private func segmentChanged(at index: Int, isPrior: Bool) {
        guard isActive.load(ordering: .acquiring), let root = lock.withLock({ root }) else { return }
        if isPrior {
            willChange(root)
            return
        }
        if index + 1 < segments.count {
            let object = lock.withLock { index < levels.count ? levels[index].object : nil }
            retarget(from: index + 1, startingAt: object.flatMap(segments[index].next))
        }
        guard isActive.load(ordering: .acquiring) else { return }
        didChange(root)
    }
}
