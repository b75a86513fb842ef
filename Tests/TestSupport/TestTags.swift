package import Testing

/// The tiers of the suites, so that a change can be checked in seconds before the whole run.
/// Every suite carries `unit` or `process`, and `root` or `slow` where they apply; its tests
/// inherit them. Documentation/Testing.md says how to run one tier (`Scripts/test.sh --quick`
/// runs the unit tier).
extension Tag {
    /// Runs in this process only: no child process, no worker, no nested build, no facility only
    /// root has. The whole tier takes seconds, so it is the check to run after every change.
    @Tag package static var unit: Self

    /// Starts processes: workers through a test host, the built `plugind`, compilers, tmux, or
    /// the test binary again for an exit test (`#expect(processExitsWith:)`).
    @Tag package static var process: Self

    /// Some of its tests need root: as an ordinary user they are skipped or check something else,
    /// so the suite means more run both ways (`Scripts/test.sh` as root runs it as `plugind-test`
    /// too).
    @Tag package static var root: Self

    /// Takes more than about 20 seconds on a quiet two-processor machine, or builds packages of
    /// its own (the suites of `NESTED_BUILD_SUITES` in Scripts/test.sh).
    @Tag package static var slow: Self
}
