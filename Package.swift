// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-key-value-observing",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "KeyValueObserving", targets: ["KeyValueObserving"]),
        .executable(name: "kvo-bench", targets: ["kvo-bench"]),
    ],
    dependencies: [],
    targets: [
        .target(name: "KeyValueObserving"),
        .executableTarget(
            name: "kvo-bench",
            dependencies: ["KeyValueObserving"],
            path: "Benchmarks/kvo-bench"
        ),
        .testTarget(
            name: "KeyValueObservingTests",
            dependencies: ["KeyValueObserving"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
