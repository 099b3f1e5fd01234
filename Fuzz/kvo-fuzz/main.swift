// kvo-fuzz: the fuzz targets of Fuzz/Targets, run one of two ways.
//
//   kvo-fuzz list                     the targets and what each checks
//   kvo-fuzz TARGET FILE|DIRECTORY... replays the files (a directory: every file in it, recursively)
//                                     through TARGET; exit status 1 if any fails
//
// Built by Fuzz/run with -sanitize=fuzzer and -DKVO_FUZZ, `kvo-fuzz TARGET [libFuzzer arguments]`
// runs libFuzzer on TARGET instead (see Fuzz/run for the arguments it passes).
import Foundation
import KVOFuzzTargets

let arguments = Array(CommandLine.arguments.dropFirst())

func usage() -> Never {
    var message = "usage: kvo-fuzz TARGET FILE|DIRECTORY...  (or kvo-fuzz list)\ntargets:\n"
    for target in FuzzTargets.all { message += "  \(target.name): \(target.summary)\n" }
    FileHandle.standardError.write(Data(message.utf8))
    exit(2)
}

guard let first = arguments.first else { usage() }
if first == "list" {
    for target in FuzzTargets.all { print("\(target.name): \(target.summary)") }
    exit(0)
}
guard let target = FuzzTargets.named(first) else { usage() }

#if KVO_FUZZ
exit(runLibFuzzer(target, arguments: [CommandLine.arguments[0]] + arguments.dropFirst()))
#else
let files = arguments.dropFirst().flatMap(inputFiles(at:))
var failures = 0
for file in files {
    guard let bytes = FileManager.default.contents(atPath: file) else {
        print("\(file): cannot be read")
        failures += 1
        continue
    }
    do {
        try target.run(Array(bytes))
    } catch {
        print("\(file): FAILED: \(error)")
        failures += 1
    }
}
print("\(target.name): \(files.count - failures) of \(files.count) inputs pass")
exit(failures == 0 ? 0 : 1)
#endif
