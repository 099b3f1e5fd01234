#if os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("on Linux, needs the C library of glibc or Musl")
#endif
import KeyValueObserving

/// The kernel's directory watches on Linux.
typealias KernelWatches = InotifyWatches

/// `FileWatcher`'s directory watches on Linux: one inotify instance, whose events the watcher's
/// thread reads when `eventDescriptor` is ready.
///
/// `IN_MOVED_TO`, `IN_CLOSE_WRITE`, `IN_DELETE` and `IN_MOVED_FROM` (the file renamed away) for the
/// file's name report a change; for an awaited entry (`.appearance`: a missing directory's nearest
/// existing ancestor, watched for the next component of its path), `IN_CREATE` and `IN_MOVED_TO`.
/// `IN_DELETE_SELF`, `IN_MOVE_SELF` and `IN_IGNORED` (the directory removed or moved away: the watch
/// is gone, or watches the wrong place) end the directory's subscriptions with `.lost`; the storage
/// then reloads and awaits the directory again.
/// `IN_Q_OVERFLOW` (the kernel dropped events) is reported to every subscription, which reloads its
/// file in full.
final class InotifyWatches: @unchecked Sendable {
    // Invariant: `subscriptions` and `isStopped` are only accessed with `lock` held; `descriptor` is
    // set in init, read by the watcher's thread, and closed only by `stop()`, which `FileWatcher`
    // calls after that thread has ended.
    private struct Entry {
        /// The entry's name; `nil` for every entry (`.everyEntry`).
        let name: String?
        /// The events of `name` that concern the subscription.
        let events: UInt32
        let handler: FileWatcher.Handler
    }

    private let lock = Lock()
    /// The inotify instance, or -1 if the system has none to give (every store then polls).
    private let descriptor: Int32
    private var subscriptions: [Int32: [UInt64: Entry]] = [:]
    private var isStopped = false

    // From <sys/inotify.h>.
    static let closeWrite: UInt32 = 0x0000_0008
    static let movedFrom: UInt32 = 0x0000_0040
    static let movedTo: UInt32 = 0x0000_0080
    static let created: UInt32 = 0x0000_0100
    static let deleted: UInt32 = 0x0000_0200
    static let deletedSelf: UInt32 = 0x0000_0400
    static let movedSelf: UInt32 = 0x0000_0800
    static let queueOverflow: UInt32 = 0x0000_4000
    static let ignored: UInt32 = 0x0000_8000
    static let onlyDirectory: UInt32 = 0x0100_0000
    static let addToMask: UInt32 = 0x2000_0000

    init() {
        descriptor = inotify_init1(Int32(IN_CLOEXEC) | Int32(IN_NONBLOCK))
    }

    /// The descriptor the watcher's thread waits on, or `nil` without an inotify instance.
    var eventDescriptor: Int32? {
        descriptor >= 0 ? descriptor : nil
    }

    /// Watches `name` in `directory` for the subscription `id` (its `kind` of events); returns the
    /// watch descriptor, or `nil` if the directory cannot be watched (it does not exist, or the
    /// system's watch limit is reached).
    func add(id: UInt64, directory: String, name: String, kind: FileWatcher.EntryEvents, handler: @escaping FileWatcher.Handler) -> Int32? {
        guard descriptor >= 0 else { return nil }
        let events =
            switch kind {
            case .file: Self.closeWrite | Self.movedTo | Self.movedFrom | Self.deleted
            case .appearance: Self.created | Self.movedTo
            case .everyEntry: Self.closeWrite | Self.movedTo | Self.movedFrom | Self.deleted | Self.created
            }
        // Added to the events the directory's other subscriptions asked for, not replacing them.
        let mask = events | Self.deletedSelf | Self.movedSelf | Self.onlyDirectory | Self.addToMask
        return lock.withLock {
            // Under the lock: a `remove` that drops a directory's last subscription must not remove
            // the kernel watch between this add and the registration below.
            guard !isStopped else { return nil }
            let watchDescriptor = inotify_add_watch(descriptor, directory, mask)
            guard watchDescriptor >= 0 else { return nil }
            subscriptions[watchDescriptor, default: [:]][id] = Entry(
                name: kind == .everyEntry ? nil : name, events: events, handler: handler)
            return watchDescriptor
        }
    }

    /// Ends the subscription `id` of `watchDescriptor`, and the kernel watch with its last one.
    func remove(id: UInt64, watchDescriptor: Int32) {
        lock.withLock {
            guard subscriptions[watchDescriptor]?.removeValue(forKey: id) != nil else { return }
            if subscriptions[watchDescriptor]!.isEmpty {
                subscriptions.removeValue(forKey: watchDescriptor)
                if !isStopped { inotify_rm_watch(descriptor, watchDescriptor) }
            }
        }
    }

    /// Closes the inotify instance; after this, `remove` must not touch it: its number may be reused.
    func stop() {
        lock.withLock { isStopped = true }
        if descriptor >= 0 { close(descriptor) }
    }

    /// Reads the events ready on `eventDescriptor` and calls the handlers they concern. On the
    /// watcher's thread.
    func readEvents() {
        withUnsafeTemporaryAllocation(byteCount: 64 * 1024, alignment: 8) { buffer in
            let count = read(descriptor, buffer.baseAddress, buffer.count)
            if count > 0 { dispatch(events: UnsafeRawBufferPointer(rebasing: buffer[..<count])) }
        }
    }

    /// Calls, once each, the handlers of the subscriptions the events in `buffer` concern.
    private func dispatch(events buffer: UnsafeRawBufferPointer) {
        var changed: [(watchDescriptor: Int32, name: String, mask: UInt32)] = []
        var lost: [(watchDescriptor: Int32, isStillWatched: Bool)] = []
        var overflowed = false
        var offset = 0
        let headerSize = 16  // struct inotify_event: wd, mask, cookie, len, then the name
        while offset + headerSize <= buffer.count {
            let watchDescriptor = buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let nameLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameBytes = UnsafeRawBufferPointer(
                rebasing: buffer[(offset + headerSize)..<min(offset + headerSize + nameLength, buffer.count)])
            offset += headerSize + nameLength
            if mask & Self.queueOverflow != 0 {
                overflowed = true
                continue
            }
            if mask & (Self.deletedSelf | Self.movedSelf | Self.ignored) != 0 {
                // A moved directory is still watched, at its new place: that watch is removed.
                lost.append((watchDescriptor, mask & Self.movedSelf != 0))
                continue
            }
            if mask & (Self.closeWrite | Self.movedTo | Self.movedFrom | Self.deleted | Self.created) != 0, nameLength > 0 {
                let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                changed.append((watchDescriptor, name, mask))
            }
        }
        let handlers: [(FileWatcher.Handler, FileWatcher.Event)] = lock.withLock {
            var handlers: [(FileWatcher.Handler, FileWatcher.Event)] = []
            // Dead watches are dropped: their subscriptions get no more events, and a `remove` of
            // one of them finds nothing to do.
            for (watchDescriptor, isStillWatched) in lost {
                guard let entries = subscriptions.removeValue(forKey: watchDescriptor) else { continue }
                if isStillWatched, !isStopped { inotify_rm_watch(descriptor, watchDescriptor) }
                handlers += entries.values.map { ($0.handler, FileWatcher.Event.lost) }
            }
            if overflowed {
                return handlers + subscriptions.values.flatMap(\.values).map { ($0.handler, FileWatcher.Event.overflow) }
            }
            // Once per subscription: `.changed`, or for one of every entry, the names it concerns.
            var named: [UInt64: (handler: FileWatcher.Handler, names: Set<String>?)] = [:]
            var order: [UInt64] = []
            for (watchDescriptor, name, mask) in changed {
                for (id, subscription) in subscriptions[watchDescriptor] ?? [:]
                where (subscription.name == nil || subscription.name == name) && subscription.events & mask != 0 {
                    if named[id] == nil {
                        order.append(id)
                        named[id] = (subscription.handler, subscription.name == nil ? [] : nil)
                    }
                    if subscription.name == nil { named[id]?.names?.insert(name) }
                }
            }
            for id in order {
                guard let (handler, names) = named[id] else { continue }
                handlers.append((handler, names.map { .entriesChanged($0) } ?? .changed))
            }
            return handlers
        }
        for (handler, event) in handlers { handler(event) }
    }
}
#endif
