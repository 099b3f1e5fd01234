// Silencing a setter while a to-many mutation (`insert(_:at:into:)`…) sends its own notification.

extension _ObserverRegistry {
    /// Runs `body` (which sets the `@Observed` property `key`) with that property's setter
    /// notifications silenced on this thread; other properties set meanwhile (by a `didSet`, say)
    /// notify as usual.
    func silencingSetter<Result>(of key: AnyKeyPath, _ body: () throws -> Result) rethrows -> Result {
        let thread = _ThreadID.current
        withState { $0.withRecord(of: thread) { $0.silencedKeys.append(key) } }
        defer {
            let unsilenced = withState { $0.withRecord(of: thread) { $0.silencedKeys.popLast() } }
            withExtendedLifetime(unsilenced) {}
        }
        return try body()
    }

    /// Whether the setter of `key` is silenced on this thread.
    @usableFromInline
    func isSilenced(_ key: AnyKeyPath) -> Bool {
        guard slowPathFlags.load(ordering: .acquiring) & _SlowPath.silencedSetter != 0 else { return false }
        let thread = _ThreadID.current
        // Wrapper key paths are plain property key paths: comparing them runs no user code.
        return readState { $0.record(of: thread)?.silencedKeys.contains { _sameKey($0, key) } ?? false }
    }
}
