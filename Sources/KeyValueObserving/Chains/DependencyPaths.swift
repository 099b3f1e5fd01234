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
    // Invariant: `paths`, `entry` and `needsPrior` are immutable (key paths are immutable objects,
    // entries are thread-safe); `root` is never written after init (and is thread-safe, see
    // `_UnretainedReference`); `state` is only accessed with `lock` held, `pending` is a lock itself;
    // `isActive` is atomic.
    private let paths: [_FollowedPath]
    /// The registration's entry, told of the changes (`willChange`/`didChange` with the root).
    private let entry: _ObserverEntry
    /// Whether the entry wants `.prior` or old values: otherwise it does nothing before a change, so
    /// followers do not announce one and nothing is kept between the two announcements.
    private let needsPrior: Bool
    /// What the entry returned before each change, for the announcement after it; announcements nest
    /// per thread, like `willChangeValue`/`didChangeValue`.
    private let pending = Locked<[(thread: _ThreadID, old: Any?)]>([])
    /// Not retained, without a weak reference's side table (see `_UnretainedReference`).
    private let rootReference: _UnretainedReference<KeyValueObservable>
    private var root: KeyValueObservable? { rootReference.object }
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

    /// Follows `paths` from `root` and announces their changes to `entry`, a registration on `root`.
    ///
    /// - Parameter reading: The key path `entry` observes and what reads it from `root`, if the
    ///   entry reads one: a path among `paths` that is that key path is probed with it.
    init(
        root: KeyValueObservable,
        paths: [AnyKeyPath],
        announcingTo entry: _ObserverEntry,
        reading: (keyPath: AnyKeyPath, read: (KeyValueObservable) -> Void)?
    ) {
        rootReference = _UnretainedReference(root)
        let paths = paths.map { path in _FollowedPath(path, read: reading.flatMap { $0.keyPath === path ? $0.read : nil }) }
        self.paths = paths
        self.entry = entry
        needsPrior = !entry.options.isDisjoint(with: [.old, .prior])
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

    /// A followed property is about to change.
    fileprivate func willChange(valueHasChanged: Bool) {
        guard isActive.load(ordering: .acquiring), let root else { return }
        let old = entry.willChange(root, valueHasChanged: valueHasChanged)
        pending.withLock { $0.append((_ThreadID.current, old)) }
    }

    /// The property of `marker`'s follower on `object` has changed: re-targets the paths if that can
    /// change them, then tells the entry.
    ///
    /// - Parameter newObject: The object the property now holds, if the follower knows it (see
    ///   `steps(_:changedAt:of:newObject:path:root:)`).
    fileprivate func didChange(_ marker: _PathFollower.Marker, on object: AnyObject, newObject: KeyValueObservable?? = nil) {
        guard isActive.load(ordering: .acquiring), let root else { return }
        if marker.retargets.load(ordering: .acquiring) {
            retarget(after: marker, on: object, newObject: newObject, root: root)
            guard isActive.load(ordering: .acquiring) else { return }
        }
        if needsPrior {
            didChange(root, withPendingOf: _ThreadID.current)
        } else {
            // Borrowed: the strong reference `root` took (`_UnretainedReference.object`) holds it.
            Unmanaged.passUnretained(root)._withUnsafeGuaranteedRef { entry.didChange($0) }
        }
    }

    /// Tells the entry with what it returned before the change now announced on `thread`.
    @inline(never)
    private func didChange(_ root: KeyValueObservable, withPendingOf thread: _ThreadID) {
        let old = pending.withLock { stack in
            stack.lastIndex { $0.thread.isSame(as: thread) }.map { stack.remove(at: $0).old } ?? nil
        }
        entry.didChange(root, old: old)
    }

    /// Re-targets the paths after the property of `marker`'s follower on `object` changed.
    @inline(never)
    private func retarget(
        after marker: _PathFollower.Marker, on object: AnyObject, newObject: KeyValueObservable??, root: KeyValueObservable
    ) {
        // Only registries' objects notify, and they are all observable.
        let object = unsafeDowncast(object, to: KeyValueObservable.self)
        update { steps, followers in
            retargeted(steps, after: marker, on: object, newObject: newObject, followers: followers, root: root)
        }
    }

    /// The steps after the property of `marker`'s follower on `object` changed, or `nil` if no path's
    /// steps change.
    private func retargeted(
        _ steps: [[Step]],
        after marker: _PathFollower.Marker,
        on object: KeyValueObservable,
        newObject: KeyValueObservable??,
        followers: [_PathFollower],
        root: KeyValueObservable
    ) -> [[Step]]? {
        // An announcement of a follower that was just replaced changes nothing.
        guard let follower = followers.first(where: { $0.marker === marker }) else { return nil }
        var resolved = steps
        var isChanged = false
        for index in steps.indices {
            guard
                let position = steps[index].firstIndex(where: { step in
                    step.registry === follower.registry && step.reads.contains { _sameKey($0.key, follower.key) }
                }),
                let found = Self.steps(
                    steps[index], changedAt: position, of: object, newObject: newObject, path: paths[index], root: root)
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
        for (step, read, retargets) in Self.followed(by: steps) {
            if let follower = existing.first(where: { $0.registry === step.registry && _sameKey($0.key, read.key) }) {
                kept.append((follower, retargets))
            } else {
                added.append(follow(read, of: step, retargets: retargets))
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

    /// Observes `read` on the object of `step` for this registration, as the object's class would
    /// notify it.
    private func follow(_ read: _ObserverRegistry.ProbedRead, of step: Step, retargets: Bool) -> _PathFollower {
        let marker = _PathFollower.Marker(retargets: retargets)
        let id = step.registry.makeID()
        // Without `.prior` the follower is a direct observer of the property's type: then, with no
        // other kind of observer there, a set takes the plain delivery, the cheapest. With it, a
        // signal entry, told with `valueHasChanged` (a direct observer's prior notification is not).
        let entry =
            needsPrior
            ? _SignalObserver(id: id, announcingTo: self, marker: marker)
            : directFollower(of: read.valueType, id: id, marker: marker, announcesValue: read.holdsObservableObject)
        _ = step.registry.add(
            entry,
            for: .observedProperty(read.key, isZeroSized: read.isZeroSized),
            notifiesAutomatically: step.objectType.automaticallyNotifiesObservers(for: read.key)
        )
        return _PathFollower(
            registry: step.registry, key: read.key, marker: marker, token: KeyValueObservation(registry: step.registry, id: id))
    }

    /// A direct observer of a property of type `Value` that tells this resolver of its changes.
    ///
    /// - Parameter announcesValue: Whether the property holds the next object of a path: the
    ///   follower then asks for the new value and passes it on, so that re-targeting need not read it.
    private func directFollower<Value>(
        of _: Value.Type,
        id: UInt64,
        marker: _PathFollower.Marker,
        announcesValue: Bool
    ) -> _ObserverEntry {
        _DirectFollower<Value>(id: id, announcingTo: self, marker: marker, announcesValue: announcesValue)
    }

    /// Each step and property that `steps` read, once per object and property, and whether a change
    /// of it may change the steps after it (for any of the paths through it).
    private static func followed(by steps: [[Step]]) -> [(step: Step, read: _ObserverRegistry.ProbedRead, retargets: Bool)] {
        var followed: [(step: Step, read: _ObserverRegistry.ProbedRead, retargets: Bool)] = []
        for step in steps.joined() {
            for read in step.reads {
                let retargets = step.change != .none
                if let index = followed.firstIndex(where: { $0.step.registry === step.registry && _sameKey($0.read.key, read.key) }) {
                    followed[index].retargets = followed[index].retargets || retargets
                } else {
                    followed.append((step, read, retargets))
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

    /// The registry of the followed object (see `_DependencyPaths.Step`).
    let registry: _ObserverRegistry
    let key: AnyKeyPath
    let marker: Marker
    let token: KeyValueObservation

    init(registry: _ObserverRegistry, key: AnyKeyPath, marker: Marker, token: KeyValueObservation) {
        self.registry = registry
        self.key = key
        self.marker = marker
        self.token = token
    }
}

/// The observer a follower keeps on an object along a path: it only tells the resolver that the
/// property is about to change and has changed, and on which object.
final class _SignalObserver: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`); the resolver and the marker are
    // thread-safe.
    /// Held strongly (a weak reference would cost a weak load per change): the cycle through the
    /// resolver's followers ends when the follower is removed, which `invalidate()` does to all.
    private let resolver: _DependencyPaths
    private let marker: _PathFollower.Marker

    init(id: UInt64, announcingTo resolver: _DependencyPaths, marker: _PathFollower.Marker) {
        self.resolver = resolver
        self.marker = marker
        // `.prior`: the setter then calls `willChange` on it.
        super.init(id: id, options: [.prior], isDirect: false, isPathFollower: true)
    }

    override func willChange(_ object: AnyObject, valueHasChanged: Bool) -> Any? {
        if isActive { resolver.willChange(valueHasChanged: valueHasChanged) }
        return nil
    }

    override func didChange(_ object: AnyObject, old: Any?) {
        if isActive { resolver.didChange(marker, on: object) }
    }
}

/// The follower a path's registration that wants no `.prior` keeps on an object along the path: a
/// direct observer of the property's type, which ignores the value. With no other kind of observer
/// there, a set of the property takes the plain delivery, the cheapest.
final class _DirectFollower<Value>: _DirectObserver<Value>, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`); the resolver and the marker are
    // thread-safe.
    /// Held strongly, as `_SignalObserver` holds it.
    private let resolver: _DependencyPaths
    private let marker: _PathFollower.Marker

    /// - Parameter announcesValue: Whether the property holds an object (see
    ///   `_DependencyPaths.directFollower`): then the new value is asked for and passed on.
    init(id: UInt64, announcingTo resolver: _DependencyPaths, marker: _PathFollower.Marker, announcesValue: Bool) {
        self.resolver = resolver
        self.marker = marker
        super.init(id: id, options: announcesValue ? [.new] : [], rootType: nil, isPathFollower: true)
    }

    override func handler(_ object: AnyObject, _ change: KeyValueObservedChange<Value>) {
        if options.contains(.new) {
            didChange(object, to: change)
        } else {
            resolver.didChange(marker, on: object)
        }
    }

    /// Out of line: this is unspecialised generic code, and a value of type `Value` here costs
    /// run-time metadata look-ups, which the change of a value that is no object does not pay.
    @inline(never)
    private func didChange(_ object: AnyObject, to change: KeyValueObservedChange<Value>) {
        guard let newValue = change.newValue else { return resolver.didChange(marker, on: object) }
        resolver.didChange(marker, on: object, newObject: .some(newValue as? KeyValueObservable))
    }
}
