extension KeyValueObservableProtocol where Self: KeyValueObservable {
    /// Observes the value of any expression over observable state: `expression` is evaluated now,
    /// every observable read it makes is recorded, and after any of them changes it is evaluated
    /// again, synchronously, on the changing thread, and `changeHandler` gets the previous and the
    /// new result.
    ///
    /// ```swift
    /// let token = model.observeTracking(options: [.old, .new]) { model in
    ///     model.appState.settings.username        // through a `settings` that may be replaced
    /// } changeHandler: { _, change in
    ///     print(change.oldValue!, "→", change.newValue!)
    /// }
    /// ```
    ///
    /// What is tracked is what the expression read: `@Observed` properties of any object at any
    /// depth (reached through arrays, dictionaries, optionals and computed properties, observed
    /// before or not), `ObservableProgress` keys and `DefaultsStore` subscripts; an array property's
    /// to-many changes are changes of it. Nothing is declared. After each evaluation the inputs are
    /// exactly what it read: an object it no longer reads is unobserved and released.
    ///
    /// - Delivery: after the store, as KVO's `didChange`; with `.prior`, before it too, with the
    ///   previous result as `oldValue`; `.initial` delivers the first result before this returns.
    /// - `coalescingChanges { … }`: inputs changed inside the batch give one evaluation and one
    ///   delivery at its end. A handler that changes an input gets the nested delivery first (KVO's
    ///   depth-first order).
    /// - Threads: deliveries of one observation never overlap, and each delivery's `oldValue` is the
    ///   previous delivery's `newValue`. A change made on another thread while a delivery runs is
    ///   delivered by the delivering thread after its handler returns, coalesced with others that
    ///   arrive meanwhile and without `.prior`; the writer does not wait. Inputs written from several
    ///   threads must be thread-safe themselves (progress keys, defaults keys, objects one actor owns).
    /// - The root (this object) is not retained and is passed to the expression: the token keeps no
    ///   model alive. When the root is deallocated the observation goes quiet.
    /// - An expression that reads nothing observable is reported once through
    ///   `KeyValueObservingDiagnosticCenter` (`.untrackedExpression`), naming `fileID` and `line`.
    ///
    /// - Returns: The token. Keep it: the observation ends when it is invalidated or deallocated.
    @inlinable
    public func observeTracking<Value>(
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        _ expression: @escaping @Sendable (Self) -> Value,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        _track(self, isRooted: true, options: options, isDuplicate: nil, fileID: fileID, line: line, expression, changeHandler).token
    }

    /// `observeTracking(options:_:changeHandler:)`, but a result equal to the previous one is not
    /// delivered (a `.prior` notification is still sent before the change that turns out to change
    /// nothing).
    @inlinable
    public func observeTracking<Value: Equatable & SendableMetatype>(
        options: KeyValueObservingOptions = [],
        removingDuplicates: Bool,
        fileID: String = #fileID,
        line: UInt = #line,
        _ expression: @escaping @Sendable (Self) -> Value,
        changeHandler: @escaping @Sendable (Self, KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        _track(
            self, isRooted: true, options: options, isDuplicate: _equality(removingDuplicates), fileID: fileID, line: line,
            expression, changeHandler
        ).token
    }

    /// The result of `expression` now, then after every change of what it read (see
    /// `observeTracking(options:_:changeHandler:)`). Finishes when this object is deallocated;
    /// ending the loop (or dropping the sequence) ends the observation.
    public func values<Value: Sendable>(
        tracking expression: @escaping @Sendable (Self) -> Value,
        buffering: KeyValueObservationBuffering = .unbounded,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueObservationValues<Value> {
        _trackedValues(expression, isDuplicate: nil, buffering: buffering, fileID: fileID, line: line)
    }

    /// `values(tracking:buffering:)`, without a result equal to the previous one.
    public func values<Value: Equatable & Sendable>(
        tracking expression: @escaping @Sendable (Self) -> Value,
        removingDuplicates: Bool,
        buffering: KeyValueObservationBuffering = .unbounded,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> KeyValueObservationValues<Value> {
        _trackedValues(expression, isDuplicate: _equality(removingDuplicates), buffering: buffering, fileID: fileID, line: line)
    }

    private func _trackedValues<Value: Sendable>(
        _ expression: @escaping @Sendable (Self) -> Value,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        buffering: KeyValueObservationBuffering,
        fileID: String,
        line: UInt
    ) -> KeyValueObservationValues<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: buffering.streamPolicy(for: Value.self))
        let sink = _SequenceSink(continuation)
        let (token, tracker) = _track(
            self, isRooted: true, options: [.initial, .new], isDuplicate: isDuplicate, fileID: fileID, line: line, expression,
            { _, change in if let value = change.newValue { sink.yield(value) } }, onQuiet: { sink.finish() })
        sink.continuation.onTermination = { _ in token.invalidate() }
        // Gone during the first evaluation already.
        if !tracker.isActive.load(ordering: .acquiring) { sink.finish() }
        return KeyValueObservationValues(stream: stream)
    }
}

extension KeyValueObservation {
    /// Observes an expression over several unrelated objects, with no root: as
    /// `observeTracking(options:_:changeHandler:)` in every other way. The observation holds what
    /// the closures capture (strongly, unless they capture weakly) until the token is invalidated.
    ///
    /// ```swift
    /// let token = KeyValueObservation.tracking(options: [.new]) {
    ///     "\(player.title ?? "") at \(Int(progress.fractionCompleted * 100))%"
    /// } changeHandler: { change in
    ///     print(change.newValue!)
    /// }
    /// ```
    @inlinable
    public static func tracking<Value>(
        options: KeyValueObservingOptions = [],
        fileID: String = #fileID,
        line: UInt = #line,
        _ expression: @escaping @Sendable () -> Value,
        changeHandler: @escaping @Sendable (KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        _track(
            _NoTrackingRoot.shared, isRooted: false, options: options, isDuplicate: nil, fileID: fileID, line: line, { _ in expression() },
            { _, change in changeHandler(change) }
        ).token
    }

    /// `tracking(options:_:changeHandler:)`, but a result equal to the previous one is not delivered.
    @inlinable
    public static func tracking<Value: Equatable & SendableMetatype>(
        options: KeyValueObservingOptions = [],
        removingDuplicates: Bool,
        fileID: String = #fileID,
        line: UInt = #line,
        _ expression: @escaping @Sendable () -> Value,
        changeHandler: @escaping @Sendable (KeyValueObservedChange<Value>) -> Void
    ) -> KeyValueObservation {
        _track(
            _NoTrackingRoot.shared, isRooted: false, options: options, isDuplicate: _equality(removingDuplicates), fileID: fileID,
            line: line, { _ in expression() }, { _, change in changeHandler(change) }
        ).token
    }
}

/// The comparison of `removingDuplicates`, if it is asked for.
@inlinable
func _equality<Value: Equatable & SendableMetatype>(_ removingDuplicates: Bool) -> (@Sendable (Value, Value) -> Bool)? {
    guard removingDuplicates else { return nil }
    return { (old: Value, new: Value) in old == new }
}

/// Makes, starts and returns a tracked observation and its token. Inlinable: the closure that
/// evaluates and delivers is built here, in the client, specialised for `Root` and `Value`.
@inlinable
func _track<Root: AnyObject, Value>(
    _ root: Root,
    isRooted: Bool,
    options: KeyValueObservingOptions,
    isDuplicate: (@Sendable (Value, Value) -> Bool)?,
    fileID: String,
    line: UInt,
    _ expression: @escaping @Sendable (Root) -> Value,
    _ handler: @escaping @Sendable (Root, KeyValueObservedChange<Value>) -> Void,
    onQuiet: (@Sendable () -> Void)? = nil
) -> (token: KeyValueObservation, tracker: _TrackerCore) {
    let state = _TrackedState(root: root, options: options, isDuplicate: isDuplicate, expression: expression, handler: handler)
    let tracker = _TrackerCore(wantsPrior: options.contains(.prior), fileID: fileID, line: line)
    tracker._setStep { core, step in state.step(core, step) }
    tracker._setOnQuiet(onQuiet)
    tracker.start(root: isRooted ? root as? KeyValueObservable : nil)
    return (KeyValueObservation(invalidating: tracker), tracker)
}
