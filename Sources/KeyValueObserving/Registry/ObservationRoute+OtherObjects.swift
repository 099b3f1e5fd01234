// The dependency check's reads of other objects than the observed one: a dependent key's getter
// may read a child's property (`settings.username`), a child's child's, a constant child's, or the
// elements' of an array (`people.map(\.name)`). A read no declared input makes is reported with
// the path to declare, or, where no key path can name it (an array's elements), with tracked
// observation as the fix.

extension _ObservationRoute {
    /// An `@Observed` read and the object read.
    typealias ObjectRead = (object: KeyValueObservable, read: _ObserverRegistry.ProbedRead)

    /// A read's object and key, to find reads of the same property of the same object (`_sameKey`
    /// is key-path equality) by hashing: an array's elements may be many. Valid while the reads
    /// keep their objects alive.
    struct ReadID: Hashable {
        let object: ObjectIdentifier
        let key: AnyKeyPath

        init(_ read: ObjectRead) {
            object = ObjectIdentifier(read.object)
            key = read.read.key
        }
    }

    /// How a dependent key's getter reached an object other than the observed one.
    enum Reach {
        /// Through properties, from the observed object: `name` is the path to the object
        /// (`settings`, `settings.profile`, `engine?`), `keyPath` that path where it can be made
        /// one (not through a constant child, nor an optional).
        case path(name: String, keyPath: AnyKeyPath?)
        /// Through an element of the collection at the path `collection` (`people`).
        case element(of: String)
    }

    /// How the getter reached each object that `reads` (what reading it read, in order) read: along
    /// the `@Observed` properties it read, from the observed object on, into the elements of the
    /// collections they hold, and into the constant children of the objects on the way. An object
    /// reached otherwise (a global, a plain `var` holding it) is not in the result.
    static func reaches(from root: KeyValueObservable, through reads: [ObjectRead]) -> [ObjectIdentifier: Reach] {
        var reaches: [ObjectIdentifier: Reach] = [:]
        var scanned: Set<ObjectIdentifier> = []
        func reach(of object: KeyValueObservable) -> Reach? {
            object === root ? .path(name: "", keyPath: nil) : reaches[ObjectIdentifier(object)]
        }
        func note(_ object: KeyValueObservable, _ how: Reach) -> Bool {
            let id = ObjectIdentifier(object)
            guard object !== root, reaches[id] == nil else { return false }
            reaches[id] = how
            return true
        }
        // A read may come before the read that reached its object (the getter kept the object in a
        // local first), so the reads are gone through again while that finds more, as deep as a
        // path is followed.
        for _ in 0..<_DependencyPaths.maximumDepth {
            var grew = false
            for (object, read) in reads {
                guard let from = reach(of: object) else { continue }
                let value = object[keyPath: read.key]
                let child = value as? KeyValueObservable
                let elements = child == nil ? _observableElements(of: value) : []
                switch from {
                case .path(let prefix, let prefixKey):
                    let isOptional = _unwrapped(read.valueType) != read.valueType
                    let step = _KeyNames.name(of: read.key) + (isOptional ? "?" : "")
                    let path = prefix.isEmpty ? step : "\(prefix).\(step)"
                    if let child {
                        let keyPath = prefix.isEmpty ? read.key : prefixKey?.appending(path: read.key)
                        grew = note(child, .path(name: path, keyPath: keyPath)) || grew
                    }
                    for element in elements { grew = note(element, .element(of: path)) || grew }
                case .element(let collection):
                    for reached in (child.map { [$0] } ?? []) + elements {
                        grew = note(reached, .element(of: collection)) || grew
                    }
                }
            }
            for object in [root] + reads.map(\.object) where !scanned.contains(ObjectIdentifier(object)) {
                guard case .path(let prefix, _) = reach(of: object) else { continue }
                scanned.insert(ObjectIdentifier(object))
                for (field, child) in constantChildren(of: object) {
                    let path = prefix.isEmpty ? field : "\(prefix).\(field)"
                    grew = note(child, .path(name: path, keyPath: nil)) || grew
                }
            }
            if !grew { break }
        }
        return reaches
    }

    /// The observable objects that `object` holds in stored properties (constant children, which no
    /// `@Observed` read reveals), with the properties' names.
    private static func constantChildren(of object: KeyValueObservable) -> [(String, KeyValueObservable)] {
        var children: [(String, KeyValueObservable)] = []
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            for case (let label?, let child as KeyValueObservable) in current.children where child !== object {
                children.append((label.hasPrefix("_") ? String(label.dropFirst()) : label, child))
            }
            mirror = current.superclassMirror
        }
        return children
    }

    /// Reports what a dependent key reads that its declared inputs do not: `missing` of the observed
    /// object and `missingElsewhere` of other objects, found among `keyReads` (all it read, in order).
    /// A read through child objects is reported with the path to declare (`\.settings.username`),
    /// which then stands for its steps too, as a path input notifies when a step changes; one
    /// through the elements of a collection, or through an object reached another way, with
    /// tracked observation, which follows the objects an expression reads, as the fix.
    static func reportMissingInputs<Root: KeyValueObservable>(
        of keyPath: AnyKeyPath,
        declared inputs: [AnyKeyPath],
        missing own: [_ObserverRegistry.ProbedRead],
        missingElsewhere: [ObjectRead],
        keyReads: [ObjectRead],
        object: Root,
        fileID: String,
        line: UInt
    ) {
        let reaches = missingElsewhere.isEmpty ? [:] : reaches(from: object, through: unique(keyReads))
        var paths: [(key: AnyKeyPath, name: String)] = own.map { ($0.key, _KeyNames.name(of: $0.key)) }
        var untracked: [(key: AnyKeyPath, name: String, collection: String?)] = []
        // Reported once per path, and once per property of a collection's elements.
        for (reached, read) in missingElsewhere {
            let name = _KeyNames.name(of: read.key)
            switch reaches[ObjectIdentifier(reached)] {
            case .path(let prefix, let prefixKey):
                let path = "\(prefix).\(name)"
                if !paths.contains(where: { $0.name == path }) {
                    paths.append((prefixKey?.appending(path: read.key) ?? read.key, path))
                }
            case let reach:
                let collection: String?
                if case .element(let of) = reach { collection = of } else { collection = nil }
                if !untracked.contains(where: { _sameKey($0.key, read.key) && $0.collection == collection }) {
                    untracked.append((read.key, name, collection))
                }
            }
        }
        // A path input notifies when a step of it changes: a missing step of a missing path needs
        // no entry of its own.
        let toDeclare = paths.filter { step in
            !paths.contains { $0.name.hasPrefix(step.name + ".") || $0.name.hasPrefix(step.name + "?.") }
        }
        if !toDeclare.isEmpty {
            KeyValueObservingDiagnosticCenter.report(
                KeyValueObservingDiagnostic(
                    incompleteDependenciesOf: keyPath,
                    declared: inputs,
                    missing: toDeclare.map { ($0.key, $0.name) },
                    objectType: type(of: object),
                    fileID: fileID,
                    line: line
                ))
        }
        if !untracked.isEmpty {
            KeyValueObservingDiagnosticCenter.report(
                KeyValueObservingDiagnostic(
                    untrackedReadsOf: keyPath,
                    missing: untracked,
                    objectType: type(of: object),
                    fileID: fileID,
                    line: line
                ))
        }
    }
}

/// The observable objects among the elements of `value`, if it is an array, a set or a
/// dictionary (its values) of them.
func _observableElements(of value: Any?) -> [KeyValueObservable] {
    (value as? any _ObservableElements)?._observableElements ?? []
}

/// A collection a computed key may read through, element by element (`people.map(\.name)`).
protocol _ObservableElements {
    /// Its elements that are observable objects; none unless its element type is an observable
    /// class (or an optional one), so that other collections are not gone through.
    var _observableElements: [KeyValueObservable] { get }
}

extension Array: _ObservableElements {
    var _observableElements: [KeyValueObservable] {
        _unwrapped(Element.self) is KeyValueObservable.Type ? compactMap { $0 as? KeyValueObservable } : []
    }
}

extension ContiguousArray: _ObservableElements {
    var _observableElements: [KeyValueObservable] {
        _unwrapped(Element.self) is KeyValueObservable.Type ? compactMap { $0 as? KeyValueObservable } : []
    }
}

extension Set: _ObservableElements {
    var _observableElements: [KeyValueObservable] {
        _unwrapped(Element.self) is KeyValueObservable.Type ? compactMap { $0 as? KeyValueObservable } : []
    }
}

extension Dictionary: _ObservableElements {
    var _observableElements: [KeyValueObservable] {
        _unwrapped(Value.self) is KeyValueObservable.Type ? values.compactMap { $0 as? KeyValueObservable } : []
    }
}
