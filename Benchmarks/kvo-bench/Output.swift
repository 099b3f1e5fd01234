import Foundation
import KeyValueObserving

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes `kvo-bench: MESSAGE` to standard error, unbuffered (the package's one writer).
func printError(_ message: String) {
    writeLineToStandardError("kvo-bench: \(message)")
}

func fail(_ message: String, status: Int32) -> Never {
    printError(message)
    exit(status)
}

/// How `compare` and `gate` end when they find a regression (a usage error is 2 in every command,
/// any other failure 1).
let regressionStatus: Int32 = 3

func badArgument(_ message: String) -> Never {
    fail("\(message)\nRun 'kvo-bench --help' for usage.", status: 2)
}

/// Writes `text` to `path`, or exits with status 1 naming the file and the cause.
func writeFile(_ text: String, to path: String) {
    do {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    } catch {
        fail("cannot write '\(path)': \(error)", status: 1)
    }
}

/// Writes `value` as pretty-printed JSON with sorted keys to `path` (every JSON file kvo-bench
/// writes: results, gate figures), or exits with status 1 naming the file and the cause.
func writeJSON(_ value: some Encodable, to path: String) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    let data: Data
    do {
        data = try encoder.encode(value)
    } catch {
        fail("cannot encode the JSON for '\(path)': \(error)", status: 1)
    }
    writeFile(String(decoding: data, as: UTF8.self) + "\n", to: path)
}
