/// How an observation sequence buffers values its consumer has not taken yet.
public struct KeyValueObservationBuffering: Sendable, Hashable {
    enum Policy: Hashable {
        case unbounded
        case newest(Int)
    }

    let policy: Policy

    /// Keep every value, in order (the default, KVO's rule: no change is lost). A consumer slower
    /// than the changes makes the buffer grow by one element per change until it catches up.
    public static let unbounded = KeyValueObservationBuffering(policy: .unbounded)

    /// Keep only the newest `count` values not yet taken; older ones are dropped. Memory stays bounded
    /// by `count` elements whatever the consumer's pace.
    public static func newest(_ count: Int) -> KeyValueObservationBuffering {
        precondition(count > 0, "KeyValueObservationBuffering.newest(_:) needs a count of at least 1, got \(count)")
        return KeyValueObservationBuffering(policy: .newest(count))
    }

    func streamPolicy<Element>(for _: Element.Type) -> AsyncStream<Element>.Continuation.BufferingPolicy {
        switch policy {
        case .unbounded: .unbounded
        case .newest(let count): .bufferingNewest(count)
        }
    }
}

/// The values of an observed key, as an `AsyncSequence`: `values(for:)`, the `publisher(for:)` of this
/// package. It finishes when the observed object is deallocated; the observation ends when the
/// sequence finishes, when the consuming task is cancelled, or when the sequence is dropped.
public struct KeyValueObservationValues<Value>: AsyncSequence {
    public typealias Element = Value

    let stream: AsyncStream<Value>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Value>.AsyncIterator

        public mutating func next() async -> Value? {
            await base.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator())
    }
}

extension KeyValueObservationValues: Sendable where Value: Sendable {}

/// The changes of an observed key, as an `AsyncSequence`: `changes(for:)`. Same lifetime rules as
/// `KeyValueObservationValues`.
public struct KeyValueObservationChanges<Value>: AsyncSequence {
    public typealias Element = KeyValueObservedChange<Value>

    let stream: AsyncStream<KeyValueObservedChange<Value>>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<KeyValueObservedChange<Value>>.AsyncIterator

        public mutating func next() async -> KeyValueObservedChange<Value>? {
            await base.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator())
    }
}

extension KeyValueObservationChanges: Sendable where Value: Sendable {}

/// The writing end of a sequence, shared with the handler (which may run on any thread).
final class _SequenceSink<Element: Sendable>: @unchecked Sendable {
    // Invariant: `AsyncStream.Continuation` is thread-safe; the sink only forwards to it.
    let continuation: AsyncStream<Element>.Continuation

    init(_ continuation: AsyncStream<Element>.Continuation) {
        self.continuation = continuation
    }

    func yield(_ element: Element) {
        continuation.yield(element)
    }

    func finish() {
        continuation.finish()
    }

    /// Yields the value a change carries: the old one for a prior notification (the sequences ask
    /// for `.old` with `.prior`), else the new one.
    func yieldValue(of change: KeyValueObservedChange<Element>) {
        if change.isPrior {
            if let old = change.oldValue { yield(old) }
        } else if let new = change.newValue {
            yield(new)
        }
    }
}

extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// The values of `keyPath` as an `AsyncSequence`: with the default `[.initial, .new]`, the current
    /// value, then the value after every assignment, equal values included (KVO's rule).
    ///
    /// ```swift
    /// for await volume in player.values(for: \.volume) {
    ///     print(volume)   // 0.5, then every new volume, until the player is deallocated
    /// }
    /// ```
    ///
    /// With `.prior`, the value before each change comes first (`[.prior, .new]` yields the value
    /// before and after each change); without `.initial`, nothing comes until a change. The sequence
    /// finishes when the object is deallocated, so `for await` loops end; the observation is removed
    /// when the sequence finishes, when the consuming task is cancelled, or when it is dropped.
    /// Registration happens when this method is called. The values cross into the consuming task, so
    /// they must be `Sendable`.
    ///
    /// - Parameters:
    ///   - keyPath: The key to observe.
    ///   - options: What to yield: `.initial`, `.prior`, `.new`.
    ///   - buffering: `.unbounded` (every value, in order; memory grows while the consumer
    ///     lags) or `.newest(n)` (memory bounded, older values dropped).
    ///   - fileID: The caller's file, named in diagnostics; leave the default.
    ///   - line: The caller's line, named in diagnostics; leave the default.
    public func values<Value: Sendable>(
        for keyPath: KeyPath<Self, Value>,
        options: KeyValueObservingOptions = [.initial, .new],
        buffering: KeyValueObservationBuffering = .unbounded,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueObservationValues<Value> {
        KeyValueObservationValues(
            stream: _valueStream(for: keyPath, options: options, isDuplicate: nil, buffering: buffering, fileID: fileID, line: line))
    }

    /// `values(for:options:buffering:)` without the values equal to the previous one.
    public func values<Value: Equatable & Sendable>(
        for keyPath: KeyPath<Self, Value>,
        options: KeyValueObservingOptions = [.initial, .new],
        buffering: KeyValueObservationBuffering = .unbounded,
        removingDuplicates: Bool,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueObservationValues<Value> {
        let isDuplicate: (@Sendable (Value, Value) -> Bool)? =
            removingDuplicates ? { @Sendable (old: Value, new: Value) in old == new } : nil
        return KeyValueObservationValues(
            stream: _valueStream(
                for: keyPath,
                options: options,
                isDuplicate: isDuplicate,
                buffering: buffering,
                fileID: fileID,
                line: line
            ))
    }

    /// The changes of `keyPath` as an `AsyncSequence` of `KeyValueObservedChange`, with the given
    /// options (default `[.old, .new]`). Same lifetime and buffering rules as `values(for:)`.
    public func changes<Value: Sendable>(
        for keyPath: KeyPath<Self, Value>,
        options: KeyValueObservingOptions = [.old, .new],
        buffering: KeyValueObservationBuffering = .unbounded,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueObservationChanges<Value> {
        _changes(for: keyPath, options: options, isDuplicate: nil, buffering: buffering, fileID: fileID, line: line)
    }

    /// `changes(for:options:buffering:)` without the changes whose new value equals the old one.
    public func changes<Value: Equatable & Sendable>(
        for keyPath: KeyPath<Self, Value>,
        options: KeyValueObservingOptions = [.old, .new],
        buffering: KeyValueObservationBuffering = .unbounded,
        removingDuplicates: Bool,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueObservationChanges<Value> {
        let isDuplicate: (@Sendable (Value, Value) -> Bool)? =
            removingDuplicates ? { @Sendable (old: Value, new: Value) in old == new } : nil
        return _changes(for: keyPath, options: options, isDuplicate: isDuplicate, buffering: buffering, fileID: fileID, line: line)
    }

    func _changes<Value: Sendable>(
        for keyPath: KeyPath<Self, Value>,
        options: KeyValueObservingOptions,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        buffering: KeyValueObservationBuffering,
        fileID: String,
        line: UInt
    ) -> KeyValueObservationChanges<Value> {
        let (stream, continuation) = AsyncStream<KeyValueObservedChange<Value>>.makeStream(
            bufferingPolicy: buffering.streamPolicy(for: KeyValueObservedChange<Value>.self)
        )
        let sink = _SequenceSink(continuation)
        let token = _observe(keyPath, options: options, isDuplicate: isDuplicate, fileID: fileID, line: line) { _, change in
            sink.yield(change)
        }
        _finish(sink, with: token)
        return KeyValueObservationChanges(stream: stream)
    }

    func _valueStream<Value: Sendable>(
        for keyPath: KeyPath<Self, Value>,
        options: KeyValueObservingOptions,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        buffering: KeyValueObservationBuffering,
        fileID: String,
        line: UInt
    ) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: buffering.streamPolicy(for: Value.self))
        let sink = _SequenceSink(continuation)
        // Values travel in `newValue`, and in `oldValue` for prior notifications.
        var internalOptions = options.union(.new)
        if options.contains(.prior) { internalOptions.insert(.old) }
        let token = _observe(keyPath, options: internalOptions, isDuplicate: isDuplicate, fileID: fileID, line: line) { _, change in
            sink.yieldValue(of: change)
        }
        _finish(sink, with: token)
        return stream
    }

    /// Ties the sequence's end to the observation's: the object's deallocation finishes the sequence,
    /// and the sequence's termination (finished, cancelled, dropped) invalidates the token.
    func _finish<Element: Sendable>(_ sink: _SequenceSink<Element>, with token: KeyValueObservation) {
        _finishStream(sink, with: token)
    }
}

/// `_finish(_:with:)`, for sequences made outside an observable object's extension.
private func _finishStream<Element: Sendable>(_ sink: _SequenceSink<Element>, with token: KeyValueObservation) {
    sink.continuation.onTermination = { _ in token.invalidate() }
    if let registry = token.registry, !registry.onObjectDeinit(id: token.id, { sink.finish() }) {
        sink.finish()
    }
}

/// A sequence of what an observation hands it, for a module's own sequences over the core's
/// observations (a defaults store's changes): `register` makes the observation, given the function
/// that yields an element. The sequence has the lifetime of `values(for:)`'s: it finishes when the
/// observed object is deallocated, and its termination ends the observation.
package func _observationStream<Element: Sendable>(
    buffering: KeyValueObservationBuffering,
    _ register: (_ yield: @escaping @Sendable (Element) -> Void) -> KeyValueObservation
) -> AsyncStream<Element> {
    let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: buffering.streamPolicy(for: Element.self))
    let sink = _SequenceSink(continuation)
    _finishStream(sink, with: register { sink.yield($0) })
    return stream
}
