import Dispatch
import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableDefaults
import Synchronization

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

// The stress's other processes: two writers (this executable started again with a hidden command)
// writing the file the stress's own defaults store writes and observes, until their standard input
// ends. The stress then checks that its store converged to what each writer wrote last.

enum SoakWriters {
    /// The hidden command that makes this executable one of the writers.
    static let command = BenchHiddenCommands.soakWriter
    static let count = BenchHiddenCommands.soakWriterCount

    /// The key only writer `index` writes, set alone or in a batch with `echo(index)`.
    static func own(_ index: Int) -> DefaultsKey<Int> { DefaultsKey("writer-\(index)", default: 0) }
    /// Written with `own(index)` in one batch.
    static func echo(_ index: Int) -> DefaultsKey<Int> { DefaultsKey("writer-\(index)-echo", default: 0) }
    /// Incremented by both writers with `update`, atomically across processes.
    static let shared = DefaultsKey("writers-shared", default: 0)

    /// `kvo-bench _soak-writer FILE INDEX`: writes `own(INDEX)` with 1, 2, 3, … about once a
    /// millisecond (every second value in a batch with `echo(INDEX)`, every sixteenth an `update` of
    /// `shared` as well) until standard input ends; then writes the last value to both keys in one
    /// batch, flushes and prints `LAST INCREMENTS`.
    static func runWriter(file: String, index: Int) -> Never {
        let store = DefaultsStore(fileURL: URL(fileURLWithPath: file))
        let stop = StopFlag()
        Thread.detachNewThread {
            var byte: UInt8 = 0
            while read(0, &byte, 1) > 0 {}
            stop.stopped.store(true, ordering: .releasing)
        }
        var value = 0
        var increments = 0
        do {
            while !stop.stopped.load(ordering: .acquiring) {
                value += 1
                if value.isMultiple(of: 2) {
                    store.batch { batch in
                        batch[own(index)] = value
                        batch[echo(index)] = value
                    }
                } else {
                    store[own(index)] = value
                }
                if value.isMultiple(of: 16) {
                    try store.update(shared) { $0 += 1 }
                    increments += 1
                }
                usleep(1_000)
            }
            value += 1
            store.batch { batch in
                batch[own(index)] = value
                batch[echo(index)] = value
            }
            try store.flush()
        } catch {
            fail("\(command) \(index): \(error)", status: 1)
        }
        _ = writeLine("\(value) \(increments)", toDescriptor: 1)
        exit(0)
    }

    final class StopFlag: Sendable {
        let stopped = Atomic<Bool>(false)
    }

    /// The writers of one stress run and the stress's observers of their keys.
    final class Fleet {
        private let store: DefaultsStore
        private var writers: [SpawnedChild] = []
        private let seen = (0..<SoakWriters.count).map { _ in Recorder<Int>() }
        private var tokens: [KeyValueObservation] = []

        /// Opens a store on `file`, observes the writers' keys and starts the writers.
        init(file: URL, _ tally: Stress.Tally) {
            store = DefaultsStore(fileURL: file)
            for index in 0..<SoakWriters.count {
                let recorder = seen[index]
                tokens.append(
                    store.observe(own(index), options: [.new]) { _, change in
                        tally.add(tally.deliveries)
                        if change.isFromAnotherProcess { recorder.record(change.newValue) }
                    })
            }
            for index in 0..<SoakWriters.count {
                do {
                    writers.append(try spawnChild(currentExecutable(), [command, file.path, String(index)]))
                } catch {
                    tally.fail("cannot start writer \(index) (\(command)): \(error)")
                }
            }
        }

        /// Ends the writers (their input closes), waits for them, and checks that the store and its
        /// observers converged to what each wrote last and that no shared increment was lost. A
        /// store that has not converged within `patience` seconds of the writers' exit fails.
        func finish(_ tally: Stress.Tally, patience: Double) {
            for writer in writers { writer.input.closeFile() }
            var last: [Int] = []
            var increments = 0
            for (index, writer) in writers.enumerated() {
                let status = writer.waitForExit()
                let output = String(decoding: writer.output.finish(), as: UTF8.self)
                let error = String(decoding: writer.error.finish(), as: UTF8.self)
                let fields = output.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
                guard status == 0, fields.count == 2 else {
                    tally.fail("writer \(index) exited with status \(status): \(output)\(error)")
                    continue
                }
                last.append(fields[0])
                increments += fields[1]
            }
            guard last.count == SoakWriters.count else { return }
            func differences() -> [String] {
                var found: [String] = []
                for index in 0..<SoakWriters.count {
                    if store[own(index)] != last[index] { found.append("writer-\(index) is \(store[own(index)]), not \(last[index])") }
                    if store[echo(index)] != last[index] {
                        found.append("writer-\(index)-echo is \(store[echo(index)]), not \(last[index])")
                    }
                    if seen[index].last != last[index] {
                        found.append(
                            "the observer of writer-\(index) last saw \(seen[index].last.map(String.init) ?? "nothing"), not \(last[index])"
                        )
                    }
                }
                if store[shared] != increments { found.append("writers-shared is \(store[shared]), not \(increments)") }
                return found
            }
            let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(patience * 1e9)
            var found = differences()
            while !found.isEmpty, DispatchTime.now().uptimeNanoseconds < deadline {
                usleep(10_000)
                found = differences()
            }
            for difference in found { tally.fail("the defaults store did not converge to the writers' last values: \(difference)") }
            for index in 0..<SoakWriters.count where seen[index].count == 0 {
                tally.fail("the observer of writer-\(index) saw no change from another process")
            }
            let changes = seen.map(\.count).reduce(0, +)
            tally.add(tally.writerChanges, changes)
            tally.add(tally.writerValues, last.reduce(0, +))
            for token in tokens { token.invalidate() }
        }
    }
}

/// How many values an observer got and the last one. Its handlers may run on any thread.
final class Recorder<Value: Sendable>: Sendable {
    private let state = Locked<(count: Int, last: Value?)>((0, nil))

    func record(_ value: Value?) {
        state.withLock {
            $0.count += 1
            $0.last = value
        }
    }

    var count: Int { state.current.count }
    var last: Value? { state.current.last }
}
