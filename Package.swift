// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-key-value-observing",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "KeyValueObserving", targets: ["KeyValueObserving"]),
        .library(name: "ObservableProgress", targets: ["ObservableProgress"]),
        .library(name: "ObservableDefaults", targets: ["ObservableDefaults"]),
        .executable(name: "kvo-bench", targets: ["kvo-bench"]),
        .executable(name: "kvo-defaults", targets: ["kvo-defaults"]),
    ],
    dependencies: [],
    targets: [
        .target(name: "KeyValueObserving"),
        .target(name: "ObservableProgress", dependencies: ["KeyValueObserving"]),
        .target(name: "ObservableDefaults", dependencies: ["KeyValueObserving"]),
        .executableTarget(name: "kvo-defaults", dependencies: ["KeyValueObserving", "ObservableDefaults"]),
        .executableTarget(
            name: "kvo-bench",
            dependencies: ["KeyValueObserving", "ObservableProgress", "ObservableDefaults"],
            path: "Benchmarks/kvo-bench"
        ),
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
        .testTarget(
            name: "BenchmarkToolTests",
            // kvo-bench is a dependency so that SwiftPM builds it: the tests run it.
            dependencies: ["kvo-bench", "TestSupport"]
        ),
        .testTarget(
            name: "ObservableDefaultsTests",
            // kvo-defaults is a dependency so that SwiftPM builds it: the tests run it as the other process.
            dependencies: ["KeyValueObserving", "ObservableDefaults", "kvo-defaults"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
