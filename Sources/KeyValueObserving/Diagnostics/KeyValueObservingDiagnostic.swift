/// A mistake that Foundation's KVO makes silently, found at registration or at a manual
/// notification.
///
/// Delivered to `KeyValueObservingDiagnosticCenter`; by default printed once to standard error.
public struct KeyValueObservingDiagnostic: @unchecked Sendable, CustomStringConvertible {
    // Invariant: every stored property is immutable; key-path objects are immutable and safe to share.

    /// What is wrong.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        let name: String

        /// The observed key is not `@Observed`, not a dependent key and reads no `@Observed`
        /// property: nothing but manual notification can ever notify its observers.
        public static let unobservableKey = Kind(name: "unobservableKey")

        /// The observed key is computed from `@Observed` properties but declares no dependencies:
        /// changes of its inputs do not notify its observers.
        public static let undeclaredDependencies = Kind(name: "undeclaredDependencies")

        /// The dependency table (`keyPathsAffecting`) has a cycle; each change of a key of the cycle
        /// notifies the observers of every key of it once.
        public static let dependencyCycle = Kind(name: "dependencyCycle")

        /// A dependent key reads an `@Observed` property that none of its declared inputs covers:
        /// its observers are not notified when that property changes. `reads` lists the missing
        /// properties; one read through a child object is named by its path (`settings.username`),
        /// one read through the elements of an array (which no key path of the table can name) by
        /// the element's property, with tracked observation as the fix.
        public static let incompleteDependencies = Kind(name: "incompleteDependencies")

        /// A declared input of a dependent key has a root type unrelated to the key's.
        public static let invalidDependency = Kind(name: "invalidDependency")

        /// `didChangeValue(for:)` without a matching `willChangeValue(for:)` on the same thread, or
        /// not for the innermost pending key: no notification is sent for it.
        public static let unbalancedChangeNotification = Kind(name: "unbalancedChangeNotification")

        /// A tracked observation (`observeTracking`, `KeyValueObservation.tracking`) whose expression
        /// read nothing observable when it was registered: it can never notify.
        public static let untrackedExpression = Kind(name: "untrackedExpression")

        public var description: String { name }
    }

    /// What is wrong.
    public let kind: Kind
    /// The type of the observed object.
    public let objectType: Any.Type
    /// The key concerned.
    public let keyPath: AnyKeyPath
    /// For `.undeclaredDependencies`, the `@Observed` keys the key read, as the accessors of their
    /// declaring class name them; for `.dependencyCycle`, the keys of the cycle, first key repeated
    /// at the end; else empty.
    public let reads: [AnyKeyPath]
    /// The names of the properties in `reads` (for `.undeclaredDependencies`), in the same order.
    public let readNames: [String]
    /// The file (`#fileID`) of the call that found the mistake.
    public let fileID: String
    /// The line of the call that found the mistake.
    public let line: UInt
    /// What was wrong, in words, for kinds whose message is built where they are found.
    let detail: String?

    init(objectType: Any.Type, keyPath: AnyKeyPath, reads: [(AnyKeyPath, String)], fileID: String, line: UInt) {
        self.kind = reads.isEmpty ? .unobservableKey : .undeclaredDependencies
        self.objectType = objectType
        self.keyPath = keyPath
        self.reads = reads.map(\.0)
        self.readNames = reads.map(\.1)
        self.fileID = fileID
        self.line = line
        self.detail = nil
    }

    init(dependencyCycle cycle: [AnyKeyPath], objectType: Any.Type, fileID: String, line: UInt) {
        self.kind = .dependencyCycle
        self.objectType = objectType
        self.keyPath = cycle[0]
        self.reads = cycle
        self.readNames = []
        self.fileID = fileID
        self.line = line
        self.detail = nil
    }

    init(
        incompleteDependenciesOf keyPath: AnyKeyPath,
        declared: [AnyKeyPath],
        missing: [(AnyKeyPath, String)],
        objectType: Any.Type,
        fileID: String,
        line: UInt
    ) {
        self.kind = .incompleteDependencies
        self.objectType = objectType
        self.keyPath = keyPath
        self.reads = missing.map(\.0)
        self.readNames = missing.map(\.1)
        self.fileID = fileID
        self.line = line
        let root = type(of: keyPath).rootType
        let inputs = (declared.map { _KeyNames.knownName(of: $0) ?? "<input>" } + missing.map(\.1)).map { "\\\(root).\($0)" }
        // A computed key has no name at run time on Linux unless `keyPathNames` gives it one.
        let keyName = _KeyNames.knownName(of: keyPath) ?? "<key>"
        self.detail =
            "reads \(missing.map { "`\($0.1)`" }.joined(separator: ", ")), which its declared inputs do not "
            + "cover, so its observers are not notified when \(missing.count == 1 ? "it changes" : "they change"). "
            + "Fix: declare [\\\(root).\(keyName): [\(inputs.joined(separator: ", "))]] in keyPathsAffecting, "
            + "or list the omission in keyPathsNotAffecting if it is deliberate."
    }

    /// `missing`: reads through the elements of the collection at the path `collection`, or, where
    /// that is `nil`, of an object reached neither through the table's paths nor through elements.
    init(
        untrackedReadsOf keyPath: AnyKeyPath,
        missing: [(key: AnyKeyPath, name: String, collection: String?)],
        objectType: Any.Type,
        fileID: String,
        line: UInt
    ) {
        self.kind = .incompleteDependencies
        self.objectType = objectType
        self.keyPath = keyPath
        self.reads = missing.map(\.key)
        self.readNames = missing.map(\.name)
        self.fileID = fileID
        self.line = line
        let reads = missing.map { read in
            if let collection = read.collection {
                return "`\(read.name)` through the elements of `\(collection)`, which no key path in keyPathsAffecting can declare"
            }
            return "`\(read.name)` of a \(type(of: read.key).rootType) that none of its declared inputs reaches"
        }
        let omissions = missing.map { "\\\(type(of: $0.key).rootType).\($0.name)" }
        var seen: [String] = []
        let distinctOmissions = omissions.filter { omission in
            defer { seen.append(omission) }
            return !seen.contains(omission)
        }
        let keyName = _KeyNames.knownName(of: keyPath) ?? "<key>"
        self.detail =
            "reads \(reads.joined(separator: "; ")), so its observers are not notified when "
            + "\(missing.count == 1 ? "it changes" : "they change"). Fix: observe it with tracked observation, "
            + "observeTracking { $0.\(keyName) }, which follows every object the expression reads, elements included, "
            + "or list [\\\(type(of: keyPath).rootType).\(keyName): [\(distinctOmissions.joined(separator: ", "))]] "
            + "in keyPathsNotAffecting if the omission is deliberate."
    }

    init(kind: Kind, objectType: Any.Type, keyPath: AnyKeyPath, detail: String, fileID: String, line: UInt) {
        self.kind = kind
        self.objectType = objectType
        self.keyPath = keyPath
        self.reads = []
        self.readNames = []
        self.fileID = fileID
        self.line = line
        self.detail = detail
    }

    /// One line that names the key, the call site and the fix.
    public var message: String {
        let key = "`\(Self.describe(keyPath))`"
        let site = "\(fileID):\(line)"
        switch kind {
        case .unobservableKey:
            return "\(site): \(key) on \(objectType) is not @Observed, not declared in keyPathsAffecting and reads "
                + "no @Observed property, so only manual notification (willChangeValue/didChangeValue) can notify "
                + "its observers. Fix: declare the property @Observed, or, if the class notifies it itself, return "
                + "false from automaticallyNotifiesObservers(for:) for it."
        case .undeclaredDependencies:
            let inputs = readNames.map { "`\($0)`" }.joined(separator: ", ")
            return "\(site): \(key) on \(objectType) is computed: it reads \(inputs) but declares no dependencies, "
                + "so changes of \(readNames.count == 1 ? "that input" : "those inputs") do not notify its observers. "
                + "Fix: list them in `override class var keyPathsAffecting` "
                + "([\\\(objectType).\(_KeyNames.knownName(of: keyPath) ?? "<key>"): [\(readNames.map { "\\\(objectType).\($0)" }.joined(separator: ", "))]])."
        case .dependencyCycle:
            let cycle = reads.map { "`\(Self.describe($0))`" }.joined(separator: " → ")
            return "\(site): keyPathsAffecting of \(objectType) has a dependency cycle: \(cycle). "
                + "It is usually a mistake. What is delivered: a change of any key of the cycle notifies the "
                + "observers of every key of the cycle exactly once (the edge back to the first key adds "
                + "nothing). Fix: remove one of these dependencies, unless that is what you want."
        case .untrackedExpression:
            return "\(site): tracked observation of \(objectType): \(detail ?? kind.description)"
        default:
            return "\(site): \(key) on \(objectType): \(detail ?? kind.description)"
        }
    }

    public var description: String { message }

    /// A key's name (`"speed"`, `"engine.rpm"`), or its types where no name is known
    /// (`"computed Int property of Car"`).
    static func describe(_ keyPath: AnyKeyPath) -> String {
        _KeyNames.name(of: keyPath)
    }
}
