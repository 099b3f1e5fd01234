import Synchronization
import _KeyValueObservingShims

/// A class of this package whose observable keys are not `@Observed` properties but state it keeps
/// behind its own lock (`ObservableProgress`). It notifies them itself, after unlocking, with the old
/// and new values it computed under the lock, through `_notifyExplicitChange`.
///
/// Each such key is given a registry slot like an `@Observed` property's, under a made-up "storage
/// offset" that the class picks (distinct per key; a multiple of 8 keeps the observed-mask bits
/// apart), so a notification costs what an `@Observed` set costs: one atomic load when nobody
/// observes the key, a look-up in the registry's published set table, without a lock, when someone does.
package protocol _ExplicitlyNotifiedKeys: KeyValueObservable {
    /// The offset and canonical key path under which observers of `keyPath` are registered, or
    /// `nil` if `keyPath` is not one of the explicitly notified keys.
    static func _explicitKey(for keyPath: AnyKeyPath) -> (offset: Int, key: AnyKeyPath)?

    /// The name of `keyPath` (`"fractionCompleted"`), or `nil` if it is not one of the explicitly
    /// notified keys.
    static func _explicitKeyName(for keyPath: AnyKeyPath) -> String?
}

extension KeyValueObservable {
    /// Notifies the observers of the explicitly notified key at `offset` (see
    /// `_ExplicitlyNotifiedKeys`) that its value went from `oldValue` to `newValue`. Observers that
    /// asked for `.prior` get their prior notification first, then every observer its change
    /// notification, in registration order; observers of every key hear of it too. Call it without
    /// holding any lock.
    ///
    /// `key` is called only if the object has observers of every key.
    @inlinable
    package final func _notifyExplicitChange<Value>(
        offset: Int,
        key: () -> AnyKeyPath,
        from oldValue: Value,
        to newValue: Value
    ) {
        _notifyExplicitKey(offset: offset, key: key, from: oldValue, to: newValue, phases: [.prior, .change])
    }

    /// Called by the getter of an explicitly notified key: while its thread records its reads (a
    /// registration probe finding what a path reads, a tracked observation's evaluation), reports the
    /// read as if the key were an `@Observed` property. Costs one load and one test otherwise.
    @inlinable
    package final func _reportExplicitRead<Value>(offset: Int, key: () -> AnyKeyPath, of _: Value.Type) {
        if _slowPath(_kvo_is_recording() != 0) { _recordExplicitRead(offset: offset, key: key, of: Value.self) }
    }

    /// Whether anything observes this object: a registry exists. `false` is definite; a progress
    /// update checks it once per node before computing what its observers would need.
    @inlinable
    package final var _mayHaveObservers: Bool {
        _kvoRegistry.load(ordering: .acquiring) != nil
    }
}
