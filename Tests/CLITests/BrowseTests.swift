import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

/// `plugind browse` in a real terminal: tmux runs it, keys are sent with send-keys and the screen
/// is read with capture-pane. Every wait is for something on the screen or for the process to
/// end, with a deadline as a backstop.
@Suite("plugind browse in a terminal", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct BrowseTests {
    /// The shell script the pane runs: the program with the test host's environment, then how it
    /// ended and whether the terminal's modes are as they were before it started.
    static func script(_ command: [String], test: TestHost, environment extra: [String: String] = [:]) throws -> String {
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        environment["LANG"] = "C.UTF-8"
        // A crash test sends SIGSEGV: the runtime's backtrace is not what is being tested.
        environment["SWIFT_BACKTRACE"] = "enable=no"
        environment.merge(extra) { _, new in new }
        func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let exports = environment.sorted { $0.key < $1.key }.map { "export \($0.key)=\(quoted($0.value))" }
        return
            (exports + [
                "before=$(stty -g)",
                command.map(quoted).joined(separator: " "),
                "status=$?",
                #"if [ "$(stty -g)" = "$before" ]; then echo "terminal modes: restored"; else echo "terminal modes: CHANGED"; fi"#,
                #"echo "exited with $status""#,
                // The pane stays alive, so that tmux reports the cursor and screen the program left
                // (a dead pane's cursor reads as hidden); ending the server ends the shell.
                "read -r _",
            ]).joined(separator: "\n") + "\n"
    }

    /// Runs `plugind browse` in a terminal for `body`, and ends the terminal however it returns.
    static func browse(
        _ test: TestHost, _ arguments: [String] = [], width: Int = 80, height: Int = 24, environment: [String: String] = [:],
        _ body: (TmuxTerminal) async throws -> Void
    ) async throws {
        try await TmuxTerminal.with(
            directory: test.directory.path,
            script: script([try BuiltProducts.plugind(), "browse"] + arguments, test: test, environment: environment),
            width: width, height: height, body)
    }

    /// Waits for the pane's program to end, then checks that the terminal is as it was: modes,
    /// main screen, visible cursor. Returns the exit status the shell saw.
    static func expectTerminalRestored(_ terminal: TmuxTerminal) async throws -> Int? {
        let screen = try await terminal.waitForScreen(containing: "exited with")
        #expect(screen.contains("terminal modes: restored"), "\(screen)")
        #expect(try await terminal.value("#{alternate_on}") == "0", "still on the alternate screen")
        #expect(try await terminal.value("#{cursor_flag}") == "1", "the cursor is still hidden")
        let status = screen.split(separator: "\n").first { $0.hasPrefix("exited with ") }.flatMap {
            Int($0.dropFirst("exited with ".count))
        }
        return status
    }

    static func state(of identifier: String, in test: TestHost) async throws -> String? {
        let list = try await plugind("list", "--all", "--json", in: test)
        let document = try JSONSerialization.jsonObject(with: Data(list.standardOutput)) as? [String: Any]
        let plugins = document?["plugins"] as? [[String: Any]] ?? []
        return plugins.first { $0["identifier"] as? String == identifier }?["state"] as? String
    }

    /// The row of the list that names `identifier`.
    static func row(_ identifier: String, in screen: String) -> String? {
        screen.split(separator: "\n").map(String.init).first { $0.contains(identifier) && !$0.contains(":") }
    }

    @Test("opens, lists, filters, approves through the review, disables, follows an install, survives resizes, restores the terminal on q")
    func ownerSession() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        let pending = PluginFixture(library: "CTextFilter", name: "Pending filter")
        try test.install(pending, bundled: false)
        let (echoID, pendingID) = (echo.identifier, pending.identifier)
        try FileManager.default.createDirectory(atPath: test.externalRoot + "/broken.appex", withIntermediateDirectories: true)
        try Data("{".utf8).write(to: URL(fileURLWithPath: test.externalRoot + "/broken.appex/manifest.json"))

        try await Self.browse(test) { terminal in
            // Opens and lists: every plugin with its state in words, the broken bundle with why.
            var screen = try await terminal.waitForScreen("the list") { screen in
                screen.contains("3 plugin(s)") && screen.contains(echoID) && screen.contains(pendingID)
            }
            #expect(Self.row(echoID, in: screen)?.hasPrefix("available") == true, "\(screen)")
            #expect(Self.row(pendingID, in: screen)?.hasPrefix("unapproved") == true, "\(screen)")
            #expect(screen.contains("rejected"), "\(screen)")
            #expect(screen.contains("q quit"))
            #expect(try await terminal.value("#{alternate_on}") == "1")

            // Filters.
            try await terminal.send("/")
            try await terminal.type("pending")
            try await terminal.send("Enter")
            screen = try await terminal.waitForScreen("the filtered list") { $0.contains("filter: pending") && !$0.contains(echoID) }
            #expect(screen.contains(pendingID))

            // Approves through the review screen: what is granted, pinned to the bytes shown.
            try await terminal.send("a")
            screen = try await terminal.waitForScreen("the review") { $0.contains("Approve \(pendingID)?") && $0.contains("sha256:") }
            #expect(screen.contains("permissions:"))
            #expect(screen.contains("since the last approval: never approved before"))
            #expect(try await Self.state(of: pendingID, in: test) == "unapproved", "nothing is approved before y")
            try await terminal.send("y")
            screen = try await terminal.waitForScreen("the approval") { screen in
                screen.contains("Approved \(pendingID).") && Self.row(pendingID, in: screen)?.hasPrefix("available") == true
            }
            #expect(try await Self.state(of: pendingID, in: test) == "available")

            // Disables.
            try await terminal.send("d")
            try await terminal.waitForScreen("the plugin disabled") { Self.row(pendingID, in: $0)?.hasPrefix("disabled") == true }
            #expect(try await Self.state(of: pendingID, in: test) == "disabled")

            // A plugin installed from outside while the browser is open appears.
            try await terminal.send("/")
            try await terminal.send("Escape")
            let arrival = PluginFixture(library: "Echo", identifier: "org.plugind.tests.arrival", name: "Arrival")
            try test.install(arrival, bundled: false)
            screen = try await terminal.waitForScreen("the new plugin") {
                Self.row("org.plugind.tests.arrival", in: $0)?.hasPrefix("unapproved") == true
            }
            #expect(screen.contains("4 plugin(s)"))

            // Survives resizes: smaller than 80×24, then wide enough for every column.
            _ = try await terminal.tmux("resize-window", "-t", "test", "-x", "60", "-y", "16")
            screen = try await terminal.waitForScreen("the screen redrawn at 60 columns") { screen in
                let lines = screen.split(separator: "\n", omittingEmptySubsequences: false)
                return lines.count <= 17 && lines.allSatisfy { $0.count <= 60 } && screen.contains("q quit") && screen.contains("Arrival")
            }
            _ = try await terminal.tmux("resize-window", "-t", "test", "-x", "140", "-y", "30")
            try await terminal.waitForScreen("every column at 140") { screen in
                screen.contains("EXTENSION POINT") && screen.contains("PUBLISHER") && screen.contains("unsigned")
            }

            // Quits with q and gives the terminal back.
            try await terminal.send("q")
            #expect(try await Self.expectTerminalRestored(terminal) == 0)
        }
    }

    @Test(
        "SIGTERM, SIGINT, SIGHUP and a crash of the view give the terminal back, and end the program as the signal would",
        arguments: [SIGTERM, SIGINT, SIGHUP, SIGSEGV])
    func signals(_ signal: Int32) async throws {
        let test = try TestHost()
        defer { test.remove() }
        try await installApproved(PluginFixture(library: "Echo"), in: test)
        try await Self.browse(test) { terminal in
            try await terminal.waitForScreen(containing: "1 plugin(s)")
            #expect(try await terminal.value("#{alternate_on}") == "1")
            let program = try await terminal.programPID()
            #expect(kill(program, signal) == 0)
            #expect(try await Self.expectTerminalRestored(terminal) == 128 + Int(signal))
        }
    }

    @Test("states are marked with colour, and NO_COLOR leaves only the words")
    func noColor() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try await installApproved(PluginFixture(library: "Echo"), in: test)
        try test.install(PluginFixture(library: "CTextFilter"), bundled: false)
        for noColor in [false, true] {
            try await Self.browse(test, environment: noColor ? ["NO_COLOR": "1"] : [:]) { terminal in
                try await terminal.waitForScreen(containing: "2 plugin(s)")
                let styled = try await terminal.screen(styles: true)
                // Colours are SGR 30–38, 40–48 and 90–107; 39 and 49 (the defaults), reverse video (7),
                // bold (1) and dim (2) are not colours.
                let colours = styled.components(separatedBy: "\u{1B}[").dropFirst()
                    .flatMap { $0.prefix { $0 != "m" }.split(separator: ";").compactMap { Int($0) } }
                    .filter { (30...38).contains($0) || (40...48).contains($0) || (90...107).contains($0) }
                #expect(colours.isEmpty == noColor, "NO_COLOR=\(noColor): \(styled.debugDescription)")
                #expect(styled.contains("unapproved") && styled.contains("available"))
                try await terminal.send("q")
                #expect(try await Self.expectTerminalRestored(terminal) == 0)
            }
        }
    }

    @Test("without a terminal it prints the list like 'list --all' and exits 0")
    func withoutTerminal() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        let other = PluginFixture(library: "CTextFilter", extensionPoint: "org.plugind.tests.other")
        try test.install(other, bundled: false)
        let all = try await plugind("browse", in: test)
        #expect(all.status == 0)
        #expect(all.stdout == (try await plugind("list", "--all", in: test)).stdout)
        #expect(all.stdout.contains("\(other.identifier)  1.0.0  CTextFilter  [org.plugind.tests.other]  unapproved"))
        let onePoint = try await plugind("browse", "--point", "org.plugind.tests.other", in: test)
        #expect(onePoint.status == 0)
        #expect(onePoint.stdout.contains(other.identifier))
        #expect(!onePoint.stdout.contains(echo.identifier))
    }

    @Test("a host presents the browser when plugins wait for approval, sees the decision at once, and says why when it has no terminal")
    func hostPresentsBrowser() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let filter = PluginFixture(
            library: "CTextFilter", identifier: "org.plugind.tests.host-filter", extensionPoint: "org.plugind.examples.text-filters")
        try test.install(filter, bundled: false)
        let host = try BuiltProducts.path("plugind-example-host")

        let withoutTerminal = try await CommandRunner.run(
            host, ["--review", "hello"],
            environment: test.environment.merging(["PLUGIND_WORKER": try BuiltProducts.worker()]) { _, new in new })
        #expect(withoutTerminal.stderr.contains("standard input and output are not a terminal"), "\(withoutTerminal.stderr)")
        #expect(
            withoutTerminal.stderr.contains(
                "plugind browse --point org.plugind.examples.text-filters --point org.plugind.examples.greeters"))
        #expect(withoutTerminal.stdout.contains("No text filters are available"))

        let script = try Self.script([host, "--review", "hello"], test: test)
        try await TmuxTerminal.with(directory: test.directory.path, script: script, width: 100, height: 30) { terminal in
            try await terminal.waitForScreen(containing: "plugind browse org.plugind.examples.text-filters, org.plugind.examples.greeters")
            try await terminal.send("a")
            try await terminal.waitForScreen(containing: "Approve \(filter.identifier)?")
            try await terminal.send("y")
            try await terminal.waitForScreen(containing: "Approved \(filter.identifier).")
            try await terminal.send("q")
            // Back in the host, which runs the plugin the owner just approved.
            let screen = try await terminal.waitForScreen(containing: "exited with")
            #expect(screen.contains("CTextFilter: HELLO"), "\(screen)")
            #expect(screen.contains("exited with 0"), "\(screen)")
            #expect(screen.contains("terminal modes: restored"))
        }
    }
}
