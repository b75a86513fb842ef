import Foundation
import Glibc
import TestSupport
import Testing

@testable import plugind

/// `plugind debug`: gdb attached to a confined worker, stopped in the plugin's init.
@Suite("plugind debug", .tags(.process), .serialized, .timeLimit(.minutes(2)))
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

    @Test(
        "the bundle's gdb scripts (.debug_gdb_scripts, <lib>-gdb.py, <lib>-gdb.gdb) are not run, even by a gdb whose safe-path would allow them"
    )
    func bundleScriptsNotLoaded() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") else {
            Issue.record("gdb is missing: Scripts/setup.sh installs it")
            return
        }
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        let library = try test.install(echo, bundled: false) + "/libEcho.so"
        let markers = try test.directory.subdirectory("markers")
        // An inline Python script in the section gdb reads from every object file it loads.
        let section = test.directory.path + "/debug_gdb_scripts"
        let inline = "gdb.inlined-script\nopen('\(markers)/section', 'w').close()\n"
        try Data([4] + Array(inline.utf8) + [0]).write(to: URL(fileURLWithPath: section))
        let objcopy = try await CommandRunner.run(
            "/usr/bin/objcopy", ["--add-section", ".debug_gdb_scripts=\(section)", library], environment: test.environment)
        try #require(objcopy.status == 0, "\(objcopy.stderr)")
        try Data("open('\(markers)/python', 'w').close()\n".utf8).write(to: URL(fileURLWithPath: library + "-gdb.py"))
        try Data("shell touch \(markers)/commands\n".utf8).write(to: URL(fileURLWithPath: library + "-gdb.gdb"))
        #expect(try await plugind("approve", echo.identifier, "--yes", in: test).status == 0)
        // A gdb whose safe-path is every directory (built or configured so): only the settings
        // plugind gives it stand between the bundle's scripts and the owner's account.
        let gdb = try await test.directory.executableFile(
            "permissive-gdb", contents: "#!/bin/sh\nexec /usr/bin/gdb -iex 'set auto-load safe-path /' \"$@\"\n")
        // The fixture is sound: that gdb, opening the library itself, runs all three scripts.
        let control = try await CommandRunner.run(gdb, ["-batch", "-nx", library], environment: test.environment)
        let loaded = try FileManager.default.contentsOfDirectory(atPath: markers).sorted()
        #expect(loaded == ["commands", "python", "section"], "\(control.stdout) \(control.stderr)")
        for marker in loaded { try FileManager.default.removeItem(atPath: markers + "/" + marker) }

        let debugged = try await plugind("debug", echo.identifier, "hello", "--batch", "--gdb", gdb, in: test)
        #expect(debugged.status == 0, "\(debugged.stderr)")
        #expect(debugged.stdout.contains("Temporary breakpoint 1, ") && debugged.stdout.contains("hello"), "\(debugged.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: markers).isEmpty, "\(debugged.stdout) \(debugged.stderr)")
    }

    @Test("gdb is started with every kind of script auto-loading off and the system's libthread_db only, settings gdb accepts")
    func autoLoadSettings() async throws {
        let arguments = DebugCommand.debuggerArguments(pid: 42, executable: "/usr/libexec/plugind-worker", batch: false)
        let settings = DebugCommand.scriptSettings
        #expect(settings.contains("set auto-load off") && settings.contains("set auto-load libthread-db on"))
        // Given before the executable is read, so that its own sections cannot act first.
        let executable = try #require(arguments.firstIndex(of: "/usr/libexec/plugind-worker"))
        for setting in settings {
            let index = try #require(arguments.firstIndex(of: setting), "\(setting) in \(arguments)")
            #expect(index < executable && arguments[index - 1] == "-iex", "\(arguments)")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") else {
            Issue.record("gdb is missing: Scripts/setup.sh installs it")
            return
        }
        let shown = try await CommandRunner.run(
            "/usr/bin/gdb",
            ["-batch", "-nx"] + settings.flatMap { ["-iex", $0] } + ["-ex", "show auto-load", "-ex", "show libthread-db-search-path"],
            environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
        // gdb says what it refuses on stderr, not as a warning ("Undefined set auto-load command").
        let refusals = shown.stderr.split(separator: "\n").filter { !$0.contains("warning:") }
        #expect(shown.status == 0 && refusals.isEmpty, "gdb refused a setting: \(shown.stderr)")
        for kind in ["gdb-scripts", "python-scripts", "local-gdbinit"] {
            #expect(
                shown.stdout.split(separator: "\n").contains { $0.hasPrefix("auto-load \(kind):") && $0.hasSuffix(" is off.") },
                "\(shown.stdout)")
        }
        #expect(shown.stdout.contains("libthread_db is on."), "\(shown.stdout)")
        #expect(shown.stdout.contains("libthread_db is \"$sdir\"."), "\(shown.stdout)")
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
