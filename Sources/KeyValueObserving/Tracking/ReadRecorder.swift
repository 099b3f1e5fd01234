import _KeyValueObservingShims

/// One observable read, as the getter of an `@Observed` property or of an explicitly notified key
/// reports it while its thread records (`_ReadRecorder`).
@usableFromInline
struct _ObservableRead {
    /// The object read.
    let object: KeyValueObservable
    /// The property's storage offset (`@Observed`, in an optimised build) or the key's made-up
    /// offset (explicitly notified keys); `nil` where the offset is unknown (a debug build's
    /// `@Observed` getter), then the key path identifies the property.
    let offset: Int?
    /// The key path the accessor received (`\Root.property`), made only when it is needed.
    let key: () -> AnyKeyPath
    /// The property's value type.
    let valueType: Any.Type
    let isZeroSized: Bool
    /// Whether the key is notified by its class, with explicit values (`_ExplicitlyNotifiedKeys`).
    let isExplicit: Bool
    /// A debug build's storage key path (`\Car._speed`), which names the property.
    let storageKey: AnyKeyPath?
}

/// A thread's recorder of the observable reads it makes: a registration's probe (which `@Observed`
/// keys of one object reading a key path touches) or a tracked observation's evaluation. Recorders
/// nest per thread (the thread's slot `_kvo_get_thread_recorder()` points at the innermost, each at
/// the one it replaced; the innermost also owns the thread's expected-read cursor);
/// `_kvo_recording_threads` counts the threads that have one, so that a getter whose thread
/// records nothing pays one load and one test.
///
/// Not thread-safe: a recorder is used by its own thread only, between `begin()` and `end()`.
@usableFromInline
class _ReadRecorder {
    /// The recorder this one replaced on its thread. Its own thread's only (no overlapping access).
    @exclusivity(unchecked) private var outer: UnsafeMutableRawPointer?

    /// Makes this the thread's innermost recorder.
    final func begin() {
        outer = _kvo_get_thread_recorder()
        if let outer {
            Unmanaged<_ReadRecorder>.fromOpaque(outer)._withUnsafeGuaranteedRef { $0.suspend() }
        } else {
            _kvo_add_recording_threads(1)
        }
        _kvo_set_thread_recorder(Unmanaged.passUnretained(self).toOpaque())
        resume()
    }

    /// Puts back the recorder `begin()` replaced.
    final func end() {
        _kvo_set_thread_recorder(outer)
        if let outer {
            Unmanaged<_ReadRecorder>.fromOpaque(outer)._withUnsafeGuaranteedRef { $0.resume() }
        } else {
            _kvo_set_expected_reads(nil, nil)
            _kvo_add_recording_threads(-1)
        }
        outer = nil
    }

    /// Whether this is its thread's innermost recorder.
    final var isInnermost: Bool {
        _kvo_get_thread_recorder() == Unmanaged.passUnretained(self).toOpaque()
    }

    /// Becomes the innermost recorder again (`begin`, or the end of a recorder nested in it):
    /// installs the reads it expects (`_kvo_set_expected_reads`); this one expects none.
    func resume() {
        _kvo_set_expected_reads(nil, nil)
    }

    /// Stops being the innermost recorder (another one begins inside it): takes back what the
    /// thread's expected-read cursor learned.
    func suspend() {}

    /// Records `read` if it is for this recorder; returns `false` to let the next recorder out
    /// have it.
    func record(_ read: _ObservableRead) -> Bool {
        false
    }

    /// Whether a read of `object`'s key at `offset` needs nothing more: this thread records
    /// nothing (another thread does), or its innermost recorder expected exactly that read next
    /// (`_kvo_read_is_expected`: a tracked re-evaluation that reads what the previous one read
    /// costs a comparison per read, no call and no reference count).
    @inline(__always)
    static func isExpectedOnThisThread(_ object: AnyObject, offset: Int?) -> Bool {
        guard let offset else { return _kvo_get_thread_recorder() == nil }
        return _kvo_read_is_expected(Unmanaged.passUnretained(object).toOpaque(), offset) != 0
    }

    /// Hands `read` to the innermost recorder of this thread that takes it.
    static func recordOnThisThread(_ read: _ObservableRead) {
        var next = _kvo_get_thread_recorder()
        while let pointer = next {
            let recorder = Unmanaged<_ReadRecorder>.fromOpaque(pointer).takeUnretainedValue()
            if recorder.record(read) { return }
            next = recorder.outer
        }
    }
}

/// A registration probe's recorder: the `@Observed` keys of one object (its registry) that a read
/// touches, in order, duplicates included.
final class _ProbeRecorder: _ReadRecorder {
    private let registry: _ObserverRegistry
    private(set) var reads: [_ObserverRegistry.ProbedRead] = []

    init(registry: _ObserverRegistry) {
        self.registry = registry
    }

    override func record(_ read: _ObservableRead) -> Bool {
        guard read.object._kvoRegistry.load(ordering: .acquiring)?.toOpaque() == Unmanaged.passUnretained(registry).toOpaque()
        else { return false }
        reads.append(Self.learn(from: read, in: registry))
        return true
    }

    /// What a probe learns from `read`: an explicitly notified key's offset (declared in `registry`,
    /// the registry of the object read, if given) and an `@Observed` property's name; returns the read.
    static func learn(from read: _ObservableRead, in registry: _ObserverRegistry?) -> _ObserverRegistry.ProbedRead {
        let key = read.key()
        if read.isExplicit {
            if let offset = read.offset { registry?.declareOffset(offset, for: key) }
        } else if let storageKey = read.storageKey {
            // An `@Observed` property is named after its storage (explicitly notified keys are
            // named by their class).
            _KeyNames.learn(key, storageKey: storageKey)
        } else if let offset = read.offset, !read.isZeroSized {
            _KeyNames.learn(key, storageOffset: offset)
        }
        return _ObserverRegistry.ProbedRead(key: key, valueType: read.valueType, isZeroSized: read.isZeroSized)
    }
}

/// A dependency check's recorder (`checkDeclaredInputs`): the `@Observed` reads of every object that
/// a read touches, each with its object, so that reads through child objects and through the
/// elements of arrays are seen as well as the root's.
///
/// It takes the root's reads, as a probe of the root's registry does; other objects' reads also go
/// on to the recorders outside it, as they do past such a probe.
final class _EveryObjectProbeRecorder: _ReadRecorder {
    private let root: KeyValueObservable
    private(set) var reads: [_ObservationRoute.ObjectRead] = []

    init(root: KeyValueObservable) {
        self.root = root
    }

    override func record(_ read: _ObservableRead) -> Bool {
        let isRoot = read.object === root
        // Only the root's registry learns offsets here: the others' registries are not created.
        reads.append((read.object, _ProbeRecorder.learn(from: read, in: isRoot ? root._existingRegistry : nil)))
        return isRoot
    }

    /// Runs `read` and returns the `@Observed` reads it made on this thread, of `root` and of any
    /// other object, in order, duplicates included.
    static func probe(from root: KeyValueObservable, _ read: () -> Void) -> [_ObservationRoute.ObjectRead] {
        let recorder = _EveryObjectProbeRecorder(root: root)
        recorder.begin()
        read()
        recorder.end()
        return recorder.reads
    }
}

extension _ObserverRegistry {
    /// An `@Observed` property read during a probe: the key path its accessor received, the type of
    /// its value, and whether that is zero-sized.
    struct ProbedRead {
        let key: AnyKeyPath
        let valueType: Any.Type
        let isZeroSized: Bool

        /// Whether the value is an observable object (or an optional one): a path may continue
        /// through it.
        var holdsObservableObject: Bool {
            _unwrapped(valueType) is KeyValueObservable.Type
        }
    }

    /// Runs `read` (which reads the observed key once) and returns the `@Observed` keys of this object
    /// that it read on this thread, in order, duplicates included.
    func probe(_ read: () -> Void) -> [ProbedRead] {
        let recorder = _ProbeRecorder(registry: self)
        recorder.begin()
        read()
        recorder.end()
        return recorder.reads
    }
}

extension Observed {
    /// The `@Observed` getter's report of a read while its thread records (`_kvo_is_recording()`):
    /// out of line, so that the getter stays a load, a test and the read.
    @usableFromInline
    @inline(never)
    static func _recordRead<EnclosingSelf: KeyValueObservable>(
        of object: EnclosingSelf, storageOffset: Int?, storageKey: AnyKeyPath?, key: () -> AnyKeyPath
    ) {
        // The common case, in a frame of its own that saves no registers and has one early return:
        // its recorder expected exactly this read. Zero-sized properties may share their offset:
        // their key path tells them apart, in `_recordUnexpectedRead`. (Through
        // `isExpectedOnThisThread`, whose second early return the optimiser merges with this one,
        // or with the offset made optional here, a jump more per read: the gate's
        // `tracked-set-3-reads` measures it.)
        if let storageOffset, MemoryLayout<Value>.size != 0,
            _kvo_read_is_expected(Unmanaged.passUnretained(object).toOpaque(), storageOffset) != 0
        {
            return
        }
        _recordUnexpectedRead(of: object, storageOffset: storageOffset, storageKey: storageKey, key: key)
    }

    /// `_recordRead`, for a read the thread's recorder did not expect, or one without an offset
    /// (which may find that this thread records nothing).
    @inline(never)
    static func _recordUnexpectedRead<EnclosingSelf: KeyValueObservable>(
        of object: EnclosingSelf, storageOffset: Int?, storageKey: AnyKeyPath?, key: () -> AnyKeyPath
    ) {
        let offset = MemoryLayout<Value>.size == 0 ? nil : storageOffset
        if offset == nil, _kvo_get_thread_recorder() == nil { return }
        withoutActuallyEscaping(key) { key in
            _ReadRecorder.recordOnThisThread(
                _ObservableRead(
                    object: object, offset: offset, key: key,
                    valueType: Value.self,
                    isZeroSized: MemoryLayout<Value>.size == 0, isExplicit: false, storageKey: storageKey))
        }
    }
}

extension KeyValueObservable {
    /// The explicit key getter's report of a read while its thread records (see `_reportExplicitRead`).
    @usableFromInline
    @inline(never)
    final func _recordExplicitRead<Value>(offset: Int, key: () -> AnyKeyPath, of _: Value.Type) {
        if _ReadRecorder.isExpectedOnThisThread(self, offset: offset) { return }
        withoutActuallyEscaping(key) { key in
            _ReadRecorder.recordOnThisThread(
                _ObservableRead(
                    object: self, offset: offset, key: key, valueType: Value.self, isZeroSized: false,
                    isExplicit: true, storageKey: nil))
        }
    }
}
