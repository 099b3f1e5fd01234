/// How a registration is attached to the registry.
enum _ObservationRoute {
    /// An `@Observed` key of the object: values come from the setter.
    case direct(key: AnyKeyPath, matchesByEquality: Bool)
    /// Any other key: values are read through the observer's key path around changes of `key`.
    case throughKeyPath(key: AnyKeyPath, matchesByEquality: Bool)

    var key: AnyKeyPath {
        switch self {
        case .direct(let key, _), .throughKeyPath(let key, _): key
        }
    }

    var matchesByEquality: Bool {
        switch self {
        case .direct(_, let byEquality), .throughKeyPath(_, let byEquality): byEquality
        }
    }

    /// Finds which `@Observed` key (if any) notifies observers of `keyPath`, by reading the value once
    /// while the `@Observed` getters of the object report what they are asked for, and reports a key
    /// that can never notify through `KeyValueObservingDiagnostics`.
    static func find<Root: KeyValueObservable, Value>(
        for keyPath: KeyPath<Root, Value>,
        of object: Root,
        in registry: _ObserverRegistry,
        fileID: String,
        line: UInt
    ) -> _ObservationRoute {
        var reads: [_ObserverRegistry.ProbedRead] = []
        for read in registry.probe({ _ = object[keyPath: keyPath] }) where !reads.contains(where: { $0.key == read.key }) {
            reads.append(read)
        }
        if reads.count == 1 {
            let read = reads[0].key
            if read === keyPath {
                return .direct(key: read, matchesByEquality: false)
            }
            if read == keyPath {
                // Equal but not identical: a generic class (whose key paths are not uniqued) or a key
                // path built at run time. Read again to learn whether the accessor's key is uniqued.
                let again = registry.probe { _ = object[keyPath: keyPath] }
                return .direct(key: read, matchesByEquality: again.first.map { $0.key !== read } ?? true)
            }
            if isInherited(read, by: keyPath) {
                // `\Subclass.property` for a property declared in a superclass is a different key-path
                // object, which cannot be told apart from a subclass's computed property that reads
                // that one property; reading through the observer's own key path is right for both.
                return .throughKeyPath(key: read, matchesByEquality: false)
            }
        }
        KeyValueObservingDiagnostics.report(KeyValueObservingDiagnostic(
            objectType: type(of: object),
            keyPath: keyPath,
            reads: reads.map { ($0.key, _propertyName(storage: $0.storage)) },
            fileID: fileID,
            line: line
        ))
        return .throughKeyPath(key: keyPath, matchesByEquality: true)
    }

    private static func isInherited(_ read: AnyKeyPath, by keyPath: AnyKeyPath) -> Bool {
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

/// The name of an `@Observed` property, from its storage key path (`\Person._firstName` →
/// `firstName`): the runtime describes stored-property key paths with their field names.
func _propertyName(storage: AnyKeyPath) -> String {
    let description = "\(storage)"
    guard let dot = description.lastIndex(of: ".") else { return description }
    let field = description[description.index(after: dot)...]
    return String(field.hasPrefix("_") ? field.dropFirst() : field)
}
