/// Key arithmetic for ranges.
package enum EtcdKeys {
    /// The `range_end` that selects every key starting with `prefix`: the prefix with its trailing
    /// 0xFF bytes removed and its last byte then incremented. A prefix of only 0xFF bytes (or an empty
    /// one) has no such end: the result is `[0]`, which etcd reads as "every key from `key` on".
    ///
    /// - Complexity: O(n) in the prefix's length.
    package static func rangeEnd(forPrefix prefix: [UInt8]) -> [UInt8] {
        var end = prefix
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return [0]
    }
}
