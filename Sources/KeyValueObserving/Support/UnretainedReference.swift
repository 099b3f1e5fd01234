import _KeyValueObservingShims

/// A reference to an object that does not keep it alive, for an observation that must not retain
/// its root (KVO's rule: the token keeps no model alive): an unowned reference count, taken in
/// `init` and given back in `deinit`, keeps the object's memory valid (not the object: it is
/// deinitialised when its last strong reference goes, and its memory is freed when this goes too),
/// and `object` takes a strong reference only while the object is not deinitialising (the
/// runtime's atomic `swift_tryRetain`).
///
/// What a Swift `weak` reference does, without its side table: an object that is weakly referenced
/// once keeps a side table for life, and every later retain and release of it, the application's
/// own included, takes the runtime's slow path (a large part of a tracked set's cost, when it was
/// measured: the Performance article). Only for native Swift objects (`KeyValueObservable` and the package's own classes).
@usableFromInline
struct _UnretainedReference<Object: AnyObject>: ~Copyable, @unchecked Sendable {
    // Invariant: `address` is immutable, and the memory it points to stays allocated while this
    // exists (the unowned count); the object is only reached through `swift_tryRetain`, which is
    // atomic, so any thread may call `object`.
    @usableFromInline let address: UnsafeMutableRawPointer

    @inlinable
    init(_ object: Object) {
        // The runtime's reference counting entry points are for native Swift objects: the package
        // only makes these for observable objects and the free form's root.
        assert(object is KeyValueObservable || object is _NoTrackingRoot, "not a native Swift object of the package's: \(Object.self)")
        address = Unmanaged.passUnretained(object).toOpaque()
        _ = _kvo_swift_unownedRetain(address)
    }

    deinit {
        _kvo_swift_unownedRelease(address)
    }

    /// The object, strongly, or `nil` once its deinitialisation began.
    @inlinable
    var object: Object? {
        guard let retained = _kvo_swift_tryRetain(address) else { return nil }
        return Unmanaged<Object>.fromOpaque(retained).takeRetainedValue()
    }
}
