/// A typed defaults key: its name in the file and its default value, declared once.
///
/// ```swift
/// extension DefaultsKey where Value == Double {
///     static var playbackSpeed: Self { DefaultsKey("playbackSpeed", default: 1.0) }
/// }
/// store[.playbackSpeed] = 1.5
/// ```
///
/// The value is stored in the file as its JSON encoding (`JSONEncoder`'s default strategies), so
/// numbers, strings, booleans, arrays, dictionaries with string keys and `Codable` structs are
/// written as people would write them by hand. Reads return `defaultValue` while the key is absent,
/// or when the file holds a value that does not decode as `Value` (the store's error handler is told).
///
/// Names starting with U+0000 are reserved (the etcd store keeps its bookkeeping keys there, which
/// no store shows): making a key with such a name traps. Check a name that comes from input with
/// ``isValidName(_:)`` first.
public struct DefaultsKey<Value: Codable & Sendable>: Sendable {
    /// The key's name in the file.
    public let name: String
    /// The value read while the key is absent from the file.
    public let defaultValue: Value
    /// The name's interned offset (`DefaultsKeyNames`): where the registry finds the key's
    /// observers, so that a set never hashes the name.
    @usableFromInline let offset: Int

    /// Creates a key named `name` whose value is `defaultValue` until one is set.
    ///
    /// - Parameters:
    ///   - name: The key's name in the file (or after the prefix, on etcd). It must not start with
    ///     U+0000 (reserved): such a name traps, with a message that names it.
    ///   - defaultValue: The value read while the key is absent.
    public init(_ name: String, default defaultValue: Value) {
        precondition(
            Self.isValidName(name),
            "DefaultsKey: the name \(String(reflecting: name)) starts with U+0000, which is reserved for the store's "
                + "bookkeeping keys: choose a name that does not (DefaultsKey.isValidName(_:) checks one)"
        )
        self.name = name
        self.defaultValue = defaultValue
        self.offset = DefaultsKeyNames.offset(of: name, readAs: Value.self)
    }

    /// Creates a key named `name` whose value is `defaultValue` until one is set, secret if
    /// `isSecret`: its values are never printed, by the store (`DefaultsError.found` and reasons,
    /// descriptions of changes, snapshots and `DefaultsValueSource`) nor by `kvo-defaults`, which
    /// prints `<redacted>` in their place. Secrecy belongs to the name, for the whole process: once
    /// a key of that name is declared secret, every key of that name is.
    ///
    /// The name is secret only from when the key is first made: a key declared as a computed or
    /// lazy static is made at its first use, after a start-up snapshot may have printed it. Declare
    /// secrets when the store is made instead (`secrets:` of every `DefaultsStore` initializer).
    ///
    /// - Parameters:
    ///   - name: The key's name (see `init(_:default:)`).
    ///   - defaultValue: The value read while the key is absent.
    ///   - isSecret: Whether the key's values are secret.
    public init(_ name: String, default defaultValue: Value, isSecret: Bool) {
        self.init(name, default: defaultValue)
        if isSecret { DefaultsKeyNames.markSecret(name) }
    }

    /// Whether the key's values are secret (see `init(_:default:isSecret:)`).
    public var isSecret: Bool { DefaultsKeyNames.isSecret(name) }
}

/// What `dump` and `print` show of a key: its name, its default (`<redacted>` for a secret key) and
/// whether it is secret.
extension DefaultsKey: CustomReflectable {
    public var customMirror: Mirror {
        let isSecret = isSecret
        return Mirror(
            self, children: ["name": name, "defaultValue": isSecret ? DefaultsKeyNames.redacted : defaultValue, "isSecret": isSecret],
            displayStyle: .struct)
    }
}

extension DefaultsKey {
    /// Whether `name` can name a key: any string that does not start with U+0000, which is
    /// reserved for the store's own bookkeeping keys.
    ///
    /// ```swift
    /// DefaultsKey<Int>.isValidName("launches")      // true
    /// DefaultsKey<Int>.isValidName("\u{0}writer")   // false
    /// ```
    ///
    /// - Parameter name: A candidate key name, such as one read from input.
    /// - Returns: `false` when `name` starts with U+0000 (``init(_:default:)`` would trap), `true`
    ///   otherwise.
    public static func isValidName(_ name: String) -> Bool {
        name.utf8.first != 0
    }
}
