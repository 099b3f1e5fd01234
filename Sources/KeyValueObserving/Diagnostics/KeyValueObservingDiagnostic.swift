/// A mistake found at registration that Foundation's KVO makes silently.
///
/// Delivered to `KeyValueObservingDiagnostics`; by default printed once to standard error.
public struct KeyValueObservingDiagnostic: @unchecked Sendable, CustomStringConvertible {
    // Invariant: every stored property is immutable; key-path objects are immutable and safe to share.

    /// What is wrong.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        let name: String

        /// The observed key is not `@Observed` and reads no `@Observed` property: nothing can ever
        /// notify its observers.
        public static let unobservableKey = Kind(name: "unobservableKey")

        /// The observed key is computed from `@Observed` properties but is not itself `@Observed`:
        /// changes of its inputs do not notify its observers.
        public static let undeclaredDependencies = Kind(name: "undeclaredDependencies")

        public var description: String { name }
    }

    /// What is wrong.
    public let kind: Kind
    /// The type of the observed object.
    public let objectType: Any.Type
    /// The key that was observed.
    public let keyPath: AnyKeyPath
    /// The `@Observed` keys the observed key read at registration (empty for `.unobservableKey`), as
    /// the accessors of their declaring class name them.
    public let reads: [AnyKeyPath]
    /// The names of the properties in `reads`, in the same order.
    public let readNames: [String]
    /// The file (`#fileID`) where `observe` was called.
    public let fileID: String
    /// The line where `observe` was called.
    public let line: UInt

    init(objectType: Any.Type, keyPath: AnyKeyPath, reads: [(AnyKeyPath, String)], fileID: String, line: UInt) {
        self.kind = reads.isEmpty ? .unobservableKey : .undeclaredDependencies
        self.objectType = objectType
        self.keyPath = keyPath
        self.reads = reads.map(\.0)
        self.readNames = reads.map(\.1)
        self.fileID = fileID
        self.line = line
    }

    /// One line that names the key, the call site and the fix.
    public var message: String {
        let key = "\(keyPath)".contains("<computed") ? "a key path of type \(type(of: keyPath))" : "\(keyPath)"
        let site = "\(fileID):\(line)"
        if reads.isEmpty {
            return "\(site): \(key) on \(objectType) is not @Observed and reads no @Observed property, "
                + "so its observers will never be notified. Fix: declare the property @Observed."
        }
        let inputs = readNames.map { "`\($0)`" }.joined(separator: ", ")
        return "\(site): \(key) on \(objectType) is computed: it reads \(inputs) but is not itself @Observed, "
            + "so changes of \(readNames.count == 1 ? "that input" : "those inputs") do not notify its observers. "
            + "Fix: observe \(inputs) instead, or store the value in an @Observed property."
    }

    public var description: String { message }
}
