import Foundation
import TestSupport
import Testing

@Suite("plugind run", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct RunCommandTests {
    @Test("the C and the Swift text filters print the expected output")
    func textFilters() async throws {
        let test = try TestHost()
        defer { test.remove() }
        for library in ["CTextFilter", "SwiftTextFilter"] {
            let fixture = PluginFixture(library: library)
            try await installApproved(fixture, in: test)
            let result = try await plugind("run", fixture.identifier, "Hello, plugind!", in: test)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout == "HELLO, PLUGIND!")
        }
    }

    @Test("--timeout: a huge value is a usage error, not a crash; a tiny one is kept, not rounded to zero")
    func timeoutValues() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "FaultyHang")
        try await installApproved(fixture, in: test)
        let huge = try await plugind("run", fixture.identifier, "x", "--timeout", "1e300", in: test)
        #expect(huge.status == 64, "\(huge.stderr)")
        #expect(huge.stderr.contains("--timeout is at most 31536000 seconds (a year), got '1e300'"))
        let tiny = try await plugind("run", fixture.identifier, "x", "--timeout", "0.0001", in: test)
        #expect(tiny.status != 0)
        #expect(tiny.stderr.contains("request did not finish within 100 µs"), "\(tiny.stderr)")
    }

    @Test("after --, an argument that looks like an option is input: 'run ID -- --help' sends --help")
    func optionsEnd() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo")
        try await installApproved(fixture, in: test)
        let result = try await plugind("run", fixture.identifier, "--", "--help", in: test)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "--help")
    }

    @Test("a plugin's log line with escape sequences reaches the terminal inert")
    func inertLog() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "FaultyHostileProbe")
        try await installApproved(fixture, in: test)
        let result = try await plugind("run", fixture.identifier, "log \u{1B}[8mhidden\u{1B}[0m\u{202E}", in: test)
        #expect(!result.stderr.contains("\u{1B}"), "\(result.stderr)")
        #expect(!result.stderr.contains("\u{202E}"))
        #expect(result.stderr.contains("plugin info: \\e[8mhidden\\e[0m\\u{202e}"), "\(result.stderr)")
    }

    @Test("1 MiB of random bytes on stdin or from --input comes back from the echo plugin byte for byte; --input reads a device too")
    func largeStdin() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo")
        try await installApproved(fixture, in: test)
        var generator = SystemRandomNumberGenerator()
        var payload: [UInt8] = []
        payload.reserveCapacity(1 << 20)
        for _ in 0..<(1 << 17) {
            withUnsafeBytes(of: generator.next() as UInt64) { payload.append(contentsOf: $0) }
        }
        let result = try await plugind("run", fixture.identifier, in: test, input: payload)
        #expect(result.status == 0, "\(result.stderr)")
        // Compare to a Bool: a failed #expect on two 1 MiB arrays would compute their diff.
        let identical = result.standardOutput == payload
        #expect(identical, "stdout differs from the \(payload.count) bytes sent (\(result.standardOutput.count) bytes back)")
        let fromFile = test.directory.path + "/input.bin"
        try Data(payload).write(to: URL(fileURLWithPath: fromFile))
        let viaOption = try await plugind("run", fixture.identifier, "--input", fromFile, in: test)
        let identicalViaOption = viaOption.standardOutput == payload
        #expect(identicalViaOption)
        // Not only a regular file: a device (or a pipe) is read to its end.
        let fromDevice = try await plugind("run", fixture.identifier, "--input", "/dev/null", in: test)
        #expect(fromDevice.status == 0, "\(fromDevice.stderr)")
        #expect(fromDevice.standardOutput.isEmpty)
    }

    @Test("distinct exit codes: not found, not approved, plugin error, crash, timeout, load failure")
    func exitCodes() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let notFound = try await plugind("run", "org.plugind.tests.nothing", "x", in: test)
        #expect(notFound.status == 69)
        #expect(notFound.stderr.hasPrefix("error: no plugin org.plugind.tests.nothing is installed"))

        let echo = PluginFixture(library: "Echo")
        try test.install(echo, bundled: false)
        let unapproved = try await plugind("run", echo.identifier, "x", in: test)
        #expect(unapproved.status == 77)
        #expect(unapproved.stderr.contains("plugind approve \(echo.identifier)"))

        let hog = PluginFixture(library: "FaultyDescriptorHog", extra: ["limits": ["openFiles": 16]])
        try await installApproved(hog, in: test)
        let pluginError = try await plugind("run", hog.identifier, "x", in: test)
        #expect(pluginError.status == 1)
        #expect(pluginError.stderr.contains("failed with code 1"))

        let crash = PluginFixture(library: "FaultySegfault")
        try await installApproved(crash, in: test)
        let crashed = try await plugind("run", crash.identifier, "x", in: test)
        #expect(crashed.status == 70)
        #expect(crashed.stderr.contains("crashed with SIGSEGV"))
        #expect(crashed.stderr.contains("note: last output of the plugin's worker:\n  | about to dereference NULL"))
        #expect(crashed.stderr.contains("note: where the plugin crashed:\n  #0 dereference_null_for_request+0x"), "\(crashed.stderr)")
        #expect(crashed.stderr.contains(" in libFaultySegfault.so (segfault.c:13)\n  #1 handle+0x"), "\(crashed.stderr)")
        // The crash log keeps the frames: 'plugind crashes' shows them, as text and JSON.
        let crashes = try await plugind("crashes", crash.identifier, in: test)
        #expect(crashes.status == 0)
        #expect(crashes.stdout.contains("\(crash.identifier)  1 crash(es)\n"), "\(crashes.stdout)")
        #expect(crashes.stdout.contains("crashed with SIGSEGV at address 0x0\n    #0 dereference_null_for_request+0x"), "\(crashes.stdout)")
        let crashesJSON = try await plugind("crashes", "--json", in: test)
        let document = try JSONSerialization.jsonObject(with: Data(crashesJSON.stdout.utf8)) as? [String: Any]
        let entries = document?["plugins"] as? [[String: Any]]
        let recorded = entries?.first { $0["identifier"] as? String == crash.identifier }?["crashes"] as? [[String: Any]]
        let frames = recorded?.first?["backtrace"] as? [[String: Any]]
        #expect(frames?.first?["function"] as? String == "dereference_null_for_request", "\(crashesJSON.stdout)")
        #expect(frames?.first?["line"] as? Int == 13)
        let none = try await plugind("crashes", "org.plugind.tests.never-crashed", in: test)
        #expect(none.status == 0 && none.stdout == "No crashes recorded for org.plugind.tests.never-crashed.\n")

        let hang = PluginFixture(library: "FaultyHang")
        try await installApproved(hang, in: test)
        let timedOut = try await plugind("run", hang.identifier, "x", "--timeout", "0.3", in: test)
        #expect(timedOut.status == 75)
        #expect(timedOut.stderr.contains("request did not finish within 300 ms"))
        #expect(timedOut.stderr.contains("note: where the request was when its deadline passed:\n  #0 pause+0x"), "\(timedOut.stderr)")
        #expect(timedOut.stderr.contains("#1 wait_forever_in_plugin+0x"), "\(timedOut.stderr)")

        let abi = PluginFixture(library: "FaultyWrongABI")
        try await installApproved(abi, in: test)
        let loadFailed = try await plugind("run", abi.identifier, "x", in: test)
        #expect(loadFailed.status == 78)
        #expect(loadFailed.stderr.contains("was built for plugin ABI 999"))

        let missingInput = try await plugind("run", echo.identifier, "--input", "/nonexistent/file", in: test)
        #expect(missingInput.status == 66)
    }

    @Test("what the sandbox refused the plugin is a line of run's output, naming the call and the layer")
    func refusalLine() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let probe = PluginFixture(library: "FaultyHostileProbe")
        try await installApproved(probe, in: test)
        let refused = try await plugind("run", probe.identifier, "socket-inet", in: test)
        #expect(refused.status == 0)
        #expect(refused.stdout == "refused EACCES")
        #expect(
            refused.stderr.contains(
                "the sandbox refused socket(AF_INET): the plugin has no network permission (seccomp, Permission denied)\n"),
            "\(refused.stderr)")
        let info = try await plugind("info", probe.identifier, "--no-probe", in: test)
        #expect(info.stdout.contains("  sandbox refused: 1 call(s), last "), "\(info.stdout)")
    }

    @Test("a limit the manifest asks more of than the host allows is said: info (text and JSON) and run name it and the cap")
    func cappedLimits() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let asked: UInt64 = 3 << 30
        let echo = PluginFixture(library: "Echo", extra: ["limits": ["memoryBytes": asked, "openFiles": 100]])
        try await installApproved(echo, in: test)
        let info = try await plugind("info", echo.identifier, "--no-probe", in: test)
        #expect(info.stdout.contains("    capped by this host: memoryBytes asks for 3 GiB, this host allows 1 GiB\n"), "\(info.stdout)")
        #expect(!info.stdout.contains("openFiles asks"), "\(info.stdout)")
        let json = try await plugind("info", echo.identifier, "--no-probe", "--json", in: test)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any])
        let capped = try #require((document["limits"] as? [String: Any])?["cappedByHost"] as? [[String: Any]], "\(json.stdout)")
        #expect(capped.count == 1, "\(capped)")
        #expect(capped.first?["limit"] as? String == "memoryBytes")
        #expect((capped.first?["requested"] as? NSNumber)?.uint64Value == asked)
        #expect((capped.first?["allowed"] as? NSNumber)?.uint64Value == 1 << 30)
        let run = try await plugind("run", echo.identifier, "x", in: test)
        #expect(run.status == 0 && run.stdout == "x", "\(run.stderr)")
        #expect(run.stderr.contains("note: \(echo.identifier): capped by this host: memoryBytes asks for 3 GiB"), "\(run.stderr)")
        // Within the host's caps: nothing to say.
        let plain = PluginFixture(library: "Echo", identifier: "org.plugind.tests.echo-plain")
        try await installApproved(plain, in: test)
        let quiet = try await plugind("run", plain.identifier, "x", in: test)
        #expect(quiet.status == 0 && !quiet.stderr.contains("capped"), "\(quiet.stderr)")
    }

    @Test("progress shows as plain lines when stderr is not a terminal")
    func progressLines() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Countdown")
        try await installApproved(fixture, in: test)
        let result = try await plugind("run", fixture.identifier, "3", in: test)
        #expect(result.status == 0)
        #expect(result.stdout == "counted down 3 steps\n")
        #expect(result.stderr == "progress: 0/3\nprogress: 1/3\nprogress: 2/3\nprogress: 3/3\n")
        let quiet = try await plugind("run", fixture.identifier, "3", "--quiet", in: test)
        #expect(quiet.stderr.isEmpty)
    }
}
