import Synchronization

/// The token of one observation, the `NSKeyValueObservation` of this package. Keep it for as long
/// as you want to observe: when it is deallocated, the observation ends.
///
/// ```swift
/// final class Controller {
///     private var tokens: [KeyValueObservation] = []
///
///     func start(_ player: AudioPlayer) {
///         tokens.append(player.observe(\.volume, options: [.new]) { _, change in print(change.newValue!) })
///     }
/// }
/// ```
///
/// The token does not keep the observed object alive. It keeps the handler (and what the handler
/// captures) alive until it is invalidated or deallocated; a handler that captures its own token
/// strongly therefore lives until `invalidate()` is called, as in Foundation.
public final class KeyValueObservation: Sendable {
    let registry: _ObserverRegistry?
    /// What else ends with this observation: the chain observers of a key-path chain or of a
    /// dependent key with chained inputs.
    private let parts: [any _Invalidatable]
    /// The registration's id, and in the top bit (`invalidatedBit`) whether an `invalidate()` has
    /// finished: the later ones (the deinit's, usually) have nothing to do. The bit is set after
    /// the removal, not before, so that a call racing the first one still returns only once the
    /// observer is removed. One word for both: the token is 40 bytes, a 48-byte block of the
    /// allocator (a separate flag made it 41, a 64-byte block).
    private let idAndState: Atomic<UInt64>

    /// Registration ids count up from 1 and never reach the top bit.
    private static var invalidatedBit: UInt64 { 1 << 63 }

    /// The registration's id.
    var id: UInt64 {
        idAndState.load(ordering: .relaxed) & ~Self.invalidatedBit
    }

    @usableFromInline
    init(registry: _ObserverRegistry?, id: UInt64, parts: [any _Invalidatable] = []) {
        precondition(id & Self.invalidatedBit == 0, "KeyValueObserving: registration ids ran out")
        self.registry = registry
        self.parts = parts
        idAndState = Atomic(id)
    }

    /// Ends the observation and releases the handler.
    ///
    /// Idempotent and thread-safe; it may be called from inside a handler, its own included, and after
    /// the observed object has been deallocated. After it returns, no new delivery to this observer
    /// starts; a delivery that another thread had already started may still be running.
    public func invalidate() {
        let state = idAndState.load(ordering: .acquiring)
        guard state & Self.invalidatedBit == 0 else { return }
        registry?.remove(id: state)
        for part in parts { part.invalidate() }
        idAndState.bitwiseOr(Self.invalidatedBit, ordering: .releasing)
    }

    /// A token that ends `part`'s observation: for the package's other modules (the defaults store),
    /// whose observers live outside `KeyValueObservable`'s registry.
    @usableFromInline
    package convenience init(invalidating part: any _Invalidatable) {
        self.init(registry: nil, id: 0, parts: [part])
    }

    deinit {
        invalidate()
    }
}

/// Something a token ends: a chain's or a dependent key's observers of other objects, or a defaults
/// store's observer.
@usableFromInline
package protocol _Invalidatable: AnyObject, Sendable {
    func invalidate()
}

extension KeyValueObservation {
    /// A token that ends `token` and then calls `onInvalidate`, once: for observations built on
    /// another one (a throttled observer also stops its pending delivery).
    package convenience init(ending token: KeyValueObservation, then onInvalidate: @escaping @Sendable () -> Void) {
        self.init(invalidating: _InvalidationHandler(token: token, onInvalidate: onInvalidate))
    }
}

/// Ends a token, then runs a closure, the first time it is invalidated.
final class _InvalidationHandler: _Invalidatable {
    private let token: KeyValueObservation
    private let onInvalidate: Locked<(@Sendable () -> Void)?>

    init(token: KeyValueObservation, onInvalidate: @escaping @Sendable () -> Void) {
        self.token = token
        self.onInvalidate = Locked(onInvalidate)
    }

    func invalidate() {
        token.invalidate()
        // Taken out under the lock, called after it.
        let handler = onInvalidate.withLock { handler in
            defer { handler = nil }
            return handler
        }
        handler?()
    }
}
