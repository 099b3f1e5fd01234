import Foundation
import KeyValueObserving
import ObservableDefaults

/// The configuration `config` decodes: what a server reads at start-up.
struct ServerConfiguration: Decodable, CustomStringConvertible {
    enum LogLevel: String, Decodable, CaseIterable { case debug, info, warning, error }
    var port: Int
    var maxConnections: Int
    var logLevel: LogLevel
    var apiToken: String
    var upstream: URL?

    var description: String {
        "port=\(port) maxConnections=\(maxConnections) logLevel=\(logLevel) upstream=\(upstream?.absoluteString ?? "-")"
    }
}

/// `config FILE DIRECTORY [ARG]...`: a server's start-up. Opens a store on FILE read through the
/// arguments ARG, the environment (prefix CFGTEST; this process's) and the directory DIRECTORY
/// (its mounted secrets), with `apiToken` declared secret, and decodes `ServerConfiguration`
/// strictly: prints it and exits 0, or prints the error on standard error and exits 78
/// (`EX_CONFIG`), as a server refusing to start on bad configuration does.
func decodeConfiguration(_ arguments: [String]) -> Never {
    guard arguments.count >= 3 else { fail("'config' needs FILE DIRECTORY") }
    let store = DefaultsStore(
        fileURL: URL(fileURLWithPath: arguments[1]),
        layers: [.arguments(arguments.dropFirst(3)), .environment(prefix: "CFGTEST"), .directory(URL(fileURLWithPath: arguments[2]))],
        secrets: ["apiToken"],
        errorHandler: { error in writeLineToStandardError("warning: \(error)") })
    do {
        let configuration = try store.decode(ServerConfiguration.self)
        print(configuration)
        exit(0)
    } catch {
        writeLineToStandardError("refusing to start: \(error)")
        exit(78)
    }
}
