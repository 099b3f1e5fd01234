import Dispatch
import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableDefaults
import ObservableProgress
import Synchronization

// `kvo-bench stress`: a few seconds of everything at once, for valgrind's memcheck (leaks, reads of
// freed memory in the registry's lock-free read path and its reclamation) and the thread sanitizer.
// Not a measurement: it prints what it did and fails only when a check fails.

/// `@unchecked Sendable`: its observed properties are set from several threads, which `@Observed`
/// makes safe (each set is atomic with its notification); it has no other state.
final class StressItem: KeyValueObservable, @unchecked Sendable {
    // A String, not an Int: a chain ending in an `Int?` is specialized to the same code as the
    // gate's chain-set (`Double?`), and the compiler then merges the two behind a thunk, which the
    // gated path pays for.
    @Observed var title = ""
}

/// `@unchecked Sendable`: as `StressItem`.
final class StressPlayer: KeyValueObservable, @unchecked Sendable {
    @Observed var volume = 0
    @Observed var rate = 0
    @Observed var item: StressItem? = StressItem()
}

enum Stress {
    /// What the threads did, and what went wrong.
    final class Tally: Sendable {
        let registrations = Atomic<Int>(0)
        let sets = Atomic<Int>(0)
        let deliveries = Atomic<Int>(0)
        let trees = Atomic<Int>(0)
        let defaultsWrites = Atomic<Int>(0)
        let failures = Locked<[String]>([])

        func add(_ counter: borrowing Atomic<Int>, _ count: Int = 1) {
            counter.wrappingAdd(count, ordering: .relaxed)
        }

        func fail(_ message: String) {
            failures.withLock { $0.append(message) }
        }
    }

    static func run(_ options: StressOptions) -> Never {
        // Everything the run made is released before the exit, so that what memcheck finds still
        // allocated then is not this run's objects.
        let failed = stressAndReport(options)
        exit(failed ? 1 : 0)
    }

    /// Runs the stress and prints what it did and what failed; `true` if something did.
    @inline(never)
    static func stressAndReport(_ options: StressOptions) -> Bool {
        let tally = Tally()
        stress(options, tally)
        print(
            "stress: \(options.seconds) s, \(tally.registrations.load(ordering: .relaxed)) observers registered and removed, "
                + "\(tally.sets.load(ordering: .relaxed)) sets, \(tally.deliveries.load(ordering: .relaxed)) deliveries, "
                + "\(tally.trees.load(ordering: .relaxed)) progress trees, \(tally.defaultsWrites.load(ordering: .relaxed)) defaults writes"
        )
        if tally.deliveries.load(ordering: .relaxed) == 0 { tally.fail("no observer was notified") }
        let all = tally.failures.current
        if !all.isEmpty { printError("stress: \(all.count) checks failed:\n" + all.prefix(10).joined(separator: "\n")) }
        return !all.isEmpty
    }

    @inline(never)
    static func stress(_ options: StressOptions, _ tally: Tally) {
        let player = StressPlayer()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kvo-bench-stress-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            fail("stress: cannot create \(directory.path): \(error)", status: 1)
        }
        // One observer for the whole run, of every kind of key the setters touch.
        let steady = [
            player.observe(\.volume, options: [.new, .old]) { _, _ in tally.add(tally.deliveries) },
            player.observe(\.item?.title, options: [.new]) { _, _ in tally.add(tally.deliveries) },
            // Registered here first: a key path's first registration reads its value.
            player.observe(\.rate) { _, _ in tally.add(tally.deliveries) },
            player.observeAnyKey { _, _ in tally.add(tally.deliveries) },
        ]
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(options.seconds) * 1_000_000_000
        let workers: [@Sendable (Int) -> Void] = [
            { _ in registerAndRemove(player, tally) },
            { _ in registerAndRemove(player, tally) },
            { thread in setKeys(player, tally, thread: thread) },
            { thread in setKeys(player, tally, thread: thread) },
            { _ in updateTrees(tally) },
            { _ in writeDefaults(directory.appendingPathComponent("stress.json"), tally) },
            { _ in dropLargeBatches(tally) },
        ]
        Contention.wallNanoseconds(threads: workers.count) { thread in
            repeat { workers[thread](thread) } while DispatchTime.now().uptimeNanoseconds < deadline
        }
        for token in steady { token.invalidate() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Registers observers of several kinds (a key, a chain through an optional, any key, a
    /// sequence) and removes them at once or after a few sets of the other threads. A property's
    /// value is not thread-safe (only the registry is, see ThreadingAndSendable): a registration
    /// that reads a value (the chain reads `item`) holds `Stress.references`, as its setters do.
    static func registerAndRemove(_ player: StressPlayer, _ tally: Tally) {
        for round in 0..<50 {
            let tokens = [
                player.observe(\.volume, options: round.isMultiple(of: 2) ? [.new, .prior] : [.old]) { _, _ in
                    tally.add(tally.deliveries)
                },
                references.withLock { player.observe(\.item?.title, options: [.old]) { _, _ in tally.add(tally.deliveries) } },
                player.observe(\.rate) { _, _ in tally.add(tally.deliveries) },
            ]
            tally.add(tally.registrations, tokens.count)
            if round.isMultiple(of: 3) { sched_yield() }
            for token in tokens { token.invalidate() }
        }
    }

    /// Serialises what reads or writes `StressPlayer.item` and its title across threads.
    static let references = Lock()

    /// Sets observed keys one at a time, in batches, and through a chain whose intermediate is
    /// replaced (the old one's observers are moved to the new). Each setter thread owns one of the
    /// two integer keys (`thread` even: `volume`, odd: `rate`); the references are set under
    /// `references`.
    static func setKeys(_ player: StressPlayer, _ tally: Tally, thread: Int) {
        let own: ReferenceWritableKeyPath<StressPlayer, Int> = thread.isMultiple(of: 2) ? \.volume : \.rate
        for i in 0..<200 {
            switch i % 4 {
            case 0:
                player[keyPath: own] = i + thread
            case 1:
                player.coalescingChanges {
                    player[keyPath: own] = -i
                    player[keyPath: own] = i
                }
            case 2:
                references.withLock { player.item?.title = String(i) }
            default:
                references.withLock { player.item = i.isMultiple(of: 8) ? nil : StressItem() }
            }
        }
        tally.add(tally.sets, 200)
    }

    /// Builds a small tree, observes its root and a leaf, completes every leaf from this thread and
    /// checks the root finished.
    static func updateTrees(_ tally: Tally) {
        let root = ObservableProgress(totalUnitCount: 4)
        let leaves = (0..<4).map { _ in ObservableProgress(totalUnitCount: 25, parent: root, pendingUnitCount: 1) }
        let tokens = [
            root.observe(\.fractionCompleted, options: [.new]) { _, _ in tally.add(tally.deliveries) },
            leaves[0].observe(\.completedUnitCount) { _, _ in tally.add(tally.deliveries) },
        ]
        for _ in 0..<25 {
            for leaf in leaves { leaf.complete() }
        }
        if root.fractionCompleted != 1 || !root.isFinished {
            tally.fail("a progress tree ended at \(root.fractionCompleted), finished: \(root.isFinished)")
        }
        withExtendedLifetime(tokens) {}
        tally.add(tally.trees)
    }

    /// Opens a store on the file, observes a key, writes it and reads it back.
    static func writeDefaults(_ url: URL, _ tally: Tally) {
        let store = DefaultsStore(fileURL: url)
        let key = DefaultsKey("hits", default: 0)
        let token = store.observe(key, options: [.new]) { _, _ in tally.add(tally.deliveries) }
        for i in 1...20 {
            store[key] = i
        }
        if store[key] != 20 { tally.fail("the defaults store read \(store[key]) after writing 20") }
        do throws(DefaultsError) {
            try store.flush()
        } catch {
            tally.fail("the defaults store did not flush: \(error)")
        }
        token.invalidate()
        tally.add(tally.defaultsWrites, 20)
    }
}
