#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif
import Foundation

extension DefaultsStore {
    /// The directory suites live in by default, for this process's environment: on Linux
    /// `$XDG_CONFIG_HOME` when it is an absolute path (the XDG Base Directory specification ignores
    /// relative ones), else `$HOME/.config`; on macOS `$HOME/Library/Preferences`. When `HOME` is
    /// unset or empty, the user database's home directory stands in for it.
    ///
    /// ```swift
    /// let file = DefaultsStore.defaultDirectory().appendingPathComponent("myapp.json")
    /// ```
    public static func defaultDirectory() -> URL {
        URL(fileURLWithPath: defaultDirectoryPath(environment: ProcessInfo.processInfo.environment, homeDirectory: passwordHomeDirectory()))
    }

    /// `defaultDirectory()` for `environment`, with `homeDirectory` as the user database's entry (a
    /// hook for the tests of that rule, not API).
    package static func defaultDirectoryPath(environment: [String: String], homeDirectory: String?) -> String {
        var home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? homeDirectory ?? "/"
        while home.count > 1, home.hasSuffix("/") { home.removeLast() }
        #if canImport(Darwin)
        return (home == "/" ? "" : home) + "/Library/Preferences"
        #else
        if let configuration = environment["XDG_CONFIG_HOME"], configuration.hasPrefix("/") {
            return configuration
        }
        return (home == "/" ? "" : home) + "/.config"
        #endif
    }

    private static func passwordHomeDirectory() -> String? {
        guard let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir else { return nil }
        return String(cString: directory)
    }
}
