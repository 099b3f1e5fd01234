/// The values of an observed key for a display, at most one per interval
/// (`values(for:throttledTo:)`): the current value first, then the latest value each time the
/// consumer asks, no sooner than the interval after the previous one, and always the final one.
///
/// The values are delivered in the consuming task, so on its actor. The sequence finishes when the
/// observed object is deallocated (after the last value); the observation ends when the sequence
/// finishes, when the consuming task is cancelled, or when the sequence and its iterators are
/// dropped. One task at a time may iterate it.
public struct KeyValueThrottledValues<Value: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Value

    let source: _ThrottledValuesSource<Value>

    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: _ThrottledValuesSource<Value>

        /// Waits for a change (or returns the pending one), no sooner than the interval after the
        /// previous value; `nil` once the object is gone or the task is cancelled.
        public mutating func next() async -> Value? {
            let source = self.source
            return await withTaskCancellationHandler {
                await withCheckedContinuation { source.throttle.demand($0) }
            } onCancel: {
                source.cancel()
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(source: source)
    }
}

/// What a throttled sequence and its iterators share: the throttle and the observation feeding it,
/// ended when the last of them goes away.
final class _ThrottledValuesSource<Value: Sendable>: Sendable {
    let throttle: _Throttle<Value>
    let token: KeyValueObservation

    init(throttle: _Throttle<Value>, token: KeyValueObservation) {
        self.throttle = throttle
        self.token = token
    }

    func cancel() {
        token.invalidate()
        throttle.stop()
    }

    deinit {
        cancel()
    }
}
