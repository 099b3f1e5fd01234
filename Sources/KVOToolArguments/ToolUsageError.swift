/// A command line a tool refuses: the message it prints (before "Run '… --help' for usage.") and
/// the status it exits with.
package struct ToolUsageError: Error, Equatable {
    package let message: String
    package let status: Int32

    package init(_ message: String, status: Int32 = 2) {
        self.message = message
        self.status = status
    }
}
