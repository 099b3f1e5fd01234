import Foundation
import KeyValueObserving
@testable import ObservableDefaultsEtcd
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The UTF-8 bytes of `text` (keys and values in the tests).
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Options for tests: short bounds so that failures show quickly (the defaults are documented in
/// EtcdClientOptions).
let testOptions = EtcdClientOptions(
    requestTimeout: .seconds(3), connectTimeout: .seconds(2), attempts: 4, initialBackoff: .milliseconds(50),
    maximumBackoff: .milliseconds(400))

/// A client for `endpoints` (throws its error as a test failure).
func client(_ endpoints: [URL], credentials: EtcdCredentials? = nil, options: EtcdClientOptions = testOptions) throws -> EtcdClient {
    try EtcdClient(endpoints: endpoints, credentials: credentials, options: options)
}

/// Waits until `condition` holds, checking every few milliseconds, for at most `seconds` (a deadline,
/// not a sleep: the test goes on as soon as it holds). Returns whether it held.
func waitUntil(seconds: Double = 20, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}

/// Records what a watch delivers, with the thread-safety checks the tests need.
final class NoticeRecorder: Sendable {
    enum Entry: Sendable, Equatable {
        case events([EtcdWatchEvent], revision: Int64)
        case compacted(Int64)
        case disconnected(EtcdError.Kind)
        case reconnected
    }

    let entries = Locked<[Entry]>([])
    /// Handler calls that overlapped another one (must stay 0: one serial queue).
    let overlaps = Counter(0)
    private let running = Locked(false)

    var handler: @Sendable (EtcdWatchNotice) -> Void {
        { notice in self.record(notice) }
    }

    func record(_ notice: EtcdWatchNotice) {
        let overlapping = running.withLock { running in
            defer { running = true }
            return running
        }
        if overlapping { overlaps.increment() }
        defer { running.withLock { $0 = false } }
        switch notice {
        case .events(let events, let revision): entries.append(.events(events, revision: revision))
        case .compacted(let revision): entries.append(.compacted(revision))
        case .disconnected(let error): entries.append(.disconnected(error.kind))
        case .reconnected: entries.append(.reconnected)
        }
    }

    /// Every event delivered so far, in order.
    var events: [EtcdWatchEvent] {
        entries.current.flatMap { entry -> [EtcdWatchEvent] in
            if case .events(let events, _) = entry { return events }
            return []
        }
    }

    /// The values of the put events (as strings) and "-key" for deletions, in order.
    var summary: [String] {
        events.map { event in
            switch event {
            case .put(let keyValue): String(decoding: keyValue.value, as: UTF8.self)
            case .delete(let key, _): "-" + String(decoding: key, as: UTF8.self)
            }
        }
    }

    /// Waits until `count` events were delivered.
    func waitForEvents(_ count: Int, seconds: Double = 30) -> Bool {
        waitUntil(seconds: seconds) { events.count >= count }
    }

    func count(of wanted: Entry) -> Int {
        entries.current.filter { $0 == wanted }.count
    }
}
