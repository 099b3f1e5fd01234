import Testing

extension Trait where Self == ConditionTrait {
    /// Runs a suite or test that starts etcd only where it can: skipped, with the install command as
    /// the reason, where `etcd` or `etcdctl` is missing (unless `KVO_REQUIRE_ETCD=1`: then it runs and
    /// fails with the install hint), and where `KVO_SKIP_ETCD_TESTS=1` asks for it.
    package static var requiresEtcd: Self {
        .enabled(if: EtcdTestEnvironment.testsEnabled, Comment(rawValue: EtcdTestEnvironment.skipReason))
    }

    /// `requiresEtcd`, and `openssl` too (the https tests make a private authority with it).
    package static var requiresEtcdAndOpenSSL: Self {
        .enabled(if: EtcdTestEnvironment.tlsTestsEnabled, Comment(rawValue: EtcdTestEnvironment.tlsSkipReason))
    }
}
