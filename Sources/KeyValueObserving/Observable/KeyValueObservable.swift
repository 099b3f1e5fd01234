import Synchronization
import _KeyValueObservingShims

/// The base class of observable objects: Foundation's `NSObject` for key-value observing, without
/// the Objective-C runtime.
///
/// Subclass it and mark the properties that notify with `@Observed`:
///
/// ```swift
/// final class AudioPlayer: KeyValueObservable {
///     @Observed var volume = 0.5
/// }
///
/// let player = AudioPlayer()
/// let token = player.observe(\.volume, options: [.new]) { player, change in
///     print(change.newValue!)
/// }
/// player.volume = 0.7   // prints 0.7
/// ```
///
/// An instance costs one pointer more than an empty class until the first observer registers; only
/// then is its observer registry allocated. The class imposes no isolation: subclasses choose their
/// own (a `@MainActor` subclass works, and its handlers run wherever its properties are set).
///
/// `KeyValueObservable` is not `Sendable`; its registry is thread-safe, so registration, removal and
/// notification may happen on any thread, while the property values follow the subclass's rules.
open class KeyValueObservable {
    /// The observer registry, `nil` until the first registration. Owned (+1) by this object.
    @usableFromInline
    final let _kvoRegistry = Atomic<Unmanaged<_ObserverRegistry>?>(nil)

    /// Not `@inlinable`: the optimiser never lays an instance out statically, so every instance is
    /// in a heap block whose size the C library can tell (`_registryCreatingIfNeeded`).
    public init() {}

    /// The computed keys of this class and, for each, the keys its value is computed from (the
    /// `keyPathsForValuesAffecting<Key>` of Foundation, as one typed table).
    ///
    /// Observers of a computed key are notified whenever one of its inputs changes, with the value
    /// computed before the change as `oldValue` (and in `.prior` notifications) and after it as
    /// `newValue`. Inputs may themselves be computed keys listed here (they are expanded, and a cycle
    /// is reported through `KeyValueObservingDiagnosticCenter`), and may reach into child objects
    /// (`\AppState.settings.username`, followed as the child is replaced). Each class's table is
    /// merged with its superclasses' tables, so an override need not repeat them; a key declared again
    /// by a subclass gets the inputs of both declarations.
    ///
    /// ```swift
    /// final class Contact: KeyValueObservable {
    ///     @Observed var givenName = "Ada"
    ///     @Observed var familyName = "Lovelace"
    ///     var sortName: String { "\(familyName), \(givenName)" }
    ///
    ///     override class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
    ///         [\Contact.sortName: [\Contact.givenName, \Contact.familyName]]
    ///     }
    /// }
    /// ```
    ///
    /// Key-path literals make a renamed property a compile error, unlike Foundation's string names.
    open class var keyPathsAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [:]
    }

    /// Properties that a computed key reads on purpose without being notified by them: the
    /// deliberate omissions from `keyPathsAffecting`, which its check then does not report.
    ///
    /// When a dependent key is first observed, the `@Observed` properties its getter reads are compared
    /// with what its declared inputs read; a property read but not covered makes the key stale when it
    /// changes, and is reported through `KeyValueObservingDiagnosticCenter` (`.incompleteDependencies`). The
    /// check sees only the branch the getter takes at that moment: an input read only on another
    /// branch is not caught.
    ///
    /// ```swift
    /// override class var keyPathsNotAffecting: [AnyKeyPath: [AnyKeyPath]] {
    ///     [\Car.summary: [\Car.odometer]]   // shown, but not worth a notification per metre
    /// }
    /// ```
    open class var keyPathsNotAffecting: [AnyKeyPath: [AnyKeyPath]] {
        [:]
    }

    /// Names for this class's computed keys, used in logs, diagnostics, `KeyValueAnyKeyChange.keyName`
    /// and `observationInfo`.
    ///
    /// `@Observed` properties are named automatically (`"speed"`), and so are paths through them
    /// (`"engine.rpm"`); a computed property has no name at run time on Linux, so it is described by
    /// its types (`"computed String property of Car"`) unless it is listed here. Merged with the
    /// superclasses' tables.
    ///
    /// ```swift
    /// override class var keyPathNames: [AnyKeyPath: String] {
    ///     [\Car.summary: "summary"]
    /// }
    /// ```
    open class var keyPathNames: [AnyKeyPath: String] {
        [:]
    }

    /// Whether setting the `@Observed` property `key` notifies its observers by itself (`true`, the
    /// default). Return `false` for a key whose changes the class reports itself, with
    /// `willChangeValue(for:)` and `didChangeValue(for:)`, for example only when the value really
    /// changed.
    ///
    /// ```swift
    /// override class func automaticallyNotifiesObservers(for key: AnyKeyPath) -> Bool {
    ///     key == \Account.balance ? false : super.automaticallyNotifiesObservers(for: key)
    /// }
    /// ```
    ///
    /// `key` is the key path of the declaring class (`\Superclass.property` for an inherited
    /// property). It is asked when an observer first registers for the key on an object and, for
    /// observers of every key (`observeAnyKey`), at the key's first set on an object; the answer is
    /// kept, so give the same answer every time.
    open class func automaticallyNotifiesObservers(for key: AnyKeyPath) -> Bool {
        true
    }

    deinit {
        if let registry = _kvoRegistry.load(ordering: .acquiring) {
            registry.takeRetainedValue().tearDown()
        }
    }

    /// The registry, created on first use. Creation races are settled by compare-and-exchange.
    @usableFromInline
    final func _registryCreatingIfNeeded() -> _ObserverRegistry {
        if let registry = _kvoRegistry.load(ordering: .acquiring) {
            return registry.takeUnretainedValue()
        }
        // `self` is in a block of the C library's allocator (`_kvo_allocation_size`), as every
        // object the runtime allocates: not promoted to the stack (it escaped into this call, which
        // clients cannot inline) nor laid out statically by the optimiser, which takes only
        // objects whose initialiser it can see (`init()` below is not `@inlinable`, and must not
        // become so) and whose stored properties are constants it can fold (`_kvoRegistry` is an
        // `Atomic`).
        let size = _kvo_allocation_size(UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque()))
        let created = Unmanaged.passRetained(_ObserverRegistry(storageEnd: Int(size)))
        let (exchanged, original) = _kvoRegistry.compareExchange(
            expected: nil,
            desired: created,
            ordering: .acquiringAndReleasing
        )
        if exchanged {
            return created.takeUnretainedValue()
        }
        created.release()
        return original!.takeUnretainedValue()
    }

    /// The registry if one exists, without creating it.
    final var _existingRegistry: _ObserverRegistry? {
        _kvoRegistry.load(ordering: .acquiring)?.takeUnretainedValue()
    }
}

/// The protocol through which `observe` hands handlers the concrete `Self` type, the way Foundation's
/// KVO overlay does with `_KeyValueCodingAndObserving`. Only `KeyValueObservable` conforms; you do not
/// conform to it yourself.
public protocol KeyValueObservableProtocol: AnyObject {}

extension KeyValueObservable: KeyValueObservableProtocol {}
