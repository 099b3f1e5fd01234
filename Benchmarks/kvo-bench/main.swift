// kvo-bench: see Arguments.swift for the command line.

import KVOToolArguments

let parsed = parseBenchArguments(Array(CommandLine.arguments.dropFirst())) { Scenarios.named($0) != nil }
let command: BenchCommand
switch parsed {
case .success(let parsedCommand): command = parsedCommand
case .failure(let error): fail("\(error.message)\nRun 'kvo-bench --help' for usage.", status: error.status)
}

switch command {
case .help:
    print(usage)
case .list:
    listScenarios()
case .run(let scenario, let iterations):
    runOnce(scenario, iterations: iterations)
case .benchmark(let options):
    benchmark(options)
case .compare(let old, let new, let thresholdPercent):
    compare(old: old, new: new, thresholdPercent: thresholdPercent)
case .gate(let options):
    gate(options)
case .contention(let options):
    Contention.run(options)
case .stress(let options):
    Stress.run(options)
case .watchDefaults(let file, let key, let directory):
    DefaultsLatency.watch(file: file, key: key, directory: directory)
case .soakWriter(let file, let index):
    SoakWriters.runWriter(file: file, index: index)
case .massRegistration(let implementation, let objects, let observers):
    MassRegistration.runChild(implementation: implementation, objects: objects, observers: observers)
case .updateDefaults(let location, let key, let count):
    EtcdBench.runUpdates(location: location, key: key, count: count)
}
