/// A fuzz target: a function over bytes that returns when the input is handled correctly (accepted
/// or rejected, as the code under test decides), throws `FuzzFailure` when a property it checks does
/// not hold, and traps where the code under test traps. libFuzzer (through `kvo-fuzz` built with
/// `Fuzz/run`) turns a failure into a crash it records; the replay suite (`FuzzCorpusTests`) turns it
/// into a test failure naming the file.
package struct FuzzTarget: Sendable {
    /// The name on the command line and of the corpus directory (`Fuzz/corpus/NAME/`).
    package let name: String
    /// One line: what the target checks and how it reads its input.
    package let summary: String
    /// Runs one input.
    package let run: @Sendable ([UInt8]) throws(FuzzFailure) -> Void
}

/// A property of the code under test that did not hold for an input.
package struct FuzzFailure: Error, CustomStringConvertible {
    package let description: String

    package init(_ description: String) {
        self.description = description
    }
}

/// Throws `FuzzFailure(message())` unless `condition` holds.
func require(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzFailure) {
    if !condition { throw FuzzFailure(message()) }
}

/// The targets, in the order `Fuzz/run all` runs them.
package enum FuzzTargets {
    package static let all: [FuzzTarget] = [
        FuzzTarget(
            name: "json", summary: "the JSON parser: no trap; printing and parsing again gives the same value", run: JSONTargets.roundTrip),
        FuzzTarget(
            name: "json-foundation",
            summary:
                "the JSON parser against Foundation's JSONSerialization: same accept/reject, equal values (Fuzz/allowed-differences.md)",
            run: JSONTargets.foundationDifferential),
        FuzzTarget(
            name: "layer-text",
            summary: "a layer's text decoded as each key type: no trap; a decoded value spelled again decodes to itself",
            run: LayerTextTarget.run),
        FuzzTarget(
            name: "key-names",
            summary: "key names spelled as kebab-case and as environment variables: no trap; spelling a spelled name again changes nothing",
            run: KeyNamesTarget.run),
        FuzzTarget(
            name: "http",
            summary:
                "the etcd client's HTTP/1.1 reply parser, in any split, with a small cap: no trap; buffer within cap + head limit; the split changes nothing",
            run: HTTPTarget.run),
        FuzzTarget(
            name: "etcd-replies",
            summary:
                "etcd's JSON replies (range, put/delete, transaction, error): no trap; a reason for every refusal; decoded values read again the same",
            run: EtcdTargets.replies),
        FuzzTarget(
            name: "etcd-watch",
            summary:
                "a watch's stream split into lines in any split, each line decoded: the lines and the cap's refusal as read whole; no trap",
            run: EtcdTargets.watch),
        FuzzTarget(
            name: "kvo-defaults-arguments",
            summary:
                "kvo-defaults' command line (NUL-separated): help, a command that holds what its usage says, or a usage error with a message",
            run: ToolArgumentsTargets.defaults),
        FuzzTarget(
            name: "kvo-bench-arguments",
            summary: "kvo-bench's command line (NUL-separated): a command that holds what its usage says, or a usage error with a message",
            run: ToolArgumentsTargets.bench),
    ]

    /// The target called `name`.
    package static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }
}
