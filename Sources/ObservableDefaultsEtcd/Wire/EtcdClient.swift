import Foundation

/// A client of etcd v3's JSON gateway for a set of endpoints (members of one cluster).
package final class EtcdClient: Sendable {
    /// The endpoints, in the order they are tried first.
    package let endpoints: [URL]
    let credentials: EtcdCredentials?
    package let options: EtcdClientOptions

    /// - Throws: `.invalidEndpoint` when `endpoints` is empty or one is not an http(s) URL with a host.
    package init(endpoints: [URL], credentials: EtcdCredentials?, options: EtcdClientOptions = .init()) throws(EtcdError) {
        guard !endpoints.isEmpty else { throw EtcdError(.invalidEndpoint, endpoints: [], reason: "no endpoint given") }
        self.endpoints = endpoints
        self.credentials = credentials
        self.options = options
    }

    package func range(prefix: [UInt8]) throws(EtcdError) -> (keyValues: [EtcdKeyValue], revision: Int64) {
        throw EtcdError(.unreachable, endpoints: endpoints, reason: "not implemented yet")
    }

    package func range(key: [UInt8]) throws(EtcdError) -> (keyValue: EtcdKeyValue?, revision: Int64) {
        throw EtcdError(.unreachable, endpoints: endpoints, reason: "not implemented yet")
    }

    package func put(key: [UInt8], value: [UInt8]) throws(EtcdError) -> Int64 {
        throw EtcdError(.unreachable, endpoints: endpoints, reason: "not implemented yet")
    }

    package func delete(key: [UInt8]) throws(EtcdError) -> Int64 {
        throw EtcdError(.unreachable, endpoints: endpoints, reason: "not implemented yet")
    }

    package func transaction(compare: [EtcdCompare], success: [EtcdOperation], failure: [EtcdOperation]) throws(EtcdError)
        -> EtcdTransactionResult
    {
        throw EtcdError(.unreachable, endpoints: endpoints, reason: "not implemented yet")
    }

    package func compact(revision: Int64) throws(EtcdError) {
        throw EtcdError(.unreachable, endpoints: endpoints, reason: "not implemented yet")
    }

    package func watch(prefix: [UInt8], startRevision: Int64, handler: @escaping @Sendable (EtcdWatchNotice) -> Void) -> EtcdWatch {
        EtcdWatch()
    }
}
