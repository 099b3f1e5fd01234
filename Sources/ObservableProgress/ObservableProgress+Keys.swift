import KeyValueObserving

/// The observable keys of `ObservableProgress`: each is registered like an `@Observed` property
/// under a made-up storage offset (distinct multiples of 8, so each has its own bit in the
/// registry's mask) and notified explicitly, with the values computed under the node's lock.
enum _ProgressKey: Int, CaseIterable {
    case completedUnitCount, totalUnitCount, fractionCompleted, isIndeterminate, isFinished
    case isCancelled, isPaused, isCancellable, isPausable

    var offset: Int { rawValue &* 8 }

    var keyPath: AnyKeyPath {
        switch self {
        case .completedUnitCount: \ObservableProgress.completedUnitCount
        case .totalUnitCount: \ObservableProgress.totalUnitCount
        case .fractionCompleted: \ObservableProgress.fractionCompleted
        case .isIndeterminate: \ObservableProgress.isIndeterminate
        case .isFinished: \ObservableProgress.isFinished
        case .isCancelled: \ObservableProgress.isCancelled
        case .isPaused: \ObservableProgress.isPaused
        case .isCancellable: \ObservableProgress.isCancellable
        case .isPausable: \ObservableProgress.isPausable
        }
    }
}

extension ObservableProgress: _ExplicitlyNotifiedKeys {
    package static func _explicitKey(for keyPath: AnyKeyPath) -> (offset: Int, key: AnyKeyPath)? {
        for key in _ProgressKey.allCases {
            let candidate = key.keyPath
            if candidate === keyPath || candidate == keyPath { return (key.offset, candidate) }
        }
        return nil
    }

    package static func _explicitKeyName(for keyPath: AnyKeyPath) -> String? {
        _explicitKey(for: keyPath).flatMap { found in _ProgressKey.allCases.first { $0.offset == found.offset } }.map { "\($0)" }
    }

    /// Lets a registration probe see that `key` was read (see `_reportExplicitRead`).
    @inline(__always)
    func reportRead<Value>(_ key: _ProgressKey, _ type: Value.Type) {
        _reportExplicitRead(offset: key.offset, key: { key.keyPath }, of: type)
    }

    /// Notifies the observers of `key` that it went from `old` to `new`, if it changed.
    @inline(__always)
    func notify<Value: Equatable>(_ key: _ProgressKey, from old: Value, to new: Value) {
        guard old != new else { return }
        _notifyExplicitChange(offset: key.offset, key: { key.keyPath }, from: old, to: new)
    }

    /// Notifies this node's observers of what changed between two sets of values.
    @inline(__always)
    func notifyObservers(from before: _ProgressValues, to after: _ProgressValues) {
        guard _mayHaveObservers else { return }
        notifyObserversOfChanges(from: before, to: after)
    }

    /// Notifies this node's observers that its fraction, and nothing else, went from `old` to `new`.
    @inline(__always)
    func notifyObservers(fractionFrom old: Double, to new: Double) {
        guard old != new, _mayHaveObservers else { return }
        notifyObserversOfFraction(from: old, to: new)
    }

    @inline(never)
    private func notifyObserversOfFraction(from old: Double, to new: Double) {
        _notifyExplicitChange(
            offset: _ProgressKey.fractionCompleted.offset, key: { _ProgressKey.fractionCompleted.keyPath }, from: old, to: new)
    }

    /// The five notifications, out of line: inlined, they made the update's code so large that the
    /// optimizer stopped inlining into it, and an unobserved update paid for calls it never needed.
    @inline(never)
    private func notifyObserversOfChanges(from before: _ProgressValues, to after: _ProgressValues) {
        notify(.completedUnitCount, from: before.completed, to: after.completed)
        notify(.totalUnitCount, from: before.total, to: after.total)
        notify(.fractionCompleted, from: before.fraction, to: after.fraction)
        notify(.isIndeterminate, from: before.isIndeterminate, to: after.isIndeterminate)
        notify(.isFinished, from: before.isFinished, to: after.isFinished)
    }
}
