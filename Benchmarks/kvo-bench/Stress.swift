import Dispatch
import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableDefaults
import ObservableProgress
import Synchronization

// `kvo-bench stress`: everything at once for a duration, for valgrind's memcheck (leaks, reads of
// freed memory in the registry's lock-free read path and its reclamation), the thread sanitizer, and
// as a soak: memory in use is sampled at intervals and must not keep growing over the second half of
// the run (SoakMemory.swift), and two other processes write the defaults file the stress's store
// observes (SoakWriters.swift). Not a measurement of speed: it prints what it did and its memory
// samples, and fails when a check fails or memory in use grows.

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
        let checkedRounds = Atomic<Int>(0)
        let writerChanges = Atomic<Int>(0)
        let writerValues = Atomic<Int>(0)
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
        let sampler = MemorySampler(seconds: options.seconds)
        stress(options, tally, sampler)
        func count(_ counter: borrowing Atomic<Int>) -> Int { counter.load(ordering: .relaxed) }
        _ = writeLine(
            "stress: \(options.seconds) s, \(count(tally.registrations)) observers registered and removed, "
                + "\(count(tally.sets)) sets, \(count(tally.deliveries)) deliveries, "
                + "\(count(tally.checkedRounds)) checked rounds of dependent keys, chains and tracked observations, "
                + "\(count(tally.trees)) progress trees, \(count(tally.defaultsWrites)) defaults writes, "
                + "\(SoakWriters.count) writer processes (\(count(tally.writerValues)) values written, "
                + "\(count(tally.writerChanges)) seen by an observer here)",
            toDescriptor: 1)
        if count(tally.deliveries) == 0 { tally.fail("no observer was notified") }
        if count(tally.checkedRounds) == 0 { tally.fail("no checked round ran") }
        let memory = MemoryTrend.report(MemoryTrend.judge(sampler.samples, duration: Double(options.seconds)))
        if memory.fails { tally.fail(memory.line) } else { _ = writeLine(memory.line, toDescriptor: 1) }
        let all = tally.failures.current
        if !all.isEmpty { printError("stress: \(all.count) checks failed:\n" + all.prefix(10).joined(separator: "\n")) }
        return !all.isEmpty
    }

    @inline(never)
    static func stress(_ options: StressOptions, _ tally: Tally, _ sampler: MemorySampler) {
        let player = StressPlayer()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kvo-bench-stress-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            fail("stress: cannot create \(directory.path): \(error)", status: 1)
        }
        // One observer for the whole run, of every kind of key the setters touch. Each integer key is
        // set by one thread only, so its observer's last value is the key's value at the end.
        let volumes = Recorder<Int>(), rates = Recorder<Int>()
        let steady = [
            player.observe(\.volume, options: [.new, .old]) { _, change in
                tally.add(tally.deliveries)
                volumes.record(change.newValue)
            },
            player.observe(\.item?.title, options: [.new]) { _, _ in tally.add(tally.deliveries) },
            // Registered here first: a key path's first registration reads its value.
            player.observe(\.rate, options: [.new]) { _, change in
                tally.add(tally.deliveries)
                rates.record(change.newValue)
            },
            player.observeAnyKey { _, _ in tally.add(tally.deliveries) },
        ]
        let file = directory.appendingPathComponent("stress.json")
        let writers = SoakWriters.Fleet(file: file, tally)
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = start + UInt64(options.seconds) * 1_000_000_000
        let workers: [@Sendable (Int) -> Void] = [
            { _ in registerAndRemove(player, tally) },
            { _ in registerAndRemove(player, tally) },
            { thread in setKeys(player, tally, thread: thread) },
            { thread in setKeys(player, tally, thread: thread) },
            { _ in updateTrees(tally) },
            { _ in writeDefaults(file, tally) },
            { _ in dropLargeBatches(tally) },
            { _ in checkChanges(tally) },
            { _ in sampler.run(start: start, deadline: deadline) },
        ]
        Contention.wallNanoseconds(threads: workers.count) { thread in
            repeat { workers[thread](thread) } while DispatchTime.now().uptimeNanoseconds < deadline
        }
        for token in steady { token.invalidate() }
        if volumes.last != player.volume {
            tally.fail("the volume's observer last saw \(volumes.last.map(String.init) ?? "nothing"), not \(player.volume)")
        }
        if rates.last != player.rate {
            tally.fail("the rate's observer last saw \(rates.last.map(String.init) ?? "nothing"), not \(player.rate)")
        }
        // Generous: the writers' last write reaches this store through its file watcher, which under
        // valgrind runs many times slower.
        writers.finish(tally, patience: 60)
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
    /// checks the root finished, the leaf's observer saw each of its 25 units and the root's saw 1.
    static func updateTrees(_ tally: Tally) {
        let root = ObservableProgress(totalUnitCount: 4)
        let leaves = (0..<4).map { _ in ObservableProgress(totalUnitCount: 25, parent: root, pendingUnitCount: 1) }
        let fractions = Recorder<Double>(), units = Recorder<Int64>()
        let tokens = [
            root.observe(\.fractionCompleted, options: [.new]) { _, change in
                tally.add(tally.deliveries)
                fractions.record(change.newValue)
            },
            leaves[0].observe(\.completedUnitCount, options: [.new]) { _, change in
                tally.add(tally.deliveries)
                units.record(change.newValue)
            },
        ]
        for _ in 0..<25 {
            for leaf in leaves { leaf.complete() }
        }
        if root.fractionCompleted != 1 || !root.isFinished {
            tally.fail("a progress tree ended at \(root.fractionCompleted), finished: \(root.isFinished)")
        }
        if units.count != 25 || units.last != 25 {
            tally.fail("a leaf's observer saw \(units.count) changes of 25, the last \(units.last.map { "\($0)" } ?? "none")")
        }
        if fractions.last != 1 { tally.fail("a tree root's observer last saw \(fractions.last.map { "\($0)" } ?? "nothing"), not 1") }
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
