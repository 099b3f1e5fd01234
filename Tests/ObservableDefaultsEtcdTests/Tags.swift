import Testing

extension Tag {
    /// Starts other processes (the command-line tools, the compiler, a child writer): slow on a busy
    /// machine. The README's quick test command skips the tests with this tag or `.stress` (by name:
    /// Swift 6.3 cannot filter by tag); `.ci/run` runs everything. The tag's name is the same in
    /// every test target, so a tag filter selects across all of them. A new tagged test joins the
    /// README's `--skip` list.
    @Tag static var processes: Self
    /// Loops of many threads or iterations.
    @Tag static var stress: Self
}
