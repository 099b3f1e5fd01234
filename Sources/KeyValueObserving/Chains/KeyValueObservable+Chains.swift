/// The two- and three-segment chain overloads of `observe` and `values(for:)`, from before key
/// paths of any depth could be observed directly. They are thin wrappers: each builds one key path
/// through the segments and observes it like `\.currentItem?.status`.
extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Observes a value reached through an observable intermediate that may be nil.
    @available(*, deprecated, message: "observe the path directly: observe(\\.currentItem?.status, options:changeHandler:)")
    @inlinable
    public func observe<Intermediate: KeyValueObservable, Value>(
        _ first: KeyPath<Self, Intermediate?>,
        _ second: KeyPath<Intermediate, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value?>) -> Void
    ) -> KeyValueObservation {
        observe(\Self.[_chain: first, second], options: options, fileID: fileID, line: line, changeHandler: changeHandler)
    }

    /// Observes a value reached through an observable intermediate that is never nil.
    @available(*, deprecated, message: "observe the path directly: observe(\\.playlist.title, options:changeHandler:)")
    @inlinable
    public func observe<Intermediate: KeyValueObservable, Value>(
        _ first: KeyPath<Self, Intermediate>,
        _ second: KeyPath<Intermediate, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        observe(first.appending(path: second), options: options, fileID: fileID, line: line, changeHandler: changeHandler)
    }

    /// Observes a value reached through two observable intermediates, either of which may be nil.
    @available(*, deprecated, message: "observe the path directly: observe(\\.currentItem?.asset?.duration, options:changeHandler:)")
    @inlinable
    public func observe<First: KeyValueObservable, Second: KeyValueObservable, Value>(
        _ first: KeyPath<Self, First?>,
        _ second: KeyPath<First, Second?>,
        _ third: KeyPath<Second, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value?>) -> Void
    ) -> KeyValueObservation {
        observe(\Self.[_chain: first, second, third], options: options, fileID: fileID, line: line, changeHandler: changeHandler)
    }

    /// Observes a value reached through two observable intermediates that are never nil.
    @available(*, deprecated, message: "observe the path directly: observe(\\.a.b.c, options:changeHandler:)")
    @inlinable
    public func observe<First: KeyValueObservable, Second: KeyValueObservable, Value>(
        _ first: KeyPath<Self, First>,
        _ second: KeyPath<First, Second>,
        _ third: KeyPath<Second, Value>,
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        observe(
            first.appending(path: second).appending(path: third), options: options, fileID: fileID, line: line, changeHandler: changeHandler
        )
    }

    /// The values reached through an observable intermediate, as an `AsyncSequence`.
    @available(*, deprecated, message: "ask for the path directly: values(for: \\.currentItem?.status)")
    public func values<Intermediate: KeyValueObservable, Value: Sendable>(
        for first: KeyPath<Self, Intermediate?>,
        _ second: KeyPath<Intermediate, Value>,
        options: KeyValueObservingOptions = [.initial, .new],
        buffering: KeyValueObservationBuffering = .unbounded,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueObservationValues<Value?> {
        values(for: \Self.[_chain: first, second], options: options, buffering: buffering, fileID: fileID, line: line)
    }

    /// `first?.second` as one key-path component, so that a chain through an optional intermediate
    /// is one key path (Swift cannot append a key path through an optional). Used by the deprecated
    /// chain overloads; write `\.first?.second` instead.
    public subscript<Intermediate: KeyValueObservable, Value>(
        _chain first: KeyPath<Self, Intermediate?>,
        _ second: KeyPath<Intermediate, Value>
    ) -> Value? {
        self[keyPath: first]?[keyPath: second]
    }

    /// `first?.second?.third` as one key-path component (see `subscript(_chain:_:)`).
    public subscript<First: KeyValueObservable, Second: KeyValueObservable, Value>(
        _chain first: KeyPath<Self, First?>,
        _ second: KeyPath<First, Second?>,
        _ third: KeyPath<Second, Value>
    ) -> Value? {
        self[keyPath: first]?[keyPath: second]?[keyPath: third]
    }
}
