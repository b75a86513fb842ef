import Foundation
import TestSupport
import Testing

/// `plugind debug`: gdb attached to a confined worker, stopped in the plugin's init.
@Suite("plugind debug", .serialized, .timeLimit(.minutes(2)))
struct DebugCommandTests {
    @Test("batch mode: gdb stops in the plugin's init with its backtrace, detaches, and the plugin then answers")
    func batch() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") else {
            Issue.record("gdb is missing: Scripts/setup.sh installs it")
            return
        }
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        let debugged = try await plugind("debug", echo.identifier, "hello", "--batch", "--gdb", "/usr/bin/gdb", in: test)
        #expect(debugged.status == 0, "\(debugged.stderr)")
        // Stopped before init (the worker's SIGTRAP), then at the init's first instruction.
        #expect(debugged.stdout.contains("SIGTRAP"), "\(debugged.stdout)")
        #expect(debugged.stdout.contains("Temporary breakpoint 1, "), "\(debugged.stdout)")
        let backtrace = debugged.stdout.split(separator: "\n").filter { $0.hasPrefix("#") }
        #expect(backtrace.first?.contains("echo_init") == true, "\(debugged.stdout)")
        #expect(backtrace.count >= 2, "the init's callers in the worker: \(debugged.stdout)")
        // Detached, the plugin loaded and answered the request.
        let answer = debugged.stdout.range(of: "hello")
        let stop = debugged.stdout.range(of: "Temporary breakpoint 1, ")
        #expect(answer != nil && stop != nil && answer!.lowerBound > stop!.upperBound, "\(debugged.stdout)")
        #expect(debugged.stderr.contains("traceable by your debugger"))
    }

    @Test("a plugin that is not approved is refused before anything starts; a debugger that is not there is named")
    func refusals() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try test.install(echo, bundled: false)
        let unapproved = try await plugind("debug", echo.identifier, "--batch", "--gdb", "/usr/bin/gdb", in: test)
        #expect(unapproved.status == 77, "\(unapproved.stderr)")
        let missing = try await plugind("debug", echo.identifier, "--gdb", "/nonexistent/gdb", in: test)
        #expect(missing.status == 69)
        #expect(missing.stderr.contains("/nonexistent/gdb is not an executable file"))
    }
}
