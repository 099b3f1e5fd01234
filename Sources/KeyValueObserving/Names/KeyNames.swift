@_spi(Reflection) import Swift

/// The names of keys, for logs, metrics, diagnostics and introspection: `"speed"` for
/// `\Car.speed`, `"engine.rpm"` for a path.
///
/// Key paths carry no names at run time on Linux (`\Car.speed` prints as `\Car.<computed 0x…>`), so
/// names are found another way:
/// - an `@Observed` property by the byte offset of its storage, among the stored fields the runtime
///   lists for its class (`_speed` at offset 24): exact even when two properties hold equal values;
/// - a key of a class that notifies its own keys (`ObservableProgress`) by its class;
/// - a computed key by the class's `keyPathNames` table;
/// - a path by the names of its steps, found as the path is followed;
/// - otherwise a typed description, `"computed Int property of Car"`.
enum _KeyNames {
    /// Keyed by key-path equality, so key paths that are not uniqued (those of generic classes) do
    /// not grow it: it holds one entry per distinct key.
    private static let names = Locked<[AnyKeyPath: String]>([:])

    /// Records the name of the `@Observed` property `key`, whose wrapper is stored at `storageKey`
    /// (`\Car._speed`: key paths of stored properties carry their field names, on Linux too).
    static func learn(_ key: AnyKeyPath, storageKey: AnyKeyPath) {
        guard names.withLock({ $0[key] }) == nil, let field = describedName(of: storageKey) else { return }
        let name = String(field.hasPrefix("_") ? field.dropFirst() : Substring(field))
        names.withLock { $0[key] = name }
    }

    /// Records the name of the `@Observed` property `key`, whose storage is at `storageOffset` in
    /// instances of its root class.
    static func learn(_ key: AnyKeyPath, storageOffset: Int) {
        guard names.withLock({ $0[key] }) == nil, explicitName(of: key) == nil,
            let name = fieldName(of: key, storageOffset: storageOffset)
        else { return }
        names.withLock { $0[key] = name }
    }

    /// Records `name` for `key` (a path, named by its steps).
    static func record(_ key: AnyKeyPath, name: String) {
        names.withLock { $0[key] = name }
    }

    /// The name of `key`; `storageOffset`, when known, finds an `@Observed` property not seen yet.
    /// Without a real name, its types: `"computed Int property of Car"`.
    static func name(of key: AnyKeyPath, storageOffset: Int? = nil) -> String {
        knownName(of: key, storageOffset: storageOffset)
            ?? "computed \(type(of: key).valueType) property of \(type(of: key).rootType)"
    }

    /// The name of `key` if it has a real one, `nil` where only its types describe it.
    static func knownName(of key: AnyKeyPath, storageOffset: Int? = nil) -> String? {
        if let explicit = explicitName(of: key) { return explicit }
        if let known = names.withLock({ $0[key] }) { return known }
        if let declared = declaredName(of: key) { return declared }
        if let storageOffset, let name = fieldName(of: key, storageOffset: storageOffset) {
            names.withLock { $0[key] = name }
            return name
        }
        return describedName(of: key)
    }

    /// The name a class that notifies its own keys gives `key`.
    private static func explicitName(of key: AnyKeyPath) -> String? {
        (type(of: key).rootType as? any _ExplicitlyNotifiedKeys.Type)?._explicitKeyName(for: key)
    }

    /// The name `keyPathNames` declares for `key` in its root class or a superclass.
    private static func declaredName(of key: AnyKeyPath) -> String? {
        var current: AnyClass? = type(of: key).rootType as? AnyClass
        while let cls = current, let observable = cls as? KeyValueObservable.Type {
            if let name = observable.keyPathNames[key] { return name }
            current = _getSuperclass(cls)
        }
        return nil
    }

    /// The stored field at `storageOffset` of `key`'s root class, without the wrapper's underscore.
    private static func fieldName(of key: AnyKeyPath, storageOffset: Int) -> String? {
        guard let root = type(of: key).rootType as? AnyClass else { return nil }
        var found: String?
        // The fields of a class include its superclasses' fields, with their offsets.
        // `.classType` (raw value 1) spelled out: the stdlib declares it as a mutable static.
        _ = _forEachField(of: root, options: _EachFieldOptions(rawValue: 1)) { name, offset, _, _ in
            guard offset == storageOffset else { return true }
            let field = String(cString: name)
            found = field.hasPrefix("_") ? String(field.dropFirst()) : field
            return false
        }
        return found
    }

    /// What the key path's description says after its root type (`_speed` of `\Car._speed`,
    /// `engine.rpm` on Apple platforms), where the runtime names every component: stored properties
    /// always, computed ones only on Apple platforms (`\Car.<computed 0x…>` on Linux).
    private static func describedName(of key: AnyKeyPath) -> String? {
        let prefix = "\\\(type(of: key).rootType)."
        let description = "\(key)"
        guard description.hasPrefix(prefix) else { return nil }
        let components = description.dropFirst(prefix.count)
        return components.isEmpty || components.contains("<computed") ? nil : String(components)
    }
}
