/// Timeouts, retries and back-off of an `EtcdClient`. Every bound is finite: a call returns or throws
/// within about `attempts × (connectTimeout or requestTimeout) + the back-off sleeps` per endpoint.
package struct EtcdClientOptions: Sendable, Hashable {
    /// The longest wait for one request's reply once it is sent (default 5 s).
    package var requestTimeout: Duration
    /// The longest wait for a connection to one endpoint (default 2 s).
    package var connectTimeout: Duration
    /// How many rounds over all endpoints a request that certainly did not reach a server (connection
    /// refused, unknown host) makes before the call throws `.unreachable` (default 3).
    package var attempts: Int
    /// The back-off before the second round; each further round doubles it (default 50 ms).
    package var initialBackoff: Duration
    /// The longest back-off between rounds, also the watch's longest wait between reconnect attempts
    /// (default 1 s).
    package var maximumBackoff: Duration

    package init(
        requestTimeout: Duration = .seconds(5),
        connectTimeout: Duration = .seconds(2),
        attempts: Int = 3,
        initialBackoff: Duration = .milliseconds(50),
        maximumBackoff: Duration = .seconds(1)
    ) {
        precondition(attempts >= 1, "EtcdClientOptions: attempts must be at least 1 (got \(attempts))")
        precondition(requestTimeout > .zero && connectTimeout > .zero, "EtcdClientOptions: timeouts must be positive")
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.attempts = attempts
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
    }
}
