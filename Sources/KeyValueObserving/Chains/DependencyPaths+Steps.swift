// Walking a key path from its root: the objects it passes through and the `@Observed` properties it
// reads on each.

extension _DependencyPaths {
    /// One object along a path and the `@Observed` properties of it that reading the path reads
    /// (none for a constant child).
    ///
    /// The object is not kept: it is known by its registry, which no other object shares and which
    /// outlives it (an identifier could be reused by an object allocated after it is gone), and a
    /// weak reference would make every retain of it take the slow path.
    struct Step {
        /// What a change of one of `reads` can change in the steps after this one.
        enum Change {
            /// Nothing: the one property read is a value, read as the path's end.
            case none
            /// The next object: the one property read holds it.
            case nextObject
            /// This step's reads themselves: there are several, or the one read is not the path's
            /// value (a computed end, whose getter may read other properties after the change).
            case reads
        }

        let registry: _ObserverRegistry
        /// The object's class, which says whether it notifies a property automatically.
        let objectType: KeyValueObservable.Type
        let reads: [_ObserverRegistry.ProbedRead]
        let change: Change

        /// Whether `other` is the same object with the same reads.
        func isSame(as other: Step) -> Bool {
            registry === other.registry && reads.count == other.reads.count
                && zip(reads, other.reads).allSatisfy { _sameKey($0.key, $1.key) }
        }
    }

    /// How deep a path is followed (a guard against reference cycles between objects).
    static let maximumDepth = 16

    /// The objects that reading `path` from `root` passes through, from `start` (the object at
    /// `depth`, the root by default) on, each with its step: the `@Observed` properties of it that
    /// the read reads, in order.
    static func walk(
        _ path: _FollowedPath,
        from root: KeyValueObservable,
        startingAt start: KeyValueObservable? = nil,
        depth: Int = 0
    ) -> [(object: KeyValueObservable, step: Step)] {
        var steps: [(object: KeyValueObservable, step: Step)] = []
        var current: KeyValueObservable? = start ?? root
        let valueType = _unwrapped(type(of: path.keyPath).valueType)
        while let object = current, depth + steps.count < maximumDepth {
            let registry = object._registryCreatingIfNeeded()
            let reads = _ObservationRoute.unique(registry.probe { path.read(root) })
            let change: Step.Change
            if reads.count == 1, reads[0].holdsObservableObject {
                current = object[keyPath: reads[0].key] as? KeyValueObservable
                change = .nextObject
            } else if reads.count == 1, _unwrapped(reads[0].valueType) == valueType {
                // The path's value: the end.
                current = nil
                change = .none
            } else if reads.count == 1 {
                // A computed end, or an intermediate held as an existential (`any Item`).
                current = object[keyPath: reads[0].key] as? KeyValueObservable
                change = .reads
            } else if reads.isEmpty {
                current = childRead(by: path, from: root, in: object)
                change = .none
            } else {
                current = nil
                change = .reads
            }
            steps.append((object, Step(registry: registry, objectType: type(of: object), reads: reads, change: change)))
        }
        return steps
    }

    /// The steps of `path` from `root` (see `walk`).
    static func steps(of path: _FollowedPath, from root: KeyValueObservable) -> [Step] {
        walk(path, from: root).map(\.step)
    }

    /// The steps of `path` after the property `object` read at `steps[position]` changed, or `nil`
    /// if they stay the same. Probes only from the step that may have changed on.
    ///
    /// - Parameter newObject: The object the property now holds, if the caller knows it (`nil` when
    ///   it does not; `.some(nil)` when the property holds none).
    static func steps(
        _ steps: [Step],
        changedAt position: Int,
        of object: KeyValueObservable,
        newObject: KeyValueObservable?? = nil,
        path: _FollowedPath,
        root: KeyValueObservable
    ) -> [Step]? {
        let step = steps[position]
        let tail: [Step]
        switch step.change {
        case .none:
            return nil
        case .nextObject:
            let next = newObject ?? (object[keyPath: step.reads[0].key] as? KeyValueObservable)
            let following = position + 1 < steps.count ? steps[position + 1].registry : nil
            guard next.map({ $0._registryCreatingIfNeeded() }) !== following else { return nil }
            tail = [step] + (next.map { walk(path, from: root, startingAt: $0, depth: position + 1).map(\.step) } ?? [])
        case .reads:
            tail = walk(path, from: root, startingAt: object, depth: position).map(\.step)
        }
        let old = steps[position...]
        if tail.count == old.count, zip(tail, old).allSatisfy({ $0.isSame(as: $1) }) { return nil }
        return Array(steps[..<position]) + tail
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
        let path = _FollowedPath(path)
        for (index, (object, step)) in walk(path, from: root).enumerated() {
            guard !step.reads.isEmpty else {
                // A constant child, or the end of what can be observed.
                guard let child = childRead(by: path, from: root, in: object) else {
                    return (nil, index > 0 ? object : nil)
                }
                if let name = fieldName(of: child, in: object) { names.append(name) } else { isNameable = false }
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

    /// The observable object stored in `object` (a constant child, which no `@Observed` read reveals)
    /// whose properties reading `path` from `root` reads, if any.
    static func childRead(by path: AnyKeyPath, from root: KeyValueObservable, in object: KeyValueObservable) -> KeyValueObservable? {
        childRead(by: _FollowedPath(path), from: root, in: object)
    }

    static func childRead(by path: _FollowedPath, from root: KeyValueObservable, in object: KeyValueObservable) -> KeyValueObservable? {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            for child in current.children {
                guard let candidate = child.value as? KeyValueObservable, candidate !== object else { continue }
                if !candidate._registryCreatingIfNeeded().probe({ path.read(root) }).isEmpty {
                    return candidate
                }
            }
            mirror = current.superclassMirror
        }
        return nil
    }
}

/// A key path that a resolver follows from its root, and what reads it there: probes read it while
/// the registries on the way record what is read. A registration that observes the path itself
/// passes its reader, specialised into direct getter calls where the key path is a literal (see
/// `_reader`); others apply the key path at run time.
struct _FollowedPath {
    let keyPath: AnyKeyPath
    let read: (KeyValueObservable) -> Void

    init(_ keyPath: AnyKeyPath, read: ((KeyValueObservable) -> Void)? = nil) {
        self.keyPath = keyPath
        self.read = read ?? { _ = $0[keyPath: keyPath] }
    }
}

/// `type` without its layers of `Optional`.
func _unwrapped(_ type: Any.Type) -> Any.Type {
    var type = type
    while let wrapped = (type as? any _OptionalType.Type)?._wrappedType { type = wrapped }
    return type
}
