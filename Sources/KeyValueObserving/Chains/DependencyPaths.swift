import Synchronization

/// Follows key paths through other objects for one registration (`observe(\.engine.rpm)`, a chain
/// overload, or the inputs of a dependent key, `\AppState.settings.username`), and announces their
/// changes to it.
///
/// Swift key paths cannot be taken apart, so the properties along a path are found by reading the whole
/// path from the root while the registry of each object on the way records which of its `@Observed`
/// properties are read (a constant child, `let settings`, is found among the object's stored
/// properties): these are the path's *steps*. Every property read is observed by a follower, once
/// however many paths pass through it, so one change is one announcement.
///
/// When a followed property changes, only what it can change is looked at again: if it holds the next
/// object of a path and now holds another one, the steps from there on are found again (the old
/// objects' followers removed, so a replaced child is not retained, and a child that was nil is
/// followed once it is set); the steps before it, and every step after a change that leaves the next
/// object in place (the end of the path above all), keep their followers.
final class _DependencyPaths: _Invalidatable, @unchecked Sendable {
    // Invariant: `paths`, `needsPrior` and the callbacks are immutable (key paths are immutable
    // objects); `root` is never written after init (loading a weak reference is thread-safe);
    // `state` is only accessed with `lock` held; `isActive` is atomic.
    private let paths: [AnyKeyPath]
    private let needsPrior: Bool
    private let willChange: @Sendable (KeyValueObservable, _ valueHasChanged: Bool) -> Void
    private let didChange: @Sendable (KeyValueObservable) -> Void
    private weak let root: KeyValueObservable?
    private let lock = Lock()
    private var state: State
    private let isActive = Atomic<Bool>(true)

    /// The steps of every path and the followers observing them. `generation` counts the changes, so
    /// that steps found outside the lock are installed only over the state they were found from.
    struct State {
        var steps: [[Step]]
        var followers: [_PathFollower] = []
        var generation = 0
    }

    /// - Parameter needsPrior: Whether `willChange` must be called before each change (the
    ///   registration delivers `.prior` or old values); otherwise followers do not ask for it.
    init(
        root: KeyValueObservable,
        paths: [AnyKeyPath],
        needsPrior: Bool,
        willChange: @escaping @Sendable (KeyValueObservable, _ valueHasChanged: Bool) -> Void,
        didChange: @escaping @Sendable (KeyValueObservable) -> Void
    ) {
        self.root = root
        self.paths = paths
        self.needsPrior = needsPrior
        self.willChange = willChange
        self.didChange = didChange
        state = State(steps: paths.map { _ in [] })
        update { _, _ in paths.map { Self.steps(of: $0, from: root) } }
    }

    func invalidate() {
        guard isActive.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let old = lock.withLock { () -> [_PathFollower] in
            defer { state.followers = [] }
            return state.followers
        }
        old.forEach { $0.token.invalidate() }
    }

    /// A followed property is about to change (`isPrior`) or has changed.
    private func changed(_ marker: _PathFollower.Marker, isPrior: Bool, valueHasChanged: Bool) {
        guard isActive.load(ordering: .acquiring), let root else { return }
        if isPrior {
            willChange(root, valueHasChanged)
            return
        }
        if marker.retargets.load(ordering: .acquiring) {
            update { steps, followers in retargeted(steps, after: marker, followers: followers, root: root) }
            guard isActive.load(ordering: .acquiring) else { return }
        }
        didChange(root)
    }

    /// The steps after the property of `marker`'s follower changed, or `nil` if no path's steps change.
    private func retargeted(
        _ steps: [[Step]],
        after marker: _PathFollower.Marker,
        followers: [_PathFollower],
        root: KeyValueObservable
    ) -> [[Step]]? {
        // An announcement of a follower that was just replaced changes nothing.
        guard let follower = followers.first(where: { $0.marker === marker }), let object = follower.object else { return nil }
        var resolved = steps
        var isChanged = false
        for index in steps.indices {
            guard
                let position = steps[index].firstIndex(where: { step in
                    step.object === object && step.reads.contains { _sameKey($0.key, follower.key) }
                }),
                let found = Self.steps(steps[index], changedAt: position, path: paths[index], root: root)
            else { continue }
            resolved[index] = found
            isChanged = true
        }
        return isChanged ? resolved : nil
    }

    /// Finds steps with `resolve` (given the current steps and followers, outside the lock; `nil` when
    /// nothing changes), observes what they read, and installs them; again if another change was
    /// installed meanwhile.
    private func update(_ resolve: (_ steps: [[Step]], _ followers: [_PathFollower]) -> [[Step]]?) {
        while true {
            let (generation, steps, followers) = lock.withLock { (state.generation, state.steps, state.followers) }
            guard let resolved = resolve(steps, followers) else { return }
            if install(resolved, over: generation, replacing: followers) { return }
        }
    }

    /// Observes the properties `steps` read, keeping the followers of `existing` that still serve, and
    /// installs steps and followers if the state is still at `generation`. Returns `false` if it is not
    /// (the caller resolves again); followers no longer needed, or not installed, are removed.
    private func install(_ steps: [[Step]], over generation: Int, replacing existing: [_PathFollower]) -> Bool {
        var kept: [(follower: _PathFollower, retargets: Bool)] = []
        var added: [_PathFollower] = []
        for (object, read, retargets) in Self.followed(by: steps) {
            if let follower = existing.first(where: { $0.object === object && _sameKey($0.key, read.key) }) {
                kept.append((follower, retargets))
            } else {
                added.append(follow(read, on: object, retargets: retargets))
            }
        }
        let outcome = lock.withLock { () -> (released: [_PathFollower], isInstalled: Bool) in
            guard isActive.load(ordering: .acquiring) else { return (added, true) }
            guard state.generation == generation else { return (added, false) }
            let removed = state.followers.filter { old in !kept.contains { $0.follower === old } }
            for (follower, retargets) in kept { follower.marker.retargets.store(retargets, ordering: .releasing) }
            state = State(steps: steps, followers: kept.map(\.follower) + added, generation: generation &+ 1)
            return (removed, true)
        }
        outcome.released.forEach { $0.token.invalidate() }
        return outcome.isInstalled
    }

    /// Observes `read` on `object` for this registration, as the object's class would notify it.
    private func follow(_ read: _ObserverRegistry.ProbedRead, on object: KeyValueObservable, retargets: Bool) -> _PathFollower {
        let marker = _PathFollower.Marker(retargets: retargets)
        let registry = object._registryCreatingIfNeeded()
        let id = registry.makeID()
        let entry = _SignalObserver(id: id, announcesPrior: needsPrior) { [weak self] isPrior, valueHasChanged in
            self?.changed(marker, isPrior: isPrior, valueHasChanged: valueHasChanged)
        }
        _ = registry.add(
            entry,
            for: .observedProperty(read.key, isZeroSized: read.isZeroSized),
            notifiesAutomatically: type(of: object).automaticallyNotifiesObservers(for: read.key)
        )
        return _PathFollower(object: object, key: read.key, marker: marker, token: KeyValueObservation(registry: registry, id: id))
    }

    /// Each object and property that `steps` read, once, and whether a change of it may change the
    /// steps after it (for any of the paths through it).
    private static func followed(
        by steps: [[Step]]
    ) -> [(object: KeyValueObservable, read: _ObserverRegistry.ProbedRead, retargets: Bool)] {
        var followed: [(object: KeyValueObservable, read: _ObserverRegistry.ProbedRead, retargets: Bool)] = []
        for step in steps.joined() {
            guard let object = step.object else { continue }
            for read in step.reads {
                let retargets = step.change != .none
                if let index = followed.firstIndex(where: { $0.object === object && _sameKey($0.read.key, read.key) }) {
                    followed[index].retargets = followed[index].retargets || retargets
                } else {
                    followed.append((object, read, retargets))
                }
            }
        }
        return followed
    }
}

/// One followed property of one object along a registration's paths: its observer there, and the
/// marker its announcements carry. Not `Sendable`: followers are kept in a resolver's state, under
/// its lock, and used outside it only by the thread that took them out.
final class _PathFollower {
    /// Identifies the follower in its announcements, and says whether they make the resolver look
    /// at the steps after it.
    final class Marker: Sendable {
        let retargets: Atomic<Bool>

        init(retargets: Bool) {
            self.retargets = Atomic(retargets)
        }
    }

    // Not retained: a replaced object is released while its follower is being removed.
    weak let object: KeyValueObservable?
    let key: AnyKeyPath
    let marker: Marker
    let token: KeyValueObservation

    init(object: KeyValueObservable, key: AnyKeyPath, marker: Marker, token: KeyValueObservation) {
        self.object = object
        self.key = key
        self.marker = marker
        self.token = token
    }
}

/// An observer that only learns that a property is about to change and has changed.
final class _SignalObserver: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`).
    let handler: @Sendable (_ isPrior: Bool, _ valueHasChanged: Bool) -> Void

    /// - Parameter announcesPrior: Whether `handler` is also called before the change; without it
    ///   the setter skips the work before the store.
    init(id: UInt64, announcesPrior: Bool, handler: @escaping @Sendable (_ isPrior: Bool, _ valueHasChanged: Bool) -> Void) {
        self.handler = handler
        // `.prior`: the setter then calls `willChange` on it.
        super.init(id: id, options: announcesPrior ? [.prior] : [], isDirect: false)
    }

    override func willChange(_ object: AnyObject, valueHasChanged: Bool) -> Any? {
        if isActive { handler(true, valueHasChanged) }
        return nil
    }

    override func didChange(_ object: AnyObject, old: Any?) {
        if isActive { handler(false, false) }
    }
}
