import Dispatch
import Foundation
import KeyValueObserving

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// The directory layer: one file per key, as Kubernetes mounts a Secret or a ConfigMap and Docker
/// mounts its secrets. Its files are read when it is made and again at each change the process's
/// file watcher reports in the directory (any entry: a file written, replaced, removed, and the
/// `..data` symlink Kubernetes renames over to swap every file at once), or at each interval when
/// polled; only the keys whose files changed are reported. Where the kernel names the entries that
/// changed (inotify), only those files are read again: a file rewritten in place is read when its
/// writer closes it, never half-written because another file's event came meanwhile. A change to
/// an entry whose name starts with `.` (Kubernetes' `..data`) reads every file.
///
/// A directory that does not exist holds nothing, and is looked for every second (or at the
/// polling interval) until it appears; one removed is looked for again the same way. A removal
/// that lasts `lossConfirmationDelay` makes the layer unavailable (`unavailability`); a shorter one
/// (Kubernetes swapping its `..data` link, a directory replaced by a rename) is not one.
package final class DirectoryLayer: TextLayerSource, @unchecked Sendable {
    // Invariant: `state` is only accessed with `lock` held; `path` and `interval` are set in init and
    // never change; `reload()` runs only on `queue` after init (and once in init, before the layer
    // is shared).
    private struct State {
        /// Each file's text, by its name in the directory.
        var contents: [String: LayerText] = [:]
        /// The problem met reading each file that has one, by its name.
        var problems: [String: String] = [:]
        var onChange: (@Sendable (Set<String>) -> Void)?
        var subscription: FileWatcher.Subscription?
        var timer: DispatchSourceTimer?
        var isStopped = false
        /// Whether the directory is missing, once confirmed (`lossConfirmationDelay`).
        var isMissing = false
        /// Whether a removal waits for its confirmation.
        var isLossPending = false
        /// Counts the removals seen: a confirmation is of the removal it was scheduled for, not of a
        /// later one (a directory removed, back, and removed again).
        var removals = 0
    }

    /// How long a directory must stay removed before the layer is unavailable.
    static let lossConfirmationDelay = DispatchTimeInterval.milliseconds(500)

    /// The largest file read: a value, not a data set.
    static let maximumFileSize = 1 << 20

    let path: String
    /// The polling interval, or `nil` to watch with the kernel.
    private let interval: Duration?
    private let lock = Lock()
    private var state = State()
    private let queue = DispatchQueue(label: "ObservableDefaults.DirectoryLayer")

    package init(directory: String, pollingInterval: Duration?) {
        self.path = directory
        self.interval = pollingInterval
        let (contents, problems) = Self.load(directory)
        state.contents = contents
        state.problems = problems
        state.isMissing = !DefaultsFile.isDirectory(directory)
    }

    deinit {
        stop()
    }

    package func text(forKey name: String) -> LayerText? {
        lock.withLock { state.contents[name] ?? state.contents[LayerKeyNames.kebabCase(name)] }
    }

    package var problems: [String] { lock.withLock { state.problems.sorted { $0.key < $1.key }.map(\.value) } }

    package var unavailability: String? {
        lock.withLock { state.isMissing ? "\(path) does not exist (or is not a directory)" : nil }
    }

    package func startWatching(_ onChange: @escaping @Sendable (Set<String>) -> Void) {
        lock.withLock { state.onChange = onChange }
        queue.async { [weak self] in self?.arm() }
    }

    package func stop() {
        lock.withLock {
            state.isStopped = true
            state.onChange = nil
        }
        disarm()
    }

    // MARK: Watching (on `queue`)

    /// Watches the directory with the kernel, or polls it (at the interval, or each second while it
    /// does not exist or cannot be watched).
    private func arm() {
        guard !lock.withLock({ state.isStopped }) else { return }
        var subscription: FileWatcher.Subscription?
        if interval == nil {
            subscription = FileWatcher.shared.watch(directory: path, name: "", for: .everyEntry) { [weak self] event in
                guard let self else { return }
                self.queue.async {
                    if event == .lost { self.disarm() }
                    if case .entriesChanged(let names) = event, !names.contains(where: { $0.hasPrefix(".") }) {
                        self.reload(names)
                    } else {
                        self.reload()
                    }
                    if event == .lost { self.arm() }
                }
            }
        }
        let timer: DispatchSourceTimer? =
            subscription == nil ? DispatchSource.makeTimerSource(queue: queue) : nil
        if let timer {
            let every = interval.map(Self.dispatchInterval) ?? .seconds(1)
            timer.schedule(deadline: .now() + every, repeating: every)
            timer.setEventHandler { [weak self] in
                guard let self else { return }
                self.reload()
                // A missing directory that appeared is watched from now on.
                if self.interval == nil, DefaultsFile.isDirectory(self.path) {
                    self.disarm()
                    self.arm()
                }
            }
        }
        let isStopped = lock.withLock {
            if !state.isStopped {
                state.subscription = subscription
                state.timer = timer
            }
            return state.isStopped
        }
        if isStopped {
            subscription?.cancel()
            // Resumed before it is cancelled: a dispatch source is not let go inactive.
            timer?.resume()
            timer?.cancel()
        } else {
            timer?.resume()
            // What changed between the first read and the watch.
            if subscription != nil { reload() }
        }
    }

    /// Ends the watch or the timer (the next `arm()` makes another).
    private func disarm() {
        let (subscription, timer) = lock.withLock {
            defer {
                state.subscription = nil
                state.timer = nil
            }
            return (state.subscription, state.timer)
        }
        // Outside the lock: a subscription's cancel takes the watcher's lock.
        subscription?.cancel()
        timer?.cancel()
    }

    /// Reads the directory again (only the files `names`, if given) and reports the names of the
    /// files that changed (the stack finds the keys they spell: a kebab-case name does not say how
    /// its key is written).
    private func reload(_ names: Set<String>? = nil) {
        let (contents, problems) = Self.load(path, names: names)
        let exists = DefaultsFile.isDirectory(path)
        let (changed, onChange, confirmsLoss): (Set<String>, (@Sendable (Set<String>) -> Void)?, Int?) = lock.withLock {
            var newContents = contents
            var newProblems = problems
            if let names {
                // The other files as they were.
                newContents = state.contents.filter { !names.contains($0.key) }.merging(contents) { $1 }
                newProblems = state.problems.filter { !names.contains($0.key) }.merging(problems) { $1 }
            }
            var changed = Set<String>()
            for name in Set(state.contents.keys).union(newContents.keys) where state.contents[name] != newContents[name] {
                changed.insert(name)
            }
            state.contents = newContents
            var statusChanged = state.problems != newProblems
            state.problems = newProblems
            // A return is at once; a loss once it lasts (`confirmLoss`).
            var confirmsLoss: Int?
            if exists {
                state.isLossPending = false
                if state.isMissing {
                    state.isMissing = false
                    statusChanged = true
                }
            } else if !state.isMissing, !state.isLossPending {
                state.isLossPending = true
                state.removals += 1
                confirmsLoss = state.removals
            }
            return (changed, changed.isEmpty && !statusChanged ? nil : state.onChange, confirmsLoss)
        }
        if let removal = confirmsLoss {
            queue.asyncAfter(deadline: .now() + Self.lossConfirmationDelay) { [weak self] in self?.confirmLoss(removal) }
        }
        onChange?(changed)
    }

    /// The removal numbered `removal`, seen `lossConfirmationDelay` ago: if no later removal was
    /// seen since and the directory is still missing, the layer is unavailable, and the stack hears
    /// of it.
    private func confirmLoss(_ removal: Int) {
        let exists = DefaultsFile.isDirectory(path)
        let onChange: (@Sendable (Set<String>) -> Void)? = lock.withLock {
            guard state.isLossPending, state.removals == removal else { return nil }
            state.isLossPending = false
            guard !exists else { return nil }
            state.isMissing = true
            return state.onChange
        }
        onChange?([])
        // The directory that came back meanwhile is read (and watched) by the reload its timer runs.
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        // Clamped: a huge interval is not an overflow (a day is plenty between looks).
        let nanoseconds = min(seconds, 86_400) * 1_000_000_000 + attoseconds / 1_000_000_000
        return .nanoseconds(max(1_000_000, Int(nanoseconds)))
    }

    // MARK: Reading

    /// Every file's text in `directory` (only the files `names`, if given; names starting with `.`
    /// skipped, symbolic links followed), and the problem met with each file that has one.
    static func load(_ directory: String, names only: Set<String>? = nil) -> (contents: [String: LayerText], problems: [String: String]) {
        let listed = only.map(Array.init) ?? (try? FileManager.default.contentsOfDirectory(atPath: directory))
        guard let names = listed else { return ([:], [:]) }
        var contents: [String: LayerText] = [:]
        var problems: [String: String] = [:]
        for name in names.sorted() where !name.hasPrefix(".") && !name.contains("/") {
            let filePath = directory + "/" + name
            var info = stat()
            // Through symbolic links: Kubernetes' files are links into `..data`.
            guard stat(filePath, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            guard Int(info.st_size) <= maximumFileSize else {
                problems[name] = "\(filePath) is \(info.st_size) bytes, larger than a value can be (\(maximumFileSize)); it is skipped"
                continue
            }
            let descriptor = open(filePath, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            guard descriptor >= 0 else {
                problems[name] = "\(filePath) cannot be read (\(DefaultsFile.describe(errno))); it is skipped"
                continue
            }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var failed: Int32 = 0
            while bytes.count <= maximumFileSize {
                let count = buffer.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress, $0.count) }
                if count < 0 {
                    if errno == EINTR { continue }
                    failed = errno
                    break
                }
                if count == 0 { break }
                bytes += buffer[..<count]
            }
            close(descriptor)
            if failed == 0, bytes.count > maximumFileSize {
                problems[name] = "\(filePath) is larger than a value can be (\(maximumFileSize) bytes); it is skipped"
                continue
            }
            if failed != 0 {
                problems[name] = "\(filePath) cannot be read (\(DefaultsFile.describe(failed))); it is skipped"
                continue
            }
            guard var text = String(validating: bytes, as: UTF8.self) else {
                problems[name] = "\(filePath) is not UTF-8 text; it is skipped"
                continue
            }
            if text.hasSuffix("\n") { text.removeLast() }
            contents[name] = LayerText(text: text, spelling: filePath)
        }
        return (contents, problems)
    }
}
