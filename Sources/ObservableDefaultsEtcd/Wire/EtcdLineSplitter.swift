/// Splits a byte stream into lines: a chunk may hold several lines, part of one, or the end of one and
/// the start of the next. The watch stream of the JSON gateway is one JSON object per line. Any split
/// of the same bytes gives the same lines and the same refusal.
package struct EtcdLineSplitter {
    /// What one `append` found.
    package struct Split: Equatable {
        /// The lines completed (without their newline, nor a carriage return before it; empty lines
        /// skipped), in order.
        package var lines: [[UInt8]] = []
        /// Whether a line (complete or not) after them is longer than `maximumLineLength`: the
        /// splitter reads nothing more.
        package var exceeded = false

        package init(lines: [[UInt8]] = [], exceeded: Bool = false) {
            self.lines = lines
            self.exceeded = exceeded
        }
    }

    private var pending: [UInt8] = []
    private var exceeded = false

    /// The longest line accepted (a watch reply with many large events can be long, not unbounded).
    package let maximumLineLength: Int

    package init(maximumLineLength: Int) {
        self.maximumLineLength = maximumLineLength
    }

    /// Appends `chunk` and returns the lines it completed, and whether a line exceeded the cap (then
    /// this call and every later one read nothing after it).
    package mutating func append(_ chunk: [UInt8]) -> Split {
        var split = Split()
        guard !exceeded else {
            split.exceeded = true
            return split
        }
        var start = chunk.startIndex
        while let newline = chunk[start...].firstIndex(of: UInt8(ascii: "\n")) {
            pending += chunk[start..<newline]
            if pending.last == UInt8(ascii: "\r") { pending.removeLast() }
            if pending.count > maximumLineLength { return refuse(split) }
            if !pending.isEmpty { split.lines.append(pending) }
            pending = []
            start = chunk.index(after: newline)
        }
        pending += chunk[start...]
        // A carriage return at the end may be the one before the newline: it does not count yet.
        let length = pending.count - (pending.last == UInt8(ascii: "\r") ? 1 : 0)
        return length > maximumLineLength ? refuse(split) : split
    }

    private mutating func refuse(_ split: Split) -> Split {
        exceeded = true
        pending = []
        var split = split
        split.exceeded = true
        return split
    }

    /// Bytes of an unfinished line.
    package var pendingCount: Int { pending.count }
}
