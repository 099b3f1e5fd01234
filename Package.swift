// swift-tools-version:6.2
import PackageDescription

let package = Package(
    name: "swift-key-value-observing",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "KeyValueObserving", targets: ["KeyValueObserving"]),
        .library(name: "ObservableProgress", targets: ["ObservableProgress"]),
        .library(name: "ObservableDefaults", targets: ["ObservableDefaults"]),
        .library(name: "ObservableDefaultsEtcd", targets: ["ObservableDefaultsEtcd"]),
        .executable(name: "kvo-bench", targets: ["kvo-bench"]),
        .executable(name: "kvo-defaults", targets: ["kvo-defaults"]),
    ],
    dependencies: [],
    targets: [
        // A process-wide word and thread-local pointers that the @Observed getter, inlined into
        // clients, reads with one load (see its header).
        .target(name: "_KeyValueObservingShims"),
        .target(name: "KeyValueObserving", dependencies: ["_KeyValueObservingShims"]),
        .target(name: "ObservableProgress", dependencies: ["KeyValueObserving"]),
        .target(name: "ObservableDefaults", dependencies: ["KeyValueObserving"]),
        // The etcd backend: its own product, so that users of the file store do not carry it. It
        // never used FoundationNetworking: it speaks HTTP/1.1 to etcd's gateway with a client of its
        // own and loads the system's OpenSSL at run time for https endpoints, so it links nothing new.
        .target(name: "ObservableDefaultsEtcd", dependencies: ["ObservableDefaults", "KeyValueObserving"]),
        // The tools' command lines, parsed without running anything: the tools and the fuzz targets use it.
        .target(name: "KVOToolArguments", dependencies: ["ObservableDefaults", "ObservableDefaultsEtcd"]),
        .executableTarget(
            name: "kvo-defaults", dependencies: ["KeyValueObserving", "ObservableDefaults", "ObservableDefaultsEtcd", "KVOToolArguments"]),
        .executableTarget(
            name: "kvo-bench",
            dependencies: ["KeyValueObserving", "ObservableProgress", "ObservableDefaults", "ObservableDefaultsEtcd", "KVOToolArguments"],
            path: "Benchmarks/kvo-bench"
        ),
        // Fuzzing (Fuzz/run; DocC "Testing and fuzzing"): each target a function over bytes, kvo-fuzz to replay
        // inputs through them or, built by Fuzz/run with -sanitize=fuzzer -DKVO_FUZZ, to run
        // libFuzzer; KVOFuzzDriver only declares libFuzzer's LLVMFuzzerRunDriver, so no other build
        // needs the fuzzer runtime.
        .target(
            name: "KVOFuzzTargets", dependencies: ["ObservableDefaults", "ObservableDefaultsEtcd", "KVOToolArguments"], path: "Fuzz/Targets"
        ),
        .target(name: "KVOFuzzDriver", path: "Fuzz/Driver"),
        .executableTarget(name: "kvo-fuzz", dependencies: ["KVOFuzzTargets", "KVOFuzzDriver"], path: "Fuzz/kvo-fuzz"),
        // Replays every file of Fuzz/corpus and Fuzz/regressions through its target.
        .testTarget(name: "FuzzCorpusTests", dependencies: ["KVOFuzzTargets"]),
        .target(
            name: "TestSupport",
            dependencies: ["KeyValueObserving"],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "KeyValueObservingTests",
            dependencies: ["KeyValueObserving", "TestSupport"]
        ),
        .testTarget(
            name: "ObservableProgressTests",
            dependencies: ["ObservableProgress", "KeyValueObserving", "TestSupport"]
        ),
        // The other process of the defaults tests, for the loads kvo-defaults does not offer its users
        // (many writes, many concurrent updates, many stores).
        .executableTarget(
            name: "DefaultsTestTool",
            dependencies: ["KeyValueObserving", "ObservableDefaults", "ObservableDefaultsEtcd"],
            path: "Tests/DefaultsTestTool"
        ),
        .testTarget(
            name: "BenchmarkToolTests",
            // kvo-bench is a dependency so that SwiftPM builds it: the tests run it.
            dependencies: ["kvo-bench", "KeyValueObserving", "TestSupport"]
        ),
        .testTarget(
            name: "ObservableDefaultsTests",
            // The executables are dependencies so that SwiftPM builds them: the tests run them as the
            // other process.
            dependencies: ["KeyValueObserving", "ObservableDefaults", "kvo-defaults", "DefaultsTestTool", "TestSupport"]
        ),
        // One set of observation scenarios run against an @Observed key, a progress key and a
        // defaults key: the one delivery engine they share.
        .testTarget(
            name: "ObservationEngineTests",
            dependencies: ["KeyValueObserving", "ObservableProgress", "ObservableDefaults", "TestSupport"]
        ),
        .testTarget(
            name: "ObservableDefaultsEtcdTests",
            // The tests start their own etcd processes (TestSupport's EtcdServer / EtcdCluster); the
            // executables are dependencies so that SwiftPM builds them: the store's tests run them as
            // the other process.
            dependencies: [
                "ObservableDefaultsEtcd", "ObservableDefaults", "TestSupport", "KeyValueObserving", "kvo-defaults", "DefaultsTestTool",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
