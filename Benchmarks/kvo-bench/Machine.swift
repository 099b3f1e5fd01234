import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The machine a run measured, as every report names it.
struct Machine: Encodable {
    let system: String
    let release: String
    let architecture: String
    let cpuModel: String?
    let processors: Int

    static func current() -> Machine {
        var name = utsname()
        uname(&name)
        func string<T>(_ field: inout T) -> String {
            withUnsafePointer(to: &field) {
                $0.withMemoryRebound(to: CChar.self, capacity: MemoryLayout<T>.size) { String(cString: $0) }
            }
        }
        return Machine(
            system: string(&name.sysname),
            release: string(&name.release),
            architecture: string(&name.machine),
            cpuModel: cpuModel(),
            processors: ProcessInfo.processInfo.activeProcessorCount
        )
    }

    /// The 1-minute load average (`/proc/loadavg`), where the system tells it: a busy machine makes
    /// times drift, so the reports say how busy it was.
    static func loadAverage() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        return text.split(separator: " ").first.flatMap { Double($0) }
    }

    var description: String {
        "\(system) \(release) \(architecture), \(processors) CPUs\(cpuModel.map { ", \($0)" } ?? "")"
    }

    private static func cpuModel() -> String? {
        guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for line in info.split(separator: "\n") where line.hasPrefix("model name") {
            return line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        return nil
    }
}

/// The compiler that built this executable, as far as `#if compiler` can tell.
let compiledWith: String = {
    #if compiler(>=6.5)
    "Swift compiler >= 6.5"
    #elseif compiler(>=6.4)
    "Swift compiler 6.4.x"
    #elseif compiler(>=6.3.1)
    "Swift compiler 6.3.x (>= 6.3.1)"
    #elseif compiler(>=6.3)
    "Swift compiler 6.3"
    #elseif compiler(>=6.2)
    "Swift compiler 6.2.x"
    #elseif compiler(>=6.1)
    "Swift compiler 6.1.x"
    #else
    "Swift compiler 6.0.x"
    #endif
}()

/// The first line of `swift --version` of the `swift` on `PATH`, or `nil` if it cannot be run.
func toolchainVersion() -> String? {
    guard let output = try? runProcess("/usr/bin/env", ["swift", "--version"], timeoutSeconds: 60),
        output.status == 0
    else { return nil }
    return output.standardOutput.split(separator: "\n").first.map { $0.trimmingCharacters(in: .whitespaces) }
}

/// Today's date as YYYY-MM-DD (UTC), as the reports show it.
func isoDay(_ date: Date = Date()) -> String {
    String(ISO8601DateFormatter().string(from: date).prefix(10))
}

/// How this executable was built: times of a debug build say nothing about the library's speed.
let buildConfiguration: String = {
    #if DEBUG
    "DEBUG build (times are meaningless: build with -c release)"
    #else
    "release build"
    #endif
}()
