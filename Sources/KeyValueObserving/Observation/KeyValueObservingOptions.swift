/// What an observer wants to receive, the `NSKeyValueObservingOptions` of this package.
///
/// `observe(_:options:changeHandler:)` defaults to `[]` as Foundation's KVO does: the handler runs on
/// every change but `newValue` and `oldValue` are `nil` unless asked for.
///
/// ```swift
/// let token = player.observe(\.volume, options: [.initial, .old, .new]) { player, change in
///     print(change.oldValue as Any, "→", change.newValue as Any)
/// }
/// ```
public struct KeyValueObservingOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    @inlinable
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// Fill `KeyValueObservedChange.newValue` with the value after the change.
    public static let new = KeyValueObservingOptions(rawValue: 1 << 0)

    /// Fill `KeyValueObservedChange.oldValue` with the value before the change.
    public static let old = KeyValueObservingOptions(rawValue: 1 << 1)

    /// Deliver the current value once, synchronously, before `observe` returns.
    public static let initial = KeyValueObservingOptions(rawValue: 1 << 2)

    /// Also deliver a notification *before* each change, with `isPrior == true`, while the old value
    /// is still stored (`oldValue` is filled if `.old` is also given; `newValue` is always `nil`).
    public static let prior = KeyValueObservingOptions(rawValue: 1 << 3)
}
