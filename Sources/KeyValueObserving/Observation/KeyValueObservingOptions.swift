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
    @inlinable
    public static var new: KeyValueObservingOptions { KeyValueObservingOptions(rawValue: 1 << 0) }

    /// Fill `KeyValueObservedChange.oldValue` with the value before the change.
    @inlinable
    public static var old: KeyValueObservingOptions { KeyValueObservingOptions(rawValue: 1 << 1) }

    /// Deliver the current value once, synchronously, before `observe` returns.
    @inlinable
    public static var initial: KeyValueObservingOptions { KeyValueObservingOptions(rawValue: 1 << 2) }

    /// Also deliver a notification *before* each change, with `isPrior == true`, while the old value
    /// is still stored (`oldValue` is filled if `.old` is also given; `newValue` is always `nil`).
    @inlinable
    public static var prior: KeyValueObservingOptions { KeyValueObservingOptions(rawValue: 1 << 3) }
}
