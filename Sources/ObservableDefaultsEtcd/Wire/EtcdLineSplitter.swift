/// Splits a byte stream into lines: a chunk may hold several lines, part of one, or the end of one and
/// the start of the next. The watch stream of the JSON gateway is one JSON object per line.
struct EtcdLineSplitter {
    private var pending: [UInt8] = []

    /// The longest line accepted (a watch reply with many large events can be long, not unbounded).
    let maximumLineLength: Int

    init(maximumLineLength: Int) {
        self.maximumLineLength = maximumLineLength
    }

    /// Appends `chunk` and returns the lines it completed (without their newline; empty lines skipped).
    /// Returns nil when a line (complete or not) is longer than `maximumLineLength`.
    mutating func append(_ chunk: [UInt8]) -> [[UInt8]]? {
        var lines: [[UInt8]] = []
        var start = chunk.startIndex
        while let newline = chunk[start...].firstIndex(of: UInt8(ascii: "\n")) {
            pending += chunk[start..<newline]
            if pending.last == UInt8(ascii: "\r") { pending.removeLast() }
            if pending.count > maximumLineLength { return nil }
            if !pending.isEmpty { lines.append(pending) }
            pending = []
            start = chunk.index(after: newline)
        }
        pending += chunk[start...]
        return pending.count > maximumLineLength ? nil : lines
    }

    /// Bytes of an unfinished line.
    var pendingCount: Int { pending.count }
}
