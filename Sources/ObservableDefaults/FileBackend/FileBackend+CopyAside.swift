extension FileBackend {
    /// How many times the copy of one broken content is tried: the first write and one retry.
    static let copyAttemptsPerContent = 2

    /// Copies `bytes`, a broken file (or one with a key twice) as read under the lock, aside before
    /// `file` is overwritten (`DefaultsFile.copyAside`). On a full disk that copy fails, and retrying
    /// it every few seconds would only wear the disk: one content's copy is tried twice at most, then
    /// writes fail with the same error, without touching the disk, until the file changes (someone
    /// repairs or removes it) or space is made and a later content is found. Runs on the queue.
    func copyAside(_ bytes: [UInt8], of file: DefaultsFile, as label: String = "corrupt") throws(DefaultsError) -> String {
        let content = bytes.hashValue
        let (previous, hook) = lock.withLock { (state.failedCopy, state.copyAsideHook) }
        let attempts = previous?.content == content ? previous!.attempts : 0
        if let previous, attempts >= Self.copyAttemptsPerContent { throw previous.error }
        do throws(DefaultsError) {
            let copy = if let hook { try hook(bytes) } else { try file.copyAside(bytes, as: label) }
            lock.withLock { state.failedCopy = nil }
            return copy
        } catch {
            lock.withLock { state.failedCopy = (content, error, attempts + 1) }
            throw error
        }
    }
}
