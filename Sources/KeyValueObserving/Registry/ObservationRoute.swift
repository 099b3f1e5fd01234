/// How a registration is attached to the registry.
enum _ObservationRoute {
    /// An `@Observed` property of the object: values come from the setter.
    case direct(_SlotKey)
    /// Any other key: values are read through the observer's key path around changes of any of the
    /// slots (a dependent key has one slot per `@Observed` input), or of the properties along any of
    /// `paths` (inputs reached through other objects, `\.settings.username`, followed as they change).
    case throughKeyPath([_SlotKey], paths: [AnyKeyPath] = [])

    var slots: [_SlotKey] {
        switch self {
        case .direct(let slot): [slot]
        case .throughKeyPath(let slots, _): slots
        }
    }

    var paths: [AnyKeyPath] {
        switch self {
        case .direct: []
        case .throughKeyPath(_, let paths): paths
        }
    }

    /// Finds which `@Observed` property (if any) notifies observers of `keyPath`, by reading the value
    /// once while the `@Observed` getters of the object report what they are asked for, and reports a
    /// key that can never notify through `KeyValueObservingDiagnosticCenter`.
    ///
    /// The probe reads the property, like `.initial` does: register where reading it is safe.
    static func find<Root: KeyValueObservable, Value>(
        for keyPath: KeyPath<Root, Value>,
        of object: Root,
        in registry: _ObserverRegistry,
        fileID: String,
        line: UInt
    ) -> _ObservationRoute {
        if let known = _ObservedKeyCache.lookUp(keyPath, in: type(of: object)) {
            return .direct(.observedProperty(known.canonical, isZeroSized: known.isZeroSized))
        }
        if let explicit = (Root.self as? any _ExplicitlyNotifiedKeys.Type)?._explicitKey(for: keyPath) {
            // State the class keeps itself and notifies with explicit values: a resolved slot.
            registry.declareOffset(explicit.offset, for: explicit.key)
            return .direct(.observedProperty(explicit.key, isZeroSized: false))
        }
        let table = _DependencyTable.merged(for: type(of: object))
        if table[keyPath] != nil {
            return dependencyRoute(of: keyPath, in: table, object: object, fileID: fileID, line: line)
        }
        let reads = unique(registry.probe { _ = object[keyPath: keyPath] })
        if !reads.isEmpty, let inherited = equivalentKeys(of: keyPath, in: table, object: object, reads: reads).first {
            return dependencyRoute(of: inherited, in: table, object: object, fileID: fileID, line: line)
        }
        if reads.count == 1 {
            let read = reads[0]
            let slot = _SlotKey.observedProperty(read.key, isZeroSized: read.isZeroSized)
            if read.key === keyPath {
                // A uniqued key-path literal: remember it, so the next registration skips the probe.
                _ObservedKeyCache.insert(keyPath, in: type(of: object), isZeroSized: read.isZeroSized)
                return .direct(slot)
            }
            if read.key == keyPath {
                // Equal but not identical: a literal written at another site than the accessor's,
                // a generic class, whose key paths are not uniqued, or a key path built at run time.
                // Remembered with the accessor's object (the cache bounds how many such it keeps).
                _ObservedKeyCache.insert(keyPath, canonical: read.key, in: type(of: object), isZeroSized: read.isZeroSized)
                return .direct(slot)
            }
            if isInherited(read.key, by: keyPath) {
                // `\Subclass.property` for a property declared in a superclass is a different key-path
                // object from the accessor's `\Superclass.property`, and the runtime offers no way to
                // compare the two. A writable one is taken to be the inherited property itself (the
                // exception, documented, is a settable computed property of the subclass that reads
                // only that property, with its type). A read-only one may be the property seen from
                // outside a `private(set)`, or a computed property: reading through the observer's
                // own key path delivers the right values for both.
                return keyPath is ReferenceWritableKeyPath<Root, Value> ? .direct(slot) : .throughKeyPath([slot])
            }
        }
        if isPath(keyPath, reads: reads, object: object) {
            // `\.engine.rpm`: followed through the objects on the way, like a dependent key's input.
            let (name, end) = _DependencyPaths.describe(keyPath, from: object)
            if let name { _KeyNames.record(keyPath, name: name) }
            if let end, type(of: end).automaticallyNotifiesObservers(for: keyPath) {
                KeyValueObservingDiagnosticCenter.report(
                    KeyValueObservingDiagnostic(
                        kind: .unobservableKey,
                        objectType: type(of: object),
                        keyPath: keyPath,
                        detail: "the path reaches a \(type(of: end)), where it reads no @Observed property, so a change "
                            + "there never notifies its observers (only changes of the objects on the way do). Fix: "
                            + "declare the property @Observed in \(type(of: end)).",
                        fileID: fileID,
                        line: line
                    ))
            }
            return .throughKeyPath([.keyPath(keyPath)], paths: [keyPath])
        }
        // A key the class declares it notifies itself (`automaticallyNotifiesObservers(for:)` returns
        // false) is no mistake.
        if type(of: object).automaticallyNotifiesObservers(for: keyPath) {
            KeyValueObservingDiagnosticCenter.report(
                KeyValueObservingDiagnostic(
                    objectType: type(of: object),
                    keyPath: keyPath,
                    reads: reads.map { ($0.key, _KeyNames.name(of: $0.key)) },
                    fileID: fileID,
                    line: line
                ))
        }
        return .throughKeyPath([.keyPath(keyPath)])
    }

    /// Whether `keyPath` reaches into another observable object (`\.engine.rpm`, `\.engine?.rpm`, or
    /// through a constant child, `let engine`), given the `@Observed` properties of `object` that
    /// reading it read: then it is followed as a path.
    static func isPath<Root: KeyValueObservable>(
        _ keyPath: AnyKeyPath,
        reads: [_ObserverRegistry.ProbedRead],
        object: Root
    ) -> Bool {
        if reads.count == 1 {
            return !_sameKey(reads[0].key, keyPath) && reads[0].holdsObservableObject
        }
        return reads.isEmpty && _DependencyPaths.childRead(by: keyPath, from: object, in: object) != nil
    }

    /// What affects the dependent key `keyPath`: the slots of the `@Observed` properties its declared
    /// inputs read, expanding inputs that are dependent keys themselves, and the inputs reached through
    /// other objects (followed by `_DependencyPaths`). Every input that is not itself an `@Observed`
    /// property also contributes its own slot, for manual notification. A cycle is reported and cut.
    private static func dependencyRoute<Root: KeyValueObservable>(
        of keyPath: AnyKeyPath,
        in table: [AnyKeyPath: [AnyKeyPath]],
        object: Root,
        fileID: String,
        line: UInt
    ) -> _ObservationRoute {
        var slots: [_SlotKey] = []
        var paths: [AnyKeyPath] = []
        var pathFirstSteps: [AnyKeyPath] = []
        var expanded: [AnyKeyPath] = []
        func add(_ slot: _SlotKey) {
            if !slots.contains(where: { $0.isSame(as: slot) }) { slots.append(slot) }
        }
        func expand(_ key: AnyKeyPath, path: [AnyKeyPath]) {
            if let cycleStart = path.firstIndex(of: key) {
                KeyValueObservingDiagnosticCenter.report(
                    KeyValueObservingDiagnostic(
                        dependencyCycle: Array(path[cycleStart...]) + [key],
                        objectType: type(of: object),
                        fileID: fileID,
                        line: line
                    ))
                return
            }
            guard !expanded.contains(key) else { return }
            expanded.append(key)
            // An input of an unrelated class cannot be read from the object (`checkDeclaredInputs`
            // reports it).
            guard isRelated(type(of: key).rootType, type(of: object)) else { return }
            // A key declared with no inputs (`[\Car.label: []]`) has no dependencies, as in KVO:
            // only its own notifications reach its observers, not those of what its getter reads
            // (`checkDeclaredInputs` reports those reads).
            if let inputs = declaredInputs(of: key, in: table, object: object) {
                // A stored `@Observed` property that also has declared inputs notifies for its own
                // sets as well, as Foundation does for a KVO-compliant setter.
                let own = unique(registry(of: object).probe { _ = object[keyPath: key] })
                if own.count == 1, _sameKey(own[0].key, key) {
                    add(.observedProperty(own[0].key, isZeroSized: own[0].isZeroSized))
                }
                for input in inputs { expand(input, path: path + [key]) }
                if !path.isEmpty { add(.keyPath(key)) }
                return
            }
            let reads = unique(registry(of: object).probe { _ = object[keyPath: key] })
            if reads.count == 1, _sameKey(reads[0].key, key) {
                add(.observedProperty(reads[0].key, isZeroSized: reads[0].isZeroSized))
                return
            }
            add(.keyPath(key))
            if reads.count == 1 || (reads.isEmpty && _DependencyPaths.childRead(by: key, from: object, in: object) != nil) {
                // Through another object (`\.settings.username`, or a constant child).
                paths.append(key)
                pathFirstSteps.append(contentsOf: reads.map(\.key))
                return
            }
            if reads.isEmpty, type(of: object).automaticallyNotifiesObservers(for: key) {
                KeyValueObservingDiagnosticCenter.report(
                    KeyValueObservingDiagnostic(
                        objectType: type(of: object),
                        keyPath: key,
                        reads: [],
                        fileID: fileID,
                        line: line
                    ))
            }
            for read in reads {
                add(.observedProperty(read.key, isZeroSized: read.isZeroSized))
            }
        }
        expand(keyPath, path: [])
        checkDeclaredInputs(of: keyPath, in: table, object: object, fileID: fileID, line: line)
        // The dependent key's own slot too, so that `willChangeValue`/`didChangeValue(for:)` on it
        // reach its observers.
        add(.keyPath(keyPath))
        // A property that is also the first step of a path is followed (and notified) by the path.
        slots.removeAll { slot in
            if case .observedProperty(let key, _) = slot { return pathFirstSteps.contains { _sameKey($0, key) } }
            return false
        }
        return .throughKeyPath(slots, paths: paths)
    }

    /// Checks the table's entry for `keyPath` against what the key reads, once per class and key:
    /// an `@Observed` property that the key reads but that none of its declared inputs reads
    /// (transitively: reading an input reads what it is computed from) makes it stale when that
    /// property changes, whether it is the object's or one of another object the getter reaches (a
    /// child, `settings.username`, or an array's element); an input whose root type is unrelated to
    /// the key's can never be read from the object. Both are reported. Reads listed in
    /// `keyPathsNotAffecting` are deliberate.
    ///
    /// The probe sees the branch the getter takes now: an input read only on another branch is not
    /// caught.
    private static func checkDeclaredInputs<Root: KeyValueObservable>(
        of keyPath: AnyKeyPath,
        in table: [AnyKeyPath: [AnyKeyPath]],
        object: Root,
        fileID: String,
        line: UInt
    ) {
        let objectType = type(of: object)
        guard _CheckedDependencies.firstCheck(of: keyPath, in: objectType) else { return }
        let inputs = declaredInputs(of: keyPath, in: table, object: object) ?? []
        let keyRoot = type(of: keyPath).rootType
        for input in inputs where !isRelated(type(of: input).rootType, keyRoot) {
            KeyValueObservingDiagnosticCenter.report(
                KeyValueObservingDiagnostic(
                    kind: .invalidDependency,
                    objectType: objectType,
                    keyPath: keyPath,
                    detail: "keyPathsAffecting declares an input of `\(_KeyNames.name(of: keyPath))` whose root type, "
                        + "\(type(of: input).rootType), is unrelated to \(keyRoot): it is never read from a \(objectType) "
                        + "and its changes never notify. Fix: declare inputs as key paths of \(keyRoot) "
                        + "(\\\(keyRoot).<property>).",
                    fileID: fileID,
                    line: line
                ))
        }
        // Every object's reads: those of the observed object are checked against what its declared
        // inputs read there, the others (through a child object, an array's elements) against what
        // the inputs read on the same object.
        let keyProbe = _EveryObjectProbeRecorder.probe(from: object) { _ = object[keyPath: keyPath] }
        let keyReads = unique(keyProbe.filter { $0.object === object }.map(\.read))
        let readsElsewhere = unique(keyProbe.filter { $0.object !== object })
        guard !keyReads.isEmpty || !readsElsewhere.isEmpty else { return }
        var covered: [AnyKeyPath] = []
        var coveredElsewhere: [ObjectRead] = []
        for input in inputs where isRelated(type(of: input).rootType, keyRoot) {
            covered.append(input)
            let inputReads = _EveryObjectProbeRecorder.probe(from: object) { _ = object[keyPath: input] }
            covered.append(contentsOf: inputReads.filter { $0.object === object }.map(\.read.key))
            coveredElsewhere.append(contentsOf: inputReads.filter { $0.object !== object })
        }
        let deliberate = _DependencyTable.notAffecting(for: objectType)
        let excluded =
            (deliberate[keyPath] ?? []) + equivalentKeys(of: keyPath, in: deliberate, object: object).flatMap { deliberate[$0] ?? [] }
        let missing = keyReads.filter { read in
            !_sameKey(read.key, keyPath)
                && !covered.contains { _sameKey($0, read.key) }
                && !excluded.contains { _sameKey($0, read.key) || isInherited(read.key, by: $0) }
        }
        var missingElsewhere: [ObjectRead] = []
        if !readsElsewhere.isEmpty {
            // A deliberate omission through another object is its path (`\Car.engine.rpm`), or the
            // property itself (`\Wheel.pressure`, for the elements of an array).
            let excludedElsewhere = excluded.filter { isRelated(type(of: $0).rootType, keyRoot) }.flatMap { omission in
                _EveryObjectProbeRecorder.probe(from: object) { _ = object[keyPath: omission] }.filter { $0.object !== object }
            }
            let readByInputs = Set((coveredElsewhere + excludedElsewhere).map(ReadID.init))
            missingElsewhere = readsElsewhere.filter { reached in
                !readByInputs.contains(ReadID(reached))
                    && !excluded.contains { _sameKey($0, reached.read.key) || isInherited(reached.read.key, by: $0) }
            }
        }
        guard !missing.isEmpty || !missingElsewhere.isEmpty else { return }
        reportMissingInputs(
            of: keyPath, declared: inputs, missing: missing, missingElsewhere: missingElsewhere, keyReads: keyProbe,
            object: object, fileID: fileID, line: line)
    }

    /// Whether one of two types is the other or a subclass of it.
    private static func isRelated(_ a: Any.Type, _ b: Any.Type) -> Bool {
        guard a != b else { return true }
        guard let classA = a as? AnyClass, let classB = b as? AnyClass else { return false }
        func descends(_ sub: AnyClass, from base: AnyClass) -> Bool {
            var current: AnyClass? = sub
            while let candidate = current {
                if candidate == base { return true }
                current = _getSuperclass(candidate)
            }
            return false
        }
        return descends(classA, from: classB) || descends(classB, from: classA)
    }

    /// The declared inputs of `key`: its entry in the table, united with the entries of the same key
    /// declared at other levels of the class hierarchy (`equivalentKeys`); `nil` if it has none (an
    /// empty entry is a declaration: no inputs).
    private static func declaredInputs<Root: KeyValueObservable>(
        of key: AnyKeyPath,
        in table: [AnyKeyPath: [AnyKeyPath]],
        object: Root
    ) -> [AnyKeyPath]? {
        var inputs = table[key]
        for candidate in equivalentKeys(of: key, in: table, object: object) {
            var united = inputs ?? []
            for input in table[candidate] ?? [] where !united.contains(input) { united.append(input) }
            inputs = united
        }
        return inputs
    }

    /// The keys of the table that stand for `key` at other levels of the class hierarchy:
    /// `\Superclass.key` and `\Subclass.key` are different key paths the runtime cannot compare, so
    /// they are taken to be the same key when they have the same value type and read the same
    /// `@Observed` properties. (A different computed property with that type and those inputs would
    /// be served by the same dependencies, which are then the right ones for it too.)
    ///
    /// - Parameter knownReads: `key`'s reads, if the caller has probed them already.
    private static func equivalentKeys<Root: KeyValueObservable>(
        of key: AnyKeyPath,
        in table: [AnyKeyPath: [AnyKeyPath]],
        object: Root,
        reads knownReads: [_ObserverRegistry.ProbedRead]? = nil
    ) -> [AnyKeyPath] {
        var keyReads = knownReads
        var equivalents: [AnyKeyPath] = []
        for candidate in table.keys where candidate != key {
            guard isInherited(candidate, by: key) || isInherited(key, by: candidate) else { continue }
            if keyReads == nil {
                keyReads = unique(registry(of: object).probe { _ = object[keyPath: key] })
            }
            let candidateReads = unique(registry(of: object).probe { _ = object[keyPath: candidate] })
            if let keyReads, candidateReads.count == keyReads.count,
                zip(candidateReads, keyReads).allSatisfy({ _sameKey($0.key, $1.key) })
            {
                equivalents.append(candidate)
            }
        }
        return equivalents
    }

    /// The reads, keeping the first of those of the same object and key.
    static func unique(_ reads: [ObjectRead]) -> [ObjectRead] {
        var seen: Set<ReadID> = []
        return reads.filter { seen.insert(ReadID($0)).inserted }
    }

    static func unique(_ reads: [_ObserverRegistry.ProbedRead]) -> [_ObserverRegistry.ProbedRead] {
        var result: [_ObserverRegistry.ProbedRead] = []
        for read in reads where !result.contains(where: { _sameKey($0.key, read.key) }) {
            result.append(read)
        }
        return result
    }

    private static func registry(of object: KeyValueObservable) -> _ObserverRegistry {
        object._registryCreatingIfNeeded()
    }

    static func isInherited(_ read: AnyKeyPath, by keyPath: AnyKeyPath) -> Bool {
        guard type(of: read).valueType == type(of: keyPath).valueType,
            let declaring = type(of: read).rootType as? AnyClass,
            let observing = type(of: keyPath).rootType as? AnyClass,
            declaring != observing
        else { return false }
        var current: AnyClass? = _getSuperclass(observing)
        while let candidate = current {
            if candidate == declaring { return true }
            current = _getSuperclass(candidate)
        }
        return false
    }
}

/// The dependent keys whose declared inputs have been checked (`checkDeclaredInputs`), per class.
enum _CheckedDependencies {
    /// The keys checked, per class. Holds the key paths it identifies (the tables' own literals,
    /// alive for the life of the process anyway); classes live as long.
    private static let checked = Locked<[ObjectIdentifier: [AnyKeyPath]]>([:])

    /// `true` the first time it is asked for `key` in `type`.
    static func firstCheck(of key: AnyKeyPath, in type: AnyClass) -> Bool {
        checked.withLock { checked in
            let id = ObjectIdentifier(type)
            if checked[id, default: []].contains(where: { $0 === key }) { return false }
            checked[id, default: []].append(key)
            return true
        }
    }
}
