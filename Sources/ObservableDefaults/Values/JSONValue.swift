/// A JSON value as it is stored in a defaults file: what the file says, with numbers kept as their
/// literal text so that integers, doubles and large numbers round-trip exactly and a hand edit from
/// `1` to `1.0` is seen as a change.
@usableFromInline
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// The number's literal text, as validated by the parser (`-12`, `1.5e3`).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}
