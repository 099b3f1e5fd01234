#if KVO_FUZZ
import Foundation
import KVOFuzzDriver
import KVOFuzzTargets

/// The target libFuzzer runs: named by the first argument, chosen once (a global `let`, so the C
/// callback, which cannot capture, reads it without any shared mutable state).
private let fuzzedTarget: FuzzTarget = FuzzTargets.named(CommandLine.arguments.dropFirst().first ?? "") ?? FuzzTargets.all[0]

/// Runs libFuzzer on `target` with `arguments` (its own, `argv[0]` first); returns its exit status.
/// A failed property prints its message and traps, which libFuzzer records as a crash.
func runLibFuzzer(_ target: FuzzTarget, arguments: [String]) -> Int32 {
    precondition(target.name == fuzzedTarget.name)
    var argc = Int32(arguments.count)
    // libFuzzer keeps argv for the whole run (and may print it): the strings are never freed.
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = .allocate(capacity: arguments.count + 1)
    for (index, argument) in arguments.enumerated() { argv![index] = strdup(argument) }
    argv![arguments.count] = nil
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        let bytes = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
        do {
            try fuzzedTarget.run(bytes)
        } catch {
            fatalError("\(fuzzedTarget.name): \(error)")
        }
        return 0
    }
}
#endif
