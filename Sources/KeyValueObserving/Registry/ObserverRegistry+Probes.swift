#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The registration probe: which `@Observed` properties reading a key touches.

extension _ObserverRegistry {
    /// An `@Observed` property read during a probe: the key path its accessor received, the type of
    /// its storage (`Observed<Value>`) and of its value, and whether that is zero-sized.
    struct ProbedRead {
        let key: AnyKeyPath
        let storageType: Any.Type
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
        let thread = pthread_self()
        withState { $0.withRecord(of: thread) { $0.probes.append([]) } }
        probeCount.add(1, ordering: .relaxed)
        read()
        probeCount.subtract(1, ordering: .relaxed)
        return withState { $0.withRecord(of: thread) { $0.probes.popLast() ?? [] } }
    }

    /// Called by the `@Observed` getter while a probe runs somewhere on this object.
    @usableFromInline
    func recordRead(
        key: () -> AnyKeyPath,
        storageType: Any.Type,
        valueType: Any.Type,
        isZeroSized: Bool,
        storageKey: AnyKeyPath?,
        storageOffset: Int?
    ) {
        let key = key()
        let read = ProbedRead(key: key, storageType: storageType, valueType: valueType, isZeroSized: isZeroSized)
        // An `@Observed` property is named after its storage (explicitly notified keys are named by
        // their class).
        if let storageKey {
            _KeyNames.learn(key, storageKey: storageKey)
        } else if let storageOffset, !isZeroSized {
            _KeyNames.learn(key, storageOffset: storageOffset)
        }
        let thread = pthread_self()
        readState { state in
            if let index = state.threads.firstIndex(where: { pthread_equal($0.thread, thread) != 0 }),
                !state.threads[index].probes.isEmpty
            {
                state.threads[index].probes[state.threads[index].probes.endIndex - 1].append(read)
            }
        }
    }
}
