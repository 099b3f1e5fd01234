import Dispatch
import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableProgress

// `kvo-bench contention`: the wall time per update when several threads update one progress node,
// the leaves of one tree, or take a lock alone, for the progress node's lock and its alternatives.
// Timed (not counted), so it drifts with the machine's load: the median and the spread over rounds
// are printed; the gate counts the uncontended cost.

/// A lock `kvo-bench contention` compares.
protocol ContendedLock: ~Copyable, SendableMetatype {
    init()
    func lock()
    func unlock()
}

extension _ProgressLock: ContendedLock {}
extension _FutexLock: ContendedLock {}
extension _SpinningLock: ContendedLock {}
extension Lock: ContendedLock {}

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

    static func run(_ options: ContentionOptions) -> Never {
        print(
            "\(options.threads) threads × \(options.updates) updates, \(options.rounds) rounds; ns per update, wall and CPU "
                + "(all threads, waiting included): median [min–max] over rounds (the machine has "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores)")
        print("Progress nodes of this build use the \(_ProgressLock.implementation) lock.")
        let rows: [(String, () -> (wall: [Double], cpu: [Double]))] = [
            ("one node, unobserved (\(_ProgressLock.implementation))", { oneNode(options, observed: false) }),
            ("one node, observed (\(_ProgressLock.implementation))", { oneNode(options, observed: true) }),
            ("tree leaves, root observed (\(_ProgressLock.implementation))", { treeLeaves(options) }),
            ("lock alone: futex", { lockAlone(_FutexLock.self, options) }),
            ("lock alone: spin + sched_yield", { lockAlone(_SpinningLock.self, options) }),
            ("lock alone: pthread (Lock)", { lockAlone(Lock.self, options) }),
        ]
        let width = rows.map(\.0.count).max()!
        func summary(_ figures: [Double]) -> String {
            let sorted = figures.sorted()
            return String(format: "%7.1f [%.1f–%.1f]", percentile(sorted, 0.5), sorted.first!, sorted.last!)
        }
        for (name, measurement) in rows {
            let figures = measurement()
            print(
                "  \(name)\(String(repeating: " ", count: width - name.count))  wall \(summary(figures.wall))  CPU \(summary(figures.cpu))")
        }
        exit(0)
    }
}

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
