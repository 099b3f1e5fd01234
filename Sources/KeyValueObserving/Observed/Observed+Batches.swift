import Synchronization

// Recording a set of an `@Observed` property in a batch, and delivering it when the batch ends.

extension Observed {
    /// Appends a change of this property, with its value now as the value before the batch, to
    /// `batch`; returns the index of its `_BatchedExtra` (-1 if it has none: no key to keep).
    /// `slotIndex` is where the key's observers were found, or -1.
    @inlinable
    static func _recordBatchedChange(
        in batch: _BatchState,
        offset: Int,
        storage: UnsafeMutablePointer<Observed<Value>>,
        slotIndex: Int,
        key: AnyKeyPath?
    ) -> Int {
        let finisher: Unmanaged<_BatchFinisher>
        if let kept = batch.finisher(for: ObjectIdentifier(Value.self)) {
            finisher = kept
        } else {
            finisher = batch.addFinisher(
                _BatchFinisher(
                    type: ObjectIdentifier(Value.self),
                    readFinalValue: { change in
                        let value = change.pointee.storage.assumingMemoryBound(to: Observed<Value>.self).pointee._value
                        withUnsafeMutablePointer(to: &change.pointee.finalValue) { _ValueCell.store(value, in: $0) }
                    },
                    deliver: { change, observers, batch, object in _deliverBatchedChange(change, to: observers, batch: batch, on: object) }
                ))
        }
        let extra = key.map { batch.addExtra(key: $0) } ?? -1
        let change = batch.append(
            offset: offset, storage: UnsafeMutableRawPointer(storage), slotIndex: slotIndex, finisher: finisher,
            extra: extra, trivialSize: _ValueCell.trivialSize(Value.self))
        withUnsafeMutablePointer(to: &change.pointee.oldValue) { _ValueCell.store(storage.pointee._value, in: $0) }
        return extra
    }

    /// Notifies `observers`, the key's observers at the end of the batch, of a batched change of this
    /// property (`_BatchFinisher.deliver`), and takes its values out.
    @inlinable
    @inline(__always)
    static func _deliverBatchedChange(
        _ change: UnsafeMutablePointer<_BatchedChange>,
        to observers: _ObserverSnapshot,
        batch: _BatchState,
        on object: AnyObject
    ) {
        let oldValue = withUnsafeMutablePointer(to: &change.pointee.oldValue) { _ValueCell.take(Value.self, from: $0) }
        let finalValue = withUnsafeMutablePointer(to: &change.pointee.finalValue) { _ValueCell.take(Value.self, from: $0) }
        if observers.isPlain {
            observers.deliverPlain(finalValue, on: object)
            return
        }
        let extra = change.pointee.extra
        let pending = extra < 0 ? nil : batch.extras[extra].pending?.values(for: observers)
        observers.didChange(finalValue, oldValue: oldValue, pending: pending, on: object, batch: batch)
    }

}
