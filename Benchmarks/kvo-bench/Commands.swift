import Foundation

// The small commands: --list, run, compare. The benchmark itself is in BenchmarkCommand.swift, the
// gate in Gate.swift.

func listScenarios() {
    let all = Scenarios.list
    let memory = Scenarios.memoryScenarios(quick: false)
    let width = (all.map(\.name.count) + memory.map(\.name.count)).max()!
    let implementationWidth = Implementation.allCases.map(\.rawValue.count).max()!
    func line(_ name: String, _ description: String) -> String {
        let implementation = Implementation(scenario: name).rawValue
        return "  \(implementation)\(String(repeating: " ", count: implementationWidth - implementation.count))  "
            + "\(name)\(String(repeating: " ", count: width - name.count))  \(description)"
    }
    for group in Scenario.Group.allCases {
        print(group.rawValue)
        for scenario in all where scenario.group == group {
            print(line(scenario.name, scenario.summary) + (scenario.baseline.map { " [vs \($0)]" } ?? ""))
        }
    }
    print("Memory")
    for scenario in memory {
        print(line(scenario.name, "bytes per \(scenario.unit): \(scenario.summary)") + (scenario.baseline.map { " [vs \($0)]" } ?? ""))
    }
    print("Cross-process")
    print(line(DefaultsLatency.name, "a change made by this process, seen by an observer in another process"))
}

func runOnce(_ name: String, iterations: Int) -> Never {
    let scenario = Scenarios.named(name)!
    let workload = scenario.makeWorkload()
    do throws(CheckFailure) {
        try runChecked(scenario, workload, iterations: iterations)
    } catch {
        fail(error.description, status: 1)
    }
    withExtendedLifetime(workload) {}
    print("\(name): \(iterations) iterations, result check passed")
    exit(0)
}

func compare(old: String, new: String, thresholdPercent: Double) -> Never {
    let results: (ResultsFile, ResultsFile)
    do throws(ResultsFileError) {
        results = (try readResultsFile(old), try readResultsFile(new))
    } catch {
        fail(error.description, status: 1)
    }
    let comparison = compareResults(old: results.0, new: results.1)
    print(comparisonReport(comparison, oldPath: old, newPath: new, thresholdPercent: thresholdPercent), terminator: "")
    exit(comparison.regressions(thresholdPercent: thresholdPercent).isEmpty ? 0 : regressionStatus)
}
