/// The observers of one key at one moment, immutable. The registry replaces a key's snapshot on every
/// registration and removal; a setter takes the current one under the lock (one retain) and delivers
/// from it after unlocking, so handlers never run under the lock and may register or invalidate.
@usableFromInline
final class _ObserverSnapshot: @unchecked Sendable {
    // Invariant: immutable after init; the entries are themselves thread-safe.
    @usableFromInline let entries: ContiguousArray<_ObserverEntry>
    /// Every entry is direct and none asked for `.old` or `.prior`: the set path needs nothing but the new value.
    @usableFromInline let isPlain: Bool
    /// Some direct entry needs the value before the change (`.old` or `.prior`).
    @usableFromInline let needsOld: Bool
    /// Some entry needs work before the change: a direct `.prior`, or any indirect entry.
    @usableFromInline let needsWillChange: Bool
    @usableFromInline let hasIndirect: Bool
    /// Some indirect entry needs its value before the change (`.old` or `.prior`).
    @usableFromInline let indirectNeedsWillChange: Bool

    /// `false` when the class turned automatic notification off for this key
    /// (`automaticallyNotifiesObservers(for:)`): sets do not notify, only `didChangeValue(for:)` does.
    @usableFromInline let notifiesAutomatically: Bool

    /// No observers.
    static let none = _ObserverSnapshot(entries: [], notifiesAutomatically: true)

    init(entries: ContiguousArray<_ObserverEntry>, notifiesAutomatically: Bool) {
        self.entries = entries
        self.notifiesAutomatically = notifiesAutomatically
        var needsOld = false
        var needsPrior = false
        var hasIndirect = false
        var indirectNeedsWillChange = false
        for entry in entries {
            let wantsBefore = !entry.options.isDisjoint(with: [.old, .prior])
            if entry.isDirect {
                needsOld = needsOld || wantsBefore || entry.removesDuplicates
                needsPrior = needsPrior || entry.options.contains(.prior)
            } else {
                hasIndirect = true
                indirectNeedsWillChange = indirectNeedsWillChange || wantsBefore
            }
        }
        self.indirectNeedsWillChange = indirectNeedsWillChange
        self.needsOld = needsOld
        self.hasIndirect = hasIndirect
        self.needsWillChange = needsPrior || indirectNeedsWillChange
        self.isPlain = !needsOld && !hasIndirect
    }
}

// The delivery loops, called by the `@Observed` setter. They are generic over the value, never over a
// key path, and inlinable so that the client specialises them. Entries are borrowed without a
// retain (`_withUnsafeGuaranteedRef`), and so are their handlers: the caller holds the snapshot, which
// holds them, for the whole loop.
extension _ObserverSnapshot {
    /// Delivers a change to a snapshot of direct observers that want no old value. `object` is of
    /// static type `Root` (the class that declares the property, on the set path): observers
    /// registered with that root type get the change from one call of their handler, the others
    /// through `handler(_:_:)`.
    @inlinable
    @inline(__always)
    func deliverPlain<Root: AnyObject, Value>(_ newValue: Value, on object: Root) {
        for index in entries.indices {
            Unmanaged.passUnretained(entries[index])._withUnsafeGuaranteedRef { entry in
                let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
                guard observer.isActive else { return }
                let change = KeyValueObservedChange(settingNew: observer.options.contains(.new) ? newValue : nil, old: nil)
                if observer.rootType == ObjectIdentifier(Root.self) {
                    // The observer was registered with this very class: its handler takes `Root`.
                    unsafeDowncast(observer, to: _RootedDirectObserver<Root, Value>.self).rootedHandler(object, change)
                } else {
                    observer.handler(object, change)
                }
            }
        }
    }

    /// Before the store: prior notifications, in registration order, and the old values of observers
    /// that read through their key paths (indexed like `entries`), or `nil` if none needs one.
    ///
    /// `oldValue` and `newValue` are whole values (`newValue` only where known before the store: it
    /// lets observers that remove duplicates skip `.prior`). With `toMany`, direct observers are told
    /// of that to-many change instead of a `.setting`.
    @inlinable
    func willChange<Value>(
        on object: AnyObject,
        oldValue: Value?,
        newValue: Value? = nil,
        batch: _BatchState? = nil,
        valueHasChanged: Bool = false,
        toMany: _ToManyChange<Value>? = nil
    ) -> ContiguousArray<Any?>? {
        guard needsWillChange else { return nil }
        var pending: ContiguousArray<Any?>? = indirectNeedsWillChange ? ContiguousArray(repeating: nil, count: entries.count) : nil
        for index in entries.indices {
            Unmanaged.passUnretained(entries[index])._withUnsafeGuaranteedRef { entry in
                // In a batch, an observer hears of the first change that reaches it only. A direct
                // observer observes one key, whose first change is the only one that gets here.
                if let batch, !entry.isDirect, !batch.prime(entry.id) { return }
                if entry.isDirect {
                    let options = entry.options
                    guard options.contains(.prior), entry.isActive else { return }
                    let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
                    if let newValue, observer.skips(oldValue, newValue) { return }
                    if let toMany {
                        observer.handler(object, KeyValueObservedChange(toMany: toMany, options: options, isPrior: true))
                        return
                    }
                    observer.handler(
                        object,
                        KeyValueObservedChange(settingNew: nil, old: options.contains(.old) ? oldValue : nil, isPrior: true)
                    )
                } else if pending != nil {
                    pending![index] = entry.willChange(object, valueHasChanged: valueHasChanged)
                }
            }
        }
        return pending
    }

    /// After the store: the change notifications, in registration order. With `toMany`, direct
    /// observers are told of that to-many change instead of a `.setting` (`oldValue` and `newValue`,
    /// the whole values, then only serve observers that remove duplicates).
    @inlinable
    func didChange<Value>(
        _ newValue: Value,
        oldValue: Value?,
        pending: ContiguousArray<Any?>?,
        on object: AnyObject,
        batch: _BatchState? = nil,
        toMany: _ToManyChange<Value>? = nil
    ) {
        for index in entries.indices {
            Unmanaged.passUnretained(entries[index])._withUnsafeGuaranteedRef { entry in
                // In a batch, an observer is notified once, for the first key that reached it (a direct
                // observer observes one key, delivered once).
                if let batch, !entry.isDirect, !batch.deliver(entry.id) { return }
                if entry.isDirect {
                    guard entry.isActive else { return }
                    let options = entry.options
                    let observer = unsafeDowncast(entry, to: _DirectObserver<Value>.self)
                    if observer.skips(oldValue, newValue) { return }
                    if let toMany {
                        observer.handler(object, KeyValueObservedChange(toMany: toMany, options: options, isPrior: false))
                        return
                    }
                    observer.handler(
                        object,
                        KeyValueObservedChange(
                            settingNew: options.contains(.new) ? newValue : nil,
                            old: options.contains(.old) ? oldValue : nil
                        )
                    )
                } else if let pending {
                    entry.didChange(object, old: pending[index])
                } else {
                    // No indirect entry asked for a value before the change: no `Any?` to pass.
                    entry.didChange(object)
                }
            }
        }
    }
}
