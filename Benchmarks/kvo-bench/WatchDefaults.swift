import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableDefaults
import ObservableDefaultsEtcd

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DefaultsLatency {
    /// The hidden command that makes this executable the other process of the latency section.
    static let watchCommand = BenchHiddenCommands.watchDefaults

    /// `kvo-bench _watch-defaults FILE KEY [DIRECTORY]`: observes the Int `KEY` of the defaults file
    /// `FILE` (read through a directory layer on `DIRECTORY`, if given) and
    /// prints `NANOSECONDS KEY: -> VALUE` for each change, stamped with `CLOCK_MONOTONIC` when the
    /// observer is called, unbuffered. Exits when its standard input ends (the benchmark that
    /// started it keeps a pipe open for as long as it measures) or on a signal.
    static func watch(file: String, key name: String, directory: String?) -> Never {
        // FILE is a path, or `etcd:URL#PREFIX` for a store on etcd (`EtcdBench.openStore`).
        let store: DefaultsStore
        do {
            if let directory {
                store = DefaultsStore(fileURL: URL(fileURLWithPath: file), layers: [.directory(URL(fileURLWithPath: directory))])
            } else {
                store = try EtcdBench.openStore(file)
            }
        } catch {
            fail("\(watchCommand): \(error)", status: 1)
        }
        let token = store.observe(DefaultsKey(name, default: -1), options: [.new]) { _, change in
            _ = writeLine("\(monotonicNanoseconds()) \(name): -> \(change.newValue.map(String.init) ?? "(absent)")", toDescriptor: 1)
        }
        var byte: UInt8 = 0
        while read(0, &byte, 1) > 0 {}
        // The store too: an optimised build would release it after its last use, and a store that is
        // gone stops watching its file.
        withExtendedLifetime((store, token)) {}
        exit(0)
    }
}
