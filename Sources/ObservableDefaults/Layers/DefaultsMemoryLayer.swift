import KeyValueObserving

/// A layer of values that code sets: for tests, for a value computed at startup, for an override an
/// administrator applies at run time. Put it in a store's layers with `DefaultsLayer.memory(_:isSecret:)`;
/// what it holds answers before the layers below it and the store's back end.
///
/// ```swift
/// let overrides = DefaultsMemoryLayer()
/// let store = DefaultsStore(suiteName: "com.example.player", layers: [.memory(overrides)])
/// overrides[speed] = 2.0          // store[speed] is 2.0; its observers are told now, on this thread
/// overrides.removeValue(for: speed)   // the file's value answers again
/// ```
///
/// Nothing it holds is written anywhere. A set notifies the observers of every store made with the
/// layer whose effective value it changes, before it returns, on the setting thread, as a store's
/// own set does. `DefaultsMemoryLayer` is `Sendable`: use it from any thread.
public final class DefaultsMemoryLayer: Sendable {
    private struct State {
        var values: [String: MemoryValue] = [:]
        var generation: UInt64 = 0
        var stacks: [WeakStack] = []
    }

    /// A value the layer holds, with the generation of its set (every set is a change, as a
    /// store's own set is, even of an equal value).
    package struct MemoryValue: Sendable {
        package let value: any Codable & Sendable
        package let generation: UInt64
    }

    private struct WeakStack: Sendable {
        weak var stack: DefaultsLayerStack?
    }

    private let state = Locked(State())

    /// An empty layer.
    public init() {}

    /// The value the layer holds for `key`, or `nil` if it holds none (a value of another type set
    /// under the same name reads as `nil` here, and is decoded for each store's key).
    public subscript<Value>(key: DefaultsKey<Value>) -> Value? {
        get { state.withLock { $0.values[key.name]?.value as? Value } }
        set {
            if let newValue { set(newValue, forName: key.name) } else { removeValue(for: key) }
        }
    }

    /// Sets the value of `key` in this layer.
    ///
    /// - Parameters:
    ///   - value: the value.
    ///   - key: the key.
    public func set<Value>(_ value: Value, for key: DefaultsKey<Value>) {
        set(value, forName: key.name)
    }

    /// Removes `key` from this layer: the layers below it answer again.
    ///
    /// - Parameter key: the key.
    public func removeValue<Value>(for key: DefaultsKey<Value>) {
        change(key.name) { _ in nil }
    }

    /// Removes every value.
    public func removeAll() {
        let names = state.withLock { Array($0.values.keys) }
        for name in names { change(name) { _ in nil } }
    }

    /// The names of the keys the layer holds.
    public var keys: Set<String> { state.withLock { Set($0.values.keys) } }

    private func set(_ value: any Codable & Sendable, forName name: String) {
        change(name) { MemoryValue(value: value, generation: $0) }
    }

    /// Applies one change under the lock, then tells the stores made with the layer (lock released).
    private func change(_ name: String, _ make: (UInt64) -> MemoryValue?) {
        // The replaced value and the stacks are let go after the lock: a value's or a store's deinit
        // runs no code under it.
        let (stacks, replaced): ([DefaultsLayerStack], MemoryValue?) = state.withLock { state in
            state.generation &+= 1
            let old = state.values[name]
            if let new = make(state.generation) {
                state.values[name] = new
            } else {
                guard old != nil else { return ([], nil) }
                state.values[name] = nil
            }
            let live = state.stacks.compactMap(\.stack)
            state.stacks = live.map { WeakStack(stack: $0) }
            return (live, old)
        }
        withExtendedLifetime(replaced) {}
        for stack in stacks { stack.layerChanged(self, names: [name]) }
    }

    /// What the layer holds for `name`.
    func value(forName name: String) -> MemoryValue? {
        state.withLock { $0.values[name] }
    }

    /// Every value, for a description.
    func allValues() -> [String: MemoryValue] {
        state.withLock { $0.values }
    }

    /// Tells `stack` of this layer's changes from now on (weakly: a store's end ends it).
    func attach(_ stack: DefaultsLayerStack) {
        state.withLock { $0.stacks.append(WeakStack(stack: stack)) }
    }
}
