/// A C host of a test's own on libplugind, built with AddressSanitizer and run with its leak check:
/// a bad read, write or free in the host or the library, or a leak at exit, fails the run (with
/// the one false report of the Swift runtime suppressed, explained in
/// Tests/CHost/lsan-suppressions.txt).
package enum SanitizedCHost {
    /// Compiles `source` to `output` against the built libplugind.
    package static func build(_ source: String, output: String) async throws {
        try await CCompiler.executable(
            source, output: output,
            flags: [
                "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-pthread", "-fsanitize=address",
                "-fno-omit-frame-pointer", "-g",
                "-I", BuiltProducts.packageRoot + "/Sources/CPlugindHostAPI/include",
                "-L", BuiltProducts.directory, "-lPlugindHost", "-Wl,-rpath," + BuiltProducts.directory,
            ])
    }

    /// Runs `host` with `arguments` against `test`'s directories and the built worker.
    ///
    /// LeakSanitizer stops the process's threads with ptrace to scan them at exit; when a thread
    /// is starting or ending just then (the host's pool and event threads wind down at exit), it
    /// can fail to stop it: the tool then gives up ("LeakSanitizer has encountered a fatal
    /// error") or scans without that thread's stack and registers and says its report may be
    /// false ("Running thread N was not suspended. False leaks are possible."). Both are the
    /// tool's failure, not a finding: such a run is repeated, at most twice. A report from a scan
    /// that stopped every thread never is.
    package static func run(_ host: String, _ arguments: [String], in test: TestHost) async throws -> CommandRunner.Output {
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        environment["ASAN_OPTIONS"] = "detect_leaks=1:exitcode=23:abort_on_error=0"
        environment["LSAN_OPTIONS"] =
            "suppressions=" + BuiltProducts.packageRoot + "/Tests/CHost/lsan-suppressions.txt:print_suppressions=0"
        var result = try await CommandRunner.run(host, arguments, environment: environment)
        for _ in 0..<2 where leakScanWasIncomplete(result.stderr) {
            result = try await CommandRunner.run(host, arguments, environment: environment)
        }
        return result
    }

    /// Whether LeakSanitizer said its own scan could not be trusted.
    package static func leakScanWasIncomplete(_ stderr: String) -> Bool {
        stderr.contains("LeakSanitizer has encountered a fatal error") || stderr.contains("False leaks are possible")
    }
}
