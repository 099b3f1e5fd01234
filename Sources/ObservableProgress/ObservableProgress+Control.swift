import KeyValueObserving

extension ObservableProgress {
    /// Whether `cancel()` was called on this progress or an ancestor. Observable.
    public var isCancelled: Bool {
        reportRead(.isCancelled, Bool.self)
        return withLock { $0.cancelled }
    }

    /// Whether the progress is paused (by `pause()` on it or an ancestor, until `resume()`).
    /// Observable.
    public var isPaused: Bool {
        reportRead(.isPaused, Bool.self)
        return withLock { $0.paused }
    }

    /// Whether the work can be cancelled: a hint for user interfaces (default `true`); `cancel()`
    /// works either way, as in Foundation. Observable.
    public var isCancellable: Bool {
        get { hint(.isCancellable, \.cancellable) }
        set { setHint(.isCancellable, \.cancellable, to: newValue) }
    }

    /// Whether the work can be paused: a hint for user interfaces (default `false`); `pause()` works
    /// either way, as in Foundation. Observable.
    public var isPausable: Bool {
        get { hint(.isPausable, \.pausable) }
        set { setHint(.isPausable, \.pausable, to: newValue) }
    }

    private func hint(_ key: _ProgressKey, _ storage: WritableKeyPath<_ProgressState, Bool>) -> Bool {
        reportRead(key, Bool.self)
        return withLock { $0[keyPath: storage] }
    }

    private func setHint(_ key: _ProgressKey, _ storage: WritableKeyPath<_ProgressState, Bool>, to newValue: Bool) {
        let old = withLock { state in
            defer { state[keyPath: storage] = newValue }
            return state[keyPath: storage]
        }
        notify(key, from: old, to: newValue)
    }

    /// Cancels this progress and its whole subtree, including children added later. The first call
    /// runs the cancellation handlers (once each) and notifies `isCancelled`; later calls do nothing.
    /// Cancellation is final: there is no way back.
    ///
    /// - Complexity: O(size of the subtree).
    public func cancel() {
        guard let (handlers, subtree) = withLock({ $0.cancel() }) else { return }
        notify(.isCancelled, from: false, to: true)
        for handler in handlers { handler() }
        for child in subtree { child.cancel() }
    }

    /// Pauses this progress and its whole subtree, including children added later; runs the pausing
    /// handlers and notifies `isPaused` on each node that was running.
    ///
    /// - Complexity: O(size of the subtree).
    public func pause() {
        setPaused(true, parentGeneration: nil)
    }

    /// Resumes this progress and its whole subtree (children paused on their own included, as in
    /// Foundation); runs the resuming handlers and notifies `isPaused` on each node that was paused.
    ///
    /// - Complexity: O(size of the subtree).
    public func resume() {
        setPaused(false, parentGeneration: nil)
    }

    /// Sets the pause state here and pushes it down. A push from the parent carries the parent's
    /// generation, so when two threads pause and resume the parent at once, a child ends in the
    /// state of the latest of the two, whatever order the pushes arrive in.
    func setPaused(_ value: Bool, parentGeneration: UInt64?) {
        guard let (changed, handlers, generation, subtree) = withLock({ $0.setPaused(value, parentGeneration: parentGeneration) }) else {
            return
        }
        if changed {
            notify(.isPaused, from: !value, to: value)
            for handler in handlers { handler() }
        }
        for child in subtree { child.setPaused(value, parentGeneration: generation) }
    }

    /// Adds a handler to run when the progress is cancelled, on the cancelling thread; at once, on
    /// this thread, if it already is. Each handler runs once. Unlike Foundation's single
    /// `cancellationHandler`, handlers accumulate: a second caller does not replace the first.
    ///
    /// ```swift
    /// let token = download.onCancel { task.cancel() }
    /// ```
    ///
    /// - Parameter handler: Called once, never under a lock.
    /// - Returns: The token. Keep it: when it is invalidated or deallocated, the handler is removed
    ///   and does not run. It does not keep the progress alive.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) -> KeyValueObservation {
        let id = withLock { state in
            state.cancelled ? nil : state.handlers.add(handler, for: .cancellation)
        }
        guard let id else {
            handler()
            return KeyValueObservation(invalidating: _ControlHandlerRegistration(progress: nil, kind: .cancellation, id: 0))
        }
        return KeyValueObservation(invalidating: _ControlHandlerRegistration(progress: self, kind: .cancellation, id: id))
    }

    /// Adds a handler to run each time the progress goes from running to paused, on the pausing
    /// thread. Unlike `onCancel`, it does not run at once if the progress is paused already:
    /// pausing is not final, and the handler waits for the next pause.
    ///
    /// - Parameter handler: Called on every pause, never under a lock.
    /// - Returns: The token. Keep it: when it is invalidated or deallocated, the handler is removed.
    ///   It does not keep the progress alive.
    public func onPause(_ handler: @escaping @Sendable () -> Void) -> KeyValueObservation {
        addHandler(handler, for: .pausing)
    }

    /// Adds a handler to run each time the progress goes from paused to running, on the resuming
    /// thread.
    ///
    /// - Parameter handler: Called on every resumption, never under a lock.
    /// - Returns: The token. Keep it: when it is invalidated or deallocated, the handler is removed.
    ///   It does not keep the progress alive.
    public func onResume(_ handler: @escaping @Sendable () -> Void) -> KeyValueObservation {
        addHandler(handler, for: .resuming)
    }

    private func addHandler(_ handler: @escaping @Sendable () -> Void, for kind: _ControlHandlers.Kind) -> KeyValueObservation {
        let id = withLock { $0.handlers.add(handler, for: kind) }
        return KeyValueObservation(invalidating: _ControlHandlerRegistration(progress: self, kind: kind, id: id))
    }
}

/// The control handlers of one node, in the order they were added, each with the id its token
/// removes it by.
struct _ControlHandlers {
    enum Kind {
        case cancellation, pausing, resuming
    }

    typealias Handler = @Sendable () -> Void

    private var cancellation: [(id: UInt64, run: Handler)] = []
    private var pausing: [(id: UInt64, run: Handler)] = []
    private var resuming: [(id: UInt64, run: Handler)] = []
    private var lastID: UInt64 = 0

    /// Adds `handler`; returns its id.
    mutating func add(_ handler: @escaping Handler, for kind: Kind) -> UInt64 {
        lastID &+= 1
        let entry = (id: lastID, run: handler)
        switch kind {
        case .cancellation: cancellation.append(entry)
        case .pausing: pausing.append(entry)
        case .resuming: resuming.append(entry)
        }
        return lastID
    }

    /// Removes the handler `id`, if it is still there.
    mutating func remove(_ id: UInt64, for kind: Kind) {
        switch kind {
        case .cancellation: cancellation.removeAll { $0.id == id }
        case .pausing: pausing.removeAll { $0.id == id }
        case .resuming: resuming.removeAll { $0.id == id }
        }
    }

    /// The cancellation handlers, which run once: taken out.
    mutating func takeCancellation() -> [Handler] {
        defer { cancellation = [] }
        return cancellation.map(\.run)
    }

    /// The handlers to run when the node pauses (`true`) or resumes.
    func handlers(pausing: Bool) -> [Handler] {
        (pausing ? self.pausing : resuming).map(\.run)
    }
}

/// Removes one control handler when its token ends. Holds the progress weakly: a token does not
/// keep it alive.
final class _ControlHandlerRegistration: _Invalidatable {
    private weak let progress: ObservableProgress?
    private let kind: _ControlHandlers.Kind
    private let id: UInt64

    init(progress: ObservableProgress?, kind: _ControlHandlers.Kind, id: UInt64) {
        self.progress = progress
        self.kind = kind
        self.id = id
    }

    func invalidate() {
        progress?.withLock { $0.handlers.remove(id, for: kind) }
    }
}
