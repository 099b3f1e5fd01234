// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-key-value-observing",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "KeyValueObserving", targets: ["KeyValueObserving"]),
        .library(name: "ObservableProgress", targets: ["ObservableProgress"]),
        .executable(name: "kvo-bench", targets: ["kvo-bench"]),
    ],
    dependencies: [],
    targets: [
        .target(name: "KeyValueObserving"),
        .target(name: "ObservableProgress", dependencies: ["KeyValueObserving"]),
        .executableTarget(
            name: "kvo-bench",
            dependencies: ["KeyValueObserving", "ObservableProgress"],
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
    ],
    swiftLanguageModes: [.v6]
)
