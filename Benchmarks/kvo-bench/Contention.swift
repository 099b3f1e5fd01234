import Dispatch
import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableProgress
import Synchronization

// `kvo-bench contention`: the wall time per update when several threads update one progress node,
// the leaves of one tree, or take a lock alone, for the package's lock (`PlatformLock`, which
// progress nodes use) and, as a comparison that lives only here, the spinning lock progress nodes
// used before. Each row runs twice: on every CPU the process may use, and (Linux only) with every
// thread pinned to one CPU (`sched_setaffinity`), where a waiter that spins holds the only core the
// lock's holder could run on. Timed (not counted), so it drifts with the machine's load: the median
// and the spread over rounds are printed; the gate counts the uncontended cost.

/// A lock `kvo-bench contention` compares.
protocol ContendedLock: ~Copyable, SendableMetatype {
    init()
    func lock()
    func unlock()
}

extension PlatformLock: ContendedLock {}
extension SpinningLock: ContendedLock {}

/// The lock progress nodes used on Linux before the package had one lock type, kept only as this
/// benchmark's comparison: an `Atomic` flag taken with one compare-and-exchange (acquiring) and
/// released with one store (releasing); a thread that finds it taken spins briefly, then calls
/// `sched_yield` between attempts, and never sleeps.
struct SpinningLock: ~Copyable, @unchecked Sendable {
    // Invariant: `taken` is only changed by `lock()` (false to true, acquiring) and `unlock()`
    // (true to false, releasing), so the accesses it guards are ordered between threads.
    let taken = Atomic<Bool>(false)

    init() {}

    @inline(__always)
    func lock() {
        if _fastPath(taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged) { return }
        waitAndLock()
    }

    @inline(__always)
    func unlock() {
        taken.store(false, ordering: .releasing)
    }

    /// Spins a little (reading only, so the waiting cores do not fight over the cache line), then
    /// yields the core between attempts.
    @inline(never)
    func waitAndLock() {
        var attempts = 0
        while true {
            if !taken.load(ordering: .relaxed),
                taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
            {
                return
            }
            attempts &+= 1
            if attempts > 100 { sched_yield() }
        }
    }
}

/// A counter behind a lock: the critical section of the lock-alone measurement.
final class LockedCounter<L: ContendedLock & ~Copyable>: @unchecked Sendable {
    // Invariant: `count` is only accessed with `lock` held.
    let lock = L()
    var count = 0

    @inline(never) func increment() {
        lock.lock()
        count &+= 1
        lock.unlock()
    }
}

enum Contention {
    /// Runs `work(thread)` on `threads` threads at once and returns the wall nanoseconds from
    /// their common start to the end of the last.
    @discardableResult
    static func wallNanoseconds(threads: Int, _ work: @escaping @Sendable (Int) -> Void) -> Double {
        let start = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        for thread in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                start.wait()
                work(thread)
                done.leave()
            }
        }
        let began = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<threads { start.signal() }
        done.wait()
        return Double(DispatchTime.now().uptimeNanoseconds - began)
    }

    /// The process's CPU time (user and system, every thread) so far, in nanoseconds.
    static func cpuNanoseconds() -> Double {
        let usage = processUsage()
        func nanoseconds(_ time: timeval) -> Double { Double(time.tv_sec) * 1e9 + Double(time.tv_usec) * 1e3 }
        return nanoseconds(usage.ru_utime) + nanoseconds(usage.ru_stime)
    }

    /// Wall and CPU ns per update over `rounds` rounds, each made by `make` (setup, untimed) and
    /// run on `options.threads` threads; `check` verifies a round's result (nothing lost). The CPU
    /// time is what the waiting threads burn as well: spinning costs CPU, sleeping does not.
    static func measure<Subject: Sendable>(
        _ options: ContentionOptions, make: () -> Subject, run: @escaping @Sendable (Subject, Int) -> Void,
        check: (Subject) -> Bool
    ) -> (wall: [Double], cpu: [Double]) {
        let updates = Double(options.threads * options.updates)
        var figures: (wall: [Double], cpu: [Double]) = ([], [])
        for _ in 0..<options.rounds {
            let subject = make()
            let cpu = cpuNanoseconds()
            let wall = wallNanoseconds(threads: options.threads) { thread in run(subject, thread) }
            figures.cpu.append((cpuNanoseconds() - cpu) / updates)
            guard check(subject) else { fail("contention: a round lost updates", status: 1) }
            figures.wall.append(wall / updates)
        }
        return figures
    }

    static func lockAlone<L: ContendedLock & ~Copyable>(_ type: L.Type, _ options: ContentionOptions) -> (wall: [Double], cpu: [Double]) {
        let updates = options.updates
        return measure(
            options, make: { LockedCounter<L>() },
            run: { counter, _ in for _ in 0..<updates { counter.increment() } },
            check: { $0.count == options.threads * updates })
    }

    /// One node, updated by every thread (`complete()`, one unit each), observed or not.
    static func oneNode(_ options: ContentionOptions, observed: Bool) -> (wall: [Double], cpu: [Double]) {
        let updates = options.updates
        let total = Int64(options.threads * updates)
        return measure(
            options,
            make: { () -> ObservedNode in
                let node = ObservableProgress(totalUnitCount: total + 1)
                return ObservedNode(node: node, token: observed ? node.observe(\.fractionCompleted) { _, _ in } : nil)
            },
            run: { subject, _ in for _ in 0..<updates { subject.node.complete() } },
            check: { $0.node.completedUnitCount == total })
    }

    /// A root with one leaf per thread, each thread updating its own leaf; the root observed, so
    /// every update also takes the root's lock.
    static func treeLeaves(_ options: ContentionOptions) -> (wall: [Double], cpu: [Double]) {
        let updates = options.updates
        let threads = options.threads
        return measure(
            options,
            make: { () -> ObservedTree in
                let root = ObservableProgress(totalUnitCount: Int64(threads))
                let leaves = (0..<threads).map { _ in
                    ObservableProgress(totalUnitCount: Int64(updates) + 1, parent: root, pendingUnitCount: 1)
                }
                return ObservedTree(root: root, leaves: leaves, token: root.observe(\.fractionCompleted) { _, _ in })
            },
            run: { tree, thread in
                let leaf = tree.leaves[thread]
                for _ in 0..<updates { leaf.complete() }
            },
            check: { tree in tree.leaves.allSatisfy { $0.completedUnitCount == Int64(updates) } })
    }

    /// The lock progress nodes take in this build, named from the lock's own definition
    /// (`PlatformLock.form`, decided by the same conditions as the lock): `kvo-bench contention`
    /// prints it and `--help` says it, so neither can name another lock than the build has.
    static var lockInThisBuild: String { "PlatformLock (\(PlatformLock.form) in this build)" }

    static func run(_ options: ContentionOptions) -> Never {
        print(
            "\(options.threads) threads × \(options.updates) updates, \(options.rounds) rounds; ns per update, wall and CPU "
                + "(all threads, waiting included): median [min–max] over rounds (the machine has "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores)")
        print("Progress nodes use the package's lock, \(lockInThisBuild); the spinning lock is a comparison only.")
        let rows: [(String, () -> (wall: [Double], cpu: [Double]))] = [
            ("one node, unobserved", { oneNode(options, observed: false) }),
            ("one node, observed", { oneNode(options, observed: true) }),
            ("tree leaves, root observed", { treeLeaves(options) }),
            ("lock alone: PlatformLock", { lockAlone(PlatformLock.self, options) }),
            ("lock alone: spin + sched_yield", { lockAlone(SpinningLock.self, options) }),
        ]
        let width = rows.map(\.0.count).max()!
        func summary(_ figures: [Double]) -> String {
            let sorted = figures.sorted()
            return String(format: "%7.1f [%.1f–%.1f]", percentile(sorted, 0.5), sorted.first!, sorted.last!)
        }
        func measureRows() {
            for (name, measurement) in rows {
                let figures = measurement()
                print(
                    "  \(name)\(String(repeating: " ", count: width - name.count))  wall \(summary(figures.wall))  CPU \(summary(figures.cpu))"
                )
            }
        }
        print("Unpinned (every CPU the process may use):")
        measureRows()
        #if os(Linux)
        switch OneCPU.pin() {
        case .pinned(let cpu, let restore):
            print("Pinned to one CPU (CPU \(cpu), sched_setaffinity; every thread of the rows starts from this one):")
            measureRows()
            restore()
        case .failed(let error):
            print("Pinned to one CPU: skipped (sched_setaffinity failed with error \(error))")
        }
        #else
        print("Pinned to one CPU: Linux only (sched_setaffinity)")
        #endif
        exit(0)
    }
}

#if os(Linux)
/// Pins the calling thread, and so every thread it starts afterwards (they inherit its CPU set), to
/// one CPU: the first of those the process may use.
enum OneCPU {
    enum Outcome {
        case pinned(cpu: Int, restore: () -> Void)
        case failed(errno: Int32)
    }

    /// `sched_getaffinity` and `sched_setaffinity` (same signature), which the C library declares
    /// only for GNU sources and Swift therefore does not import: looked up by name at run time.
    typealias Affinity = @convention(c) (pid_t, Int, UnsafeMutablePointer<cpu_set_t>) -> Int32

    static func function(_ name: String) -> Affinity? {
        guard let process = dlopen(nil, RTLD_NOW), let symbol = dlsym(process, name) else { return nil }
        return unsafeBitCast(symbol, to: Affinity.self)
    }

    static func pin() -> Outcome {
        guard let sched_getaffinity = function("sched_getaffinity"), let sched_setaffinity = function("sched_setaffinity") else {
            return .failed(errno: ENOSYS)
        }
        var allowed = cpu_set_t()
        guard sched_getaffinity(0, MemoryLayout<cpu_set_t>.size, &allowed) == 0 else { return .failed(errno: errno) }
        // `CPU_SET` and `CPU_ISSET` are C macros: the set is an array of words, CPU n at bit n % 64
        // of word n / 64 (glibc's `__cpu_mask` is an unsigned long).
        let bitsPerWord = UInt.bitWidth
        let words = MemoryLayout<cpu_set_t>.size / MemoryLayout<UInt>.size
        let first: Int? = withUnsafeBytes(of: &allowed) { bytes in
            let set = bytes.bindMemory(to: UInt.self)
            for word in 0..<words where set[word] != 0 {
                return word * bitsPerWord + set[word].trailingZeroBitCount
            }
            return nil
        }
        guard let cpu = first else { return .failed(errno: EINVAL) }
        var one = cpu_set_t()
        withUnsafeMutableBytes(of: &one) { bytes in
            bytes.bindMemory(to: UInt.self)[cpu / bitsPerWord] = 1 << (cpu % bitsPerWord)
        }
        guard sched_setaffinity(0, MemoryLayout<cpu_set_t>.size, &one) == 0 else { return .failed(errno: errno) }
        let original = allowed
        return .pinned(
            cpu: cpu,
            restore: {
                var set = original
                _ = sched_setaffinity(0, MemoryLayout<cpu_set_t>.size, &set)
            })
    }
}
#endif

/// A node and its (optional) observation, kept for one round.
struct ObservedNode: Sendable {
    let node: ObservableProgress
    let token: KeyValueObservation?
}

/// A tree and its root's observation, kept for one round.
struct ObservedTree: Sendable {
    let root: ObservableProgress
    let leaves: [ObservableProgress]
    let token: KeyValueObservation
}
