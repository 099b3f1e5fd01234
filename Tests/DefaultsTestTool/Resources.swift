#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
import KeyValueObserving
import ObservableDefaults

/// The number of entries of a `/proc/self` directory (threads in `task`, descriptors in `fd`), or
/// -1 where there is no `/proc`.
func countEntries(_ directory: String) -> Int {
    guard let stream = opendir(directory) else { return -1 }
    defer { closedir(stream) }
    var count = 0
    while let entry = readdir(stream) {
        // The name read in place (a copy of the whole `d_name` array can read past the buffer).
        let name = (UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!).assumingMemoryBound(to: UInt8.self)
        if name[0] != UInt8(ascii: ".") { count += 1 }
    }
    // The stream's own descriptor.
    return directory.hasSuffix("/fd") ? count - 1 : count
}

/// `resources PREFIX COUNT [polling]` (for the bounded-resources test and report): opens `count`
/// stores on `prefix-0.json` … `prefix-(count-1).json`, sets a key in each, flushes them all, and
/// prints the process's threads and descriptors before, at their peak meanwhile (sampled every
/// millisecond by a thread not counted) and at the end.
func measureResources(prefix: String, count: Int, polling: Bool) -> String {
    let threadsBefore = countEntries("/proc/self/task")
    let descriptorsBefore = countEntries("/proc/self/fd")
    let peaks = Peaks()
    let sampler = Thread {
        while !peaks.isFinished {
            // The sampler itself is not counted.
            peaks.record(threads: countEntries("/proc/self/task") - 1, descriptors: countEntries("/proc/self/fd"))
            usleep(1_000)
        }
        peaks.signalFinished()
    }
    sampler.start()
    let watching: DefaultsStore.Watching = polling ? .polling(interval: .milliseconds(100)) : .automatic
    var stores: [DefaultsStore] = []
    for index in 0..<count {
        stores.append(DefaultsStore(fileURL: URL(fileURLWithPath: "\(prefix)-\(index).json"), watching: watching))
    }
    for (index, store) in stores.enumerated() {
        store.setJSONValue(.number(String(index)), forKey: "x")
    }
    for store in stores {
        do {
            try store.flush()
        } catch {
            return "flush failed: \(error)"
        }
    }
    let threadsEnd = countEntries("/proc/self/task") - 1
    let descriptorsEnd = countEntries("/proc/self/fd")
    peaks.finish()
    return "stores=\(count) threads-before=\(threadsBefore) threads-peak=\(max(peaks.threads, threadsEnd)) threads-end=\(threadsEnd) "
        + "descriptors-before=\(descriptorsBefore) descriptors-peak=\(max(peaks.descriptors, descriptorsEnd)) descriptors-end=\(descriptorsEnd)"
}

private final class Peaks: @unchecked Sendable {
    // Invariant: every stored property is only accessed with `lock` held.
    private let lock = Lock()
    private var maximumThreads = 0
    private var maximumDescriptors = 0
    private var stopping = false
    private let finished = DispatchSemaphore(value: 0)

    var threads: Int { lock.withLock { maximumThreads } }
    var descriptors: Int { lock.withLock { maximumDescriptors } }
    var isFinished: Bool { lock.withLock { stopping } }

    func record(threads: Int, descriptors: Int) {
        lock.withLock {
            maximumThreads = max(maximumThreads, threads)
            maximumDescriptors = max(maximumDescriptors, descriptors)
        }
    }

    /// Stops the sampler and waits for it.
    func finish() {
        lock.withLock { stopping = true }
        finished.wait()
    }

    func signalFinished() {
        finished.signal()
    }
}
