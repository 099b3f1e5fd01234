/// The kind of a change, as in Foundation's `NSKeyValueChange`.
public enum KeyValueChangeKind: Sendable, Hashable {
    /// The value was assigned (every change of a plain `@Observed` property).
    case setting
    /// Elements were inserted into a to-many (array) property, at `indexes`.
    case insertion
    /// Elements were removed from a to-many property, at `indexes`.
    case removal
    /// Elements of a to-many property were replaced, at `indexes`.
    case replacement
}

/// One notification of a change, the `NSKeyValueObservedChange` of this package.
///
/// Which of `newValue` and `oldValue` are filled depends on the `KeyValueObservingOptions` the
/// observer registered with.
public struct KeyValueObservedChange<Value> {
    /// What kind of change happened.
    public let kind: KeyValueChangeKind

    /// The value after the change, if the observer asked for `.new` (and this is not a prior notification).
    public let newValue: Value?

    /// The value before the change, if the observer asked for `.old`.
    public let oldValue: Value?

    /// For to-many changes, the indexes of the affected elements; `nil` for `.setting`.
    public var indexes: RangeSet<Int>? {
        _indexes?.ranges
    }

    // `RangeSet` is not frozen: stored inline it would make this struct's layout unknown to
    // clients, and every change record on the set path would go through value witnesses. A
    // reference to a box keeps the layout fixed and costs nothing for `.setting` (always `nil`).
    @usableFromInline
    let _indexes: _IndexesBox?

    /// `true` for the notification sent before a change to observers that asked for `.prior`.
    public var isPrior: Bool { _flags & 1 != 0 }

    /// `isPrior` (bit 0) and whether the values are redacted where the change is printed or
    /// reflected (bit 1, `_redactingValues()`), in one byte: the record keeps the size it had with
    /// `isPrior` alone.
    @usableFromInline
    let _flags: UInt8

    /// Creates a change record.
    public init(
        kind: KeyValueChangeKind = .setting,
        newValue: Value? = nil,
        oldValue: Value? = nil,
        indexes: RangeSet<Int>? = nil,
        isPrior: Bool = false
    ) {
        self.kind = kind
        self.newValue = newValue
        self.oldValue = oldValue
        self._indexes = indexes.map(_IndexesBox.init)
        self._flags = isPrior ? 1 : 0
    }

    /// A to-many change (`insert(_:at:into:)`, `remove(at:from:)`, `replace(at:with:in:)`), for the
    /// delivery loops: the boxed indexes are shared by every observer's record.
    @inlinable
    init(toMany change: _ToManyChange<Value>, options: KeyValueObservingOptions, isPrior: Bool) {
        self.kind = change.kind
        self.newValue = options.contains(.new) && !isPrior ? change.newElements : nil
        self.oldValue = options.contains(.old) ? change.oldElements : nil
        self._indexes = change.indexes
        self._flags = isPrior ? 1 : 0
    }

    /// The set path's initializer: a `.setting` change, with no `RangeSet` in its signature.
    @inlinable
    init(settingNew newValue: Value?, old oldValue: Value?, isPrior: Bool = false) {
        self.kind = .setting
        self.newValue = newValue
        self.oldValue = oldValue
        self._indexes = nil
        self._flags = isPrior ? 1 : 0
    }

    private init(_ change: Self, flags: UInt8) {
        self.kind = change.kind
        self.newValue = change.newValue
        self.oldValue = change.oldValue
        self._indexes = change._indexes
        self._flags = flags
    }

    /// Whether the values are redacted where the change is printed or reflected (a secret's change
    /// passed on by `ObservableDefaults`).
    package var _isRedacting: Bool { _flags & 2 != 0 }

    /// The same change, whose `description`, `debugDescription`, `dump` and `Mirror` show
    /// `<redacted>` in place of its values; `newValue` and `oldValue` still return them.
    package func _redactingValues() -> Self {
        Self(self, flags: _flags | 2)
    }
}

/// The record's children as `dump` and `print` show them; a redacting record's values read
/// `<redacted>`.
extension KeyValueObservedChange: CustomReflectable {
    public var customMirror: Mirror {
        func shown(_ value: Value?) -> Any { _isRedacting && value != nil ? "<redacted>" : value as Any }
        return Mirror(
            self,
            children: [
                "kind": kind, "newValue": shown(newValue), "oldValue": shown(oldValue), "indexes": indexes as Any, "isPrior": isPrior,
            ],
            displayStyle: .struct)
    }
}

extension KeyValueObservedChange: Sendable where Value: Sendable {}

extension KeyValueObservedChange: Equatable where Value: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.kind == rhs.kind && lhs.newValue == rhs.newValue && lhs.oldValue == rhs.oldValue
            && lhs.indexes == rhs.indexes && lhs.isPrior == rhs.isPrior
    }
}

/// Holds the indexes of a to-many change (see `KeyValueObservedChange._indexes`).
@usableFromInline
final class _IndexesBox: Sendable {
    let ranges: RangeSet<Int>

    @usableFromInline
    init(_ ranges: RangeSet<Int>) {
        self.ranges = ranges
    }
}

/// What a to-many mutation changed, as its observers are told: the kind, the indexes, and the removed
/// or replaced (`oldElements`) and inserted (`newElements`) elements. `Value` is the array type.
@usableFromInline
struct _ToManyChange<Value> {
    @usableFromInline let kind: KeyValueChangeKind
    @usableFromInline let indexes: _IndexesBox
    @usableFromInline let oldElements: Value?
    @usableFromInline let newElements: Value?

    init(kind: KeyValueChangeKind, indexes: RangeSet<Int>, oldElements: Value?, newElements: Value?) {
        self.kind = kind
        self.indexes = _IndexesBox(indexes)
        self.oldElements = oldElements
        self.newElements = newElements
    }
}
