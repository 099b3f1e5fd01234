#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif
import _KeyValueObservingShims

/// One input of a tracked observation: an observable key of one object that its last evaluation
/// read, and the observer that tells the tracker of its changes.
struct _TrackedInput {
    /// The object, held strongly while it is read, so that its identity cannot be reused by another
    /// object; `nil` for the observation's root, which is not retained (KVO's rule: the token keeps
    /// no model alive; see `_UnretainedReference`).
    let object: KeyValueObservable?
    let objectID: ObjectIdentifier
    /// The storage offset (`@Observed`, optimised build) or explicit key offset; `nil` when only the
    /// key path identifies the property (a debug build's `@Observed` getter).
    let offset: Int?
    let key: AnyKeyPath?
    let registry: _ObserverRegistry
    let id: UInt64

    /// Whether `read` is a read of this input.
    @inline(__always)
    func matches(_ read: _ObservableRead) -> Bool {
        guard objectID == ObjectIdentifier(read.object), offset == read.offset else { return false }
        return offset != nil || key == read.key()
    }

    /// The observer's registration: ids are unique per registry only.
    var registration: RegistrationID {
        RegistrationID(registry: ObjectIdentifier(registry), id: id)
    }

    struct RegistrationID: Hashable {
        let registry: ObjectIdentifier
        let id: UInt64
    }

    var identity: _TrackedInputKey {
        _TrackedInputKey(objectID: objectID, offset: offset ?? -1, key: offset == nil ? key : nil)
    }
}

/// An input's object and offset (-1 for none), for the comparison of a read with the input the
/// recorder expects. The thread's cursor (`_kvo_read_is_expected`, in C) reads an array of them as
/// pairs of pointer-sized words, object address first: `isLaidOutAsTheCursorReadsIt` checks it.
struct _TrackedInputIdentity {
    let objectID: ObjectIdentifier
    let offset: Int

    /// Whether the layout is the cursor's: two pointer-sized words, the object's address, then the
    /// offset (checked when a tracker is made; the figures are constants, so the check is free).
    static var isLaidOutAsTheCursorReadsIt: Bool {
        MemoryLayout<Self>.size == 2 * MemoryLayout<Int>.size && MemoryLayout<Self>.stride == 2 * MemoryLayout<Int>.size
            && MemoryLayout<Self>.offset(of: \.offset) == MemoryLayout<Int>.size
            && MemoryLayout<ObjectIdentifier>.size == MemoryLayout<UnsafeRawPointer>.size
    }
}

/// What identifies an input among many (an evaluation that reads a thousand elements' names).
struct _TrackedInputKey: Hashable {
    let objectID: ObjectIdentifier
    let offset: Int
    let key: AnyKeyPath?

    init(objectID: ObjectIdentifier, offset: Int, key: AnyKeyPath?) {
        self.objectID = objectID
        self.offset = offset
        self.key = key
    }

    init(_ read: _ObservableRead) {
        self.init(objectID: ObjectIdentifier(read.object), offset: read.offset ?? -1, key: read.offset == nil ? read.key() : nil)
    }
}

/// The observer a tracked observation keeps on an `@Observed` input: a direct observer of the
/// property's type that ignores the value (with no other kind of observer there, a set takes the
/// plain delivery, the cheapest), told of the change after the store, and before it too when the
/// observation wants `.prior`.
final class _TrackedDirectInput<Value>: _DirectObserver<Value>, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`); the tracker is thread-safe.
    /// Held strongly (a weak reference would cost a weak load per change): the cycle through the
    /// tracker's inputs ends when the input is removed, which invalidation and the root's death do
    /// to all of them.
    private let tracker: _TrackerCore

    init(id: UInt64, tracker: _TrackerCore) {
        self.tracker = tracker
        super.init(id: id, options: tracker.wantsPrior ? [.prior] : [], rootType: nil, isPathFollower: true)
    }

    override func handler(_ object: AnyObject, _ change: KeyValueObservedChange<Value>) {
        guard isActive else { return }
        // Looked at only when `.prior` was asked for: reading the change is unspecialised code here.
        if tracker.wantsPrior, change.isPrior {
            tracker.inputWillChange()
        } else {
            tracker.inputDidChange()
        }
    }
}

/// The observer a tracked observation keeps on an explicitly notified input (a progress key, a
/// defaults key), whose notifier may pass values of another type than its getter returns: told
/// that the key is about to change (if the observation wants `.prior`) and has changed, with no
/// value.
final class _TrackedSignalInput: _ObserverEntry, @unchecked Sendable {
    // Invariant: immutable after init (see `_ObserverEntry`); the tracker is thread-safe.
    /// Held strongly, as `_TrackedDirectInput` holds it.
    private let tracker: _TrackerCore

    init(id: UInt64, tracker: _TrackerCore) {
        self.tracker = tracker
        super.init(id: id, options: tracker.wantsPrior ? [.prior] : [], isDirect: false, isPathFollower: true)
    }

    override func willChange(_ object: AnyObject, valueHasChanged: Bool) -> Any? {
        if isActive { tracker.inputWillChange() }
        return nil
    }

    override func didChange(_ object: AnyObject, old: Any?) {
        if isActive { tracker.inputDidChange() }
    }
}

/// The recorder of one evaluation of a tracked observation: compares each read with the inputs of
/// the previous evaluation, in order, and while they match does nothing else (a change of an
/// input's value that leaves the expression reading the same keys re-registers nothing). From the
/// first read that differs, reads are looked up among the previous inputs (kept) or observed at
/// once, before the getter returns the value: a change another thread makes after the read is
/// then seen, and delivered after this evaluation.
///
/// Used by the tracker's owning thread only (see `_TrackerCore`).
final class _TrackingRecorder: _ReadRecorder {
    // Every field is the owning thread's (see `_TrackerCore`), so no access overlaps another:
    // `@exclusivity(unchecked)` spares a dynamic check per access.
    unowned(unsafe) let tracker: _TrackerCore
    /// The previous evaluation's inputs: the tracker's, which only `finish` replaces.
    @inline(__always) private var previous: [_TrackedInput] { tracker.inputs }
    @exclusivity(unchecked) private var matched = 0
    @exclusivity(unchecked) private var diverged = false
    @exclusivity(unchecked) private var current: [_TrackedInput] = []
    @exclusivity(unchecked) private var currentKeys: Set<_TrackedInputKey> = []
    @exclusivity(unchecked) private var previousIndex: [_TrackedInputKey: Int]?
    /// The root's identity: its input holds no reference.
    @exclusivity(unchecked) private var rootID: ObjectIdentifier?
    /// Whether the recorder is between `start` and `finish` (an expression that starts its own
    /// evaluation again is not recorded twice).
    @exclusivity(unchecked) private(set) var isRecording = false

    init(tracker: _TrackerCore) {
        self.tracker = tracker
    }

    func start(root: AnyObject) {
        matched = 0
        diverged = false
        rootID = ObjectIdentifier(root)
        isRecording = true
        begin()
    }

    // MARK: The thread's expected-read cursor
    //
    // While this is the innermost recorder and has not diverged, the thread's cursor
    // (`_kvo_set_expected_reads`) points at `identities[matched]`, and a getter that reads the
    // expected input moves it on by itself (`_kvo_read_is_expected`); `matched` is then taken
    // back from it (`pullCursor`) before anything here reads `matched`: in `record`, when a
    // recorder begins inside this one (`suspend`) and when the evaluation ends.

    /// Installs the cursor at `identities[matched]`, or none once the reads diverged or all were
    /// matched.
    private func pushCursor() {
        let identities = tracker.identities
        guard !diverged, matched < identities.count, let base = identities.baseAddress else {
            return _kvo_set_expected_reads(nil, nil)
        }
        _kvo_set_expected_reads(UnsafeMutableRawPointer(base + matched), UnsafeMutableRawPointer(base + identities.count))
    }

    /// Takes `matched` back from the thread's cursor (a null cursor means `matched` is current).
    private func pullCursor() {
        guard let cursor = _kvo_get_expected_read(), let base = tracker.identities.baseAddress else { return }
        matched = cursor.assumingMemoryBound(to: _TrackedInputIdentity.self) - base
    }

    override func resume() {
        pushCursor()
    }

    override func suspend() {
        pullCursor()
    }

    /// Ends the evaluation if it read exactly the previous evaluation's inputs (then `true`, and
    /// nothing changes); otherwise does nothing and returns `false` (`finish()` then ends it).
    @inline(__always)
    func finishReadingThePreviousInputs() -> Bool {
        pullCursor()
        guard !diverged, matched == tracker.identities.count else { return false }
        end()
        isRecording = false
        return true
    }

    /// Ends the evaluation: the inputs it read, or `nil` if they are the previous ones, and the
    /// previous inputs it no longer reads (to remove).
    func finish() -> (inputs: [_TrackedInput]?, removed: [_TrackedInput]) {
        pullCursor()
        end()
        isRecording = false
        guard diverged || matched != previous.count else { return (nil, []) }
        let inputs = diverged ? current : Array(previous[..<matched])
        current = []
        if !currentKeys.isEmpty { currentKeys = [] }
        previousIndex = nil
        let previous = previous
        if previous.isEmpty { return (inputs, []) }
        // Ids are per registry.
        if inputs.count <= Self.linearSearchLimit {
            return (inputs, previous.filter { old in !inputs.contains { $0.registration == old.registration } })
        }
        let kept = Set(inputs.map(\.registration))
        return (inputs, previous.filter { !kept.contains($0.registration) })
    }

    override func record(_ read: _ObservableRead) -> Bool {
        // Innermost, the cursor holds `matched`; otherwise `suspend` took it back.
        guard isInnermost else { return recordPastTheCursor(read) }
        pullCursor()
        defer { pushCursor() }
        return recordPastTheCursor(read)
    }

    /// `record`, with `matched` current.
    private func recordPastTheCursor(_ read: _ObservableRead) -> Bool {
        if !diverged {
            if matched < previous.count, previous[matched].matches(read) {
                matched += 1
                return true
            }
            // Read again (`a.x + a.x`): no difference.
            if previous[..<matched].contains(where: { $0.matches(read) }) { return true }
            diverged = true
            current = Array(previous[..<matched])
            // Room for as many inputs as the previous evaluation had, or a few: the appends below
            // then reallocate nothing for a small expression.
            current.reserveCapacity(Swift.max(previous.count, Self.initialCapacity))
        }
        if isKnown(read) { return true }
        if let index = indexInPrevious(of: read) {
            current.append(previous[index])
        } else if let input = tracker.observe(read, isRoot: rootID == ObjectIdentifier(read.object)) {
            current.append(input)
        }
        return true
    }

    /// The room `current` starts with when the reads diverge.
    private static let initialCapacity = 4

    /// Up to this many inputs are searched one by one; beyond, through a hash table.
    private static let linearSearchLimit = 8

    /// Whether this evaluation read `read` already.
    private func isKnown(_ read: _ObservableRead) -> Bool {
        if current.count <= Self.linearSearchLimit {
            return current.contains { $0.matches(read) }
        }
        if currentKeys.isEmpty { currentKeys = Set(current.map(\.identity)) }
        let key = _TrackedInputKey(read)
        if currentKeys.contains(key) { return true }
        currentKeys.insert(key)
        return false
    }

    /// Where the previous evaluation's inputs have `read`, if they do.
    private func indexInPrevious(of read: _ObservableRead) -> Int? {
        if previous.count <= Self.linearSearchLimit {
            return previous.firstIndex { $0.matches(read) }
        }
        if previousIndex == nil {
            previousIndex = Dictionary(previous.enumerated().map { ($1.identity, $0) }, uniquingKeysWith: { first, _ in first })
        }
        return previousIndex?[_TrackedInputKey(read)]
    }
}

extension _TrackerCore {
    /// A direct observer of a property of type `Value` for this tracker (the cheapest kind on the
    /// set path).
    private static func directInput<Value>(of _: Value.Type, id: UInt64, tracker: _TrackerCore) -> _ObserverEntry {
        _TrackedDirectInput<Value>(id: id, tracker: tracker)
    }

    /// Observes `read` for this tracker, or returns `nil` if its object is going away.
    func observe(_ read: _ObservableRead, isRoot: Bool) -> _TrackedInput? {
        let object = read.object
        let registry = object._registryCreatingIfNeeded()
        let id = registry.makeID()
        let key = read.key()
        // An explicit key's slot is resolved from the start, as its registrations' are; an
        // `@Observed` one learns its offset at the first set, as a registration's does.
        if read.isExplicit, let offset = read.offset { registry.declareOffset(offset, for: key) }
        let notifiesAutomatically = read.isExplicit || type(of: object).automaticallyNotifiesObservers(for: key)
        // An explicit key's notifier may pass values of another type than its getter's (a defaults
        // key's entry): its inputs are signal entries, which take none.
        let entry =
            read.isExplicit ? _TrackedSignalInput(id: id, tracker: self) : Self.directInput(of: read.valueType, id: id, tracker: self)
        guard registry.add(entry, for: .observedProperty(key, isZeroSized: read.isZeroSized), notifiesAutomatically: notifiesAutomatically)
        else { return nil }
        return _TrackedInput(
            object: isRoot ? nil : object, objectID: ObjectIdentifier(object), offset: read.offset, key: key, registry: registry, id: id)
    }
}
