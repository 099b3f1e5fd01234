/// Whose code a scenario measures: this package's libraries or an alternative. Every row of every
/// report names it, so that a baseline's figure (an `@Observable` object's bytes, a
/// `NotificationCenter` post) never reads as this package's.
///
/// It follows from the scenario's name, which starts with the alternative's prefix
/// (`notificationcenter-`, `observation-`, `foundation-progress-`, `userdefaults-`, …, after
/// `memory-` for memory scenarios); a name without one measures this package.
enum Implementation: String, CaseIterable {
    case keyValueObserving = "KeyValueObserving"
    case observableProgress = "ObservableProgress"
    case observableDefaults = "ObservableDefaults"
    case plainSwift = "plain Swift"
    case notificationCenter = "NotificationCenter"
    case observation = "Observation"
    case asyncStream = "AsyncStream"
    case foundationProgress = "Foundation Progress"
    case userDefaults = "UserDefaults"

    /// The name prefixes of each implementation's scenarios; the longest match wins.
    private static let prefixes: [(prefix: String, implementation: Implementation)] = [
        ("plain-", .plainSwift), ("didset-", .plainSwift),
        ("notificationcenter-", .notificationCenter),
        ("observation-", .observation), ("observations-", .observation), ("observable-", .observation),
        ("tracked-rearmed-observation", .observation), ("tracked-observations-", .observation),
        ("asyncstream-", .asyncStream),
        ("foundation-progress-", .foundationProgress),
        ("userdefaults-", .userDefaults),
        ("progress-", .observableProgress),
        ("defaults-", .observableDefaults),
    ]

    init(scenario name: String) {
        let unprefixed = name.hasPrefix("memory-") ? name.dropFirst("memory-".count) : name[...]
        self =
            Self.prefixes
            .filter { unprefixed.hasPrefix($0.prefix) }
            .max { $0.prefix.count < $1.prefix.count }?
            .implementation ?? .keyValueObserving
    }

    /// Whether this is one of this package's libraries.
    var isThisPackage: Bool {
        switch self {
        case .keyValueObserving, .observableProgress, .observableDefaults: true
        default: false
        }
    }
}
