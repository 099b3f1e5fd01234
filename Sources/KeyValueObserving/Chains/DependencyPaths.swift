import Synchronization

/// Follows the inputs of a dependent key that reach through other objects (`\AppState.settings.username`)
/// for one registration, and announces their changes to it.
///
/// Swift key paths cannot be taken apart, so the properties along a path are found by reading the whole
/// path from the root while the registry of each object on the way records which of its `@Observed`
/// properties are read (a constant child, `let settings`, is found among the object's stored
/// properties). Every such property is observed; when one changes, the paths are resolved again, so a
/// replaced child is followed (and the old one forgotten, not retained), and a child that was nil
/// becomes observed once it is set. Each property is observed once, however many paths pass through
/// it, so one change is one announcement.
final class _DependencyPaths: _Invalidatable, @unchecked Sendable {
    // Invariant: `paths` and the callbacks are immutable (key paths are immutable objects); `root` and
    // `tokens` are only accessed with `lock` held; `isActive` is atomic.
    private let paths: [AnyKeyPath]
    private let willChange: @Sendable (KeyValueObservable, _ valueHasChanged: Bool) -> Void
    private let didChange: @Sendable (KeyValueObservable) -> Void
    private let lock = Lock()
    private weak var root: KeyValueObservable?
    private var tokens: [KeyValueObservation] = []
    private let isActive = Atomic<Bool>(true)

    /// How deep a path is followed (a guard against reference cycles between objects).
    private static let maximumDepth = 16

    init(
        root: KeyValueObservable,
        paths: [AnyKeyPath],
        willChange: @escaping @Sendable (KeyValueObservable, _ valueHasChanged: Bool) -> Void,
        didChange: @escaping @Sendable (KeyValueObservable) -> Void
    ) {
        self.root = root
        self.paths = paths
        self.willChange = willChange
        self.didChange = didChange
        resolve()
    }

    func invalidate() {
        guard isActive.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let old = lock.withLock { () -> [KeyValueObservation] in
            defer { tokens = [] }
            return tokens
        }
        old.forEach { $0.invalidate() }
    }

    /// Finds the properties along the paths from the current objects and observes them, replacing
    /// what was observed before.
    private func resolve() {
        guard let root = lock.withLock({ root }) else { return }
        var observed: [(object: KeyValueObservable, read: _ObserverRegistry.ProbedRead)] = []
        func note(_ object: KeyValueObservable, _ read: _ObserverRegistry.ProbedRead) {
            if !observed.contains(where: { $0.object === object && _sameKey($0.read.key, read.key) }) {
                observed.append((object, read))
            }
        }
        for path in paths {
            for (object, reads) in Self.steps(of: path, from: root) {
                reads.forEach { note(object, $0) }
            }
        }
        let fresh = observed.map { object, read in
            Self.signal(on: object, read: read) { [weak self] isPrior, valueHasChanged in
                self?.changed(isPrior: isPrior, valueHasChanged: valueHasChanged)
            }
        }
        let replaced = lock.withLock { () -> [KeyValueObservation] in
            defer { tokens = fresh }
            return tokens
        }
        replaced.forEach { $0.invalidate() }
        if !isActive.load(ordering: .acquiring) {
            fresh.forEach { $0.invalidate() }
        }
    }

    /// The objects that reading `path` from `root` passes through, each with the `@Observed`
    /// properties of it that the read reads (empty for a constant child), in order.
    static func steps(
        of path: AnyKeyPath,
        from root: KeyValueObservable
    ) -> [(object: KeyValueObservable, reads: [_ObserverRegistry.ProbedRead])] {
        var steps: [(object: KeyValueObservable, reads: [_ObserverRegistry.ProbedRead])] = []
        var current: KeyValueObservable? = root
        while let object = current, steps.count < maximumDepth {
            let reads = _ObservationRoute.unique(object._registryCreatingIfNeeded().probe { _ = root[keyPath: path] })
            steps.append((object, reads))
            if reads.count == 1 {
                current = object[keyPath: reads[0].key] as? KeyValueObservable
            } else if reads.isEmpty {
                current = childRead(by: path, from: root, in: object)
            } else {
                current = nil
            }
        }
        return steps
    }

    /// What a registration learns from one walk along the path `path` of `root`: its name after its
    /// steps (`"engine.rpm"`), if every step is one `@Observed` property (or a constant child) and it
    /// ends on a value, not an object; and the object past the root where it ends without reading any
    /// `@Observed` property (`\.engine.rpm` with a plain `var rpm`), whose last segment can never notify.
    static func describe(
        _ path: AnyKeyPath,
        from root: KeyValueObservable
    ) -> (name: String?, unobservableEnd: KeyValueObservable?) {
        var names: [String] = []
        var isNameable = true
        var endsOnValue = false
        for (index, step) in steps(of: path, from: root).enumerated() {
            guard !step.reads.isEmpty else {
                // A constant child, or the end of what can be observed.
                guard let child = childRead(by: path, from: root, in: step.object) else {
                    return (nil, index > 0 ? step.object : nil)
                }
                if let name = fieldName(of: child, in: step.object) { names.append(name) } else { isNameable = false }
                continue
            }
            isNameable = isNameable && step.reads.count == 1
            names.append(_KeyNames.name(of: step.reads[0].key))
            endsOnValue = !step.reads[0].holdsObservableObject
        }
        return (isNameable && endsOnValue ? names.joined(separator: ".") : nil, nil)
    }

    /// The label of the stored property of `object` that holds `child`.
    private static func fieldName(of child: KeyValueObservable, in object: KeyValueObservable) -> String? {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            if let label = current.children.first(where: { ($0.value as? KeyValueObservable) === child })?.label {
                return label.hasPrefix("_") ? String(label.dropFirst()) : label
            }
            mirror = current.superclassMirror
        }
        return nil
    }

    private func changed(isPrior: Bool, valueHasChanged: Bool) {
        guard isActive.load(ordering: .acquiring), let root = lock.withLock({ root }) else { return }
        if isPrior {
            willChange(root, valueHasChanged)
        } else {
            resolve()
            guard isActive.load(ordering: .acquiring) else { return }
            didChange(root)
        }
    }

    /// The observable object stored in `object` (a constant child, which no `@Observed` read reveals)
    /// whose properties reading `path` from `root` reads, if any.
    static func childRead<Root: KeyValueObservable>(
        by path: AnyKeyPath,
        from root: Root,
        in object: KeyValueObservable
    ) -> KeyValueObservable? {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            for child in current.children {
                guard let candidate = child.value as? KeyValueObservable, candidate !== object else { continue }
                if !candidate._registryCreatingIfNeeded().probe({ _ = root[keyPath: path] }).isEmpty {
                    return candidate
                }
            }
            mirror = current.superclassMirror
        }
        return nil
    }

    /// Observes `read` on `object` for `handler(isPrior)`, as the object's class would notify it.
    private static func signal(
        on object: KeyValueObservable,
        read: _ObserverRegistry.ProbedRead,
        handler: @escaping @Sendable (_ isPrior: Bool, _ valueHasChanged: Bool) -> Void
    ) -> KeyValueObservation {
        let automatic = type(of: object).automaticallyNotifiesObservers(for: read.key)
        let registry = object._registryCreatingIfNeeded()
        let id = registry.makeID()
        _ = registry.add(
            _SignalObserver(id: id, handler: handler),
            for: .observedProperty(read.key, isZeroSized: read.isZeroSized),
            notifiesAutomatically: automatic
        )
        return KeyValueObservation(registry: registry, id: id)
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
