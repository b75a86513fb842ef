import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

/// What running plugins do, as the owner sees it: `plugind logs` (the per-user file, and the
/// journal where one can be started), `plugind top` and the last activity in `plugind info`.
@Suite("plugind logs, top and the last activity", .tags(.process, .root), .timeLimit(.minutes(3)))
struct ActivityCommandTests {
    static var probe: PluginFixture { PluginFixture(library: "FaultyHostileProbe") }
    static let probeID = "org.plugind.tests.faultyhostileprobe"

    /// The table row that names `identifier`.
    static func row(_ identifier: String, in screen: String) -> String? {
        screen.split(separator: "\n").first { $0.contains(identifier) }.map(String.init)
    }

    /// Every entry `plugind logs --json` prints (one object per line).
    static func entries(_ test: TestHost, _ arguments: [String] = [], environment: [String: String] = [:]) async throws -> [[String: Any]] {
        let output = try await plugind(["logs", "--json"] + arguments, in: test, environment: environment)
        #expect(output.status == 0, "\(output.stderr)")
        return output.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test("a plugin's log line reaches plugind logs with the fields that name it, inert as text; the owner's decisions are there too")
    func logLine() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(Self.probe)
        let connection = try await process.makeConnection()
        _ = try await connection.send(Array("log hello \u{1B}[31mred".utf8))
        let worker = process.processIdentifier
        await process.invalidateAndWait()
        await PluginLogWriter.forHost(test.host)?.waitForPendingEntries()
        let logged = try await Self.entries(test, [Self.probe.identifier]).filter { $0["event"] as? String == "log" }
        let line = try #require(logged.first, "no log entry")
        #expect(line["message"] as? String == "hello \u{1B}[31mred")
        #expect(line["plugin"] as? String == Self.probe.identifier)
        #expect(line["level"] as? String == "info" && line["priority"] as? Int == 6)
        #expect(line["hostPID"] as? Int == Int(getpid()) && line["workerPID"] as? Int == Int(worker))
        #expect(line["hostIdentifier"] as? String == test.host.identifier)
        #expect((line["hostExecutable"] as? String)?.hasSuffix("plugindPackageTests.xctest") == true)
        #expect(line["pluginVersion"] as? String == "1.0.0")
        // As text: the escape sequence is shown, not obeyed.
        let text = try await plugind("logs", Self.probe.identifier, in: test)
        #expect(text.stdout.contains("\(Self.probe.identifier)[\(worker)] info: hello \\e[31mred"), "\(text.stdout)")
        #expect(!text.stdout.contains("\u{1B}"))
        // Another plugin's entries are not shown for this one; --since in the future shows none.
        #expect(try await Self.entries(test, ["org.plugind.tests.other"]).isEmpty)
        #expect(try await Self.entries(test, ["--since", "2999-01-01"]).isEmpty)
        let bad = try await plugind("logs", "--since", "last tuesday", in: test)
        #expect(bad.status == 64 && bad.stderr.contains("is not a time"), "\(bad.stderr)")

        // The owner's decisions, from the command line.
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        #expect(try await plugind("disable", echo.identifier, in: test).status == 0)
        let decisions = try await Self.entries(test, [echo.identifier]).compactMap { $0["event"] as? String }
        #expect(decisions == ["approve", "disable"])
    }

    @Test("crashes and the quarantine they start are in the log, naming the signal")
    func crashes() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let faulty = PluginFixture(library: "FaultySegfault")
        try test.install(faulty)
        for _ in 0..<3 {
            let process = try await AppExtensionProcess(configuration: try test.configuration(faulty.identifier))
            _ = try? await process.makeConnection().send([1])
            _ = await process.waitForTermination()
        }
        await CrashRecorder.waitForPendingRecords()
        await PluginLogWriter.forHost(test.host)?.waitForPendingEntries()
        let entries = try await Self.entries(test, [faulty.identifier])
        let crashes = entries.filter { $0["event"] as? String == "crash" }
        #expect(crashes.count == 3, "\(entries)")
        #expect(crashes.allSatisfy { ($0["message"] as? String)?.contains("SIGSEGV") == true && $0["priority"] as? Int == 3 })
        let quarantine = try #require(entries.first { $0["event"] as? String == "quarantine" }, "\(entries)")
        #expect((quarantine["message"] as? String)?.contains("3 crashes within") == true)
    }

    @Test("a flood of log lines is bounded: at most the burst and the rate get through, and one entry says how many were dropped")
    func flood() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(Self.probe)
        let started = ContinuousClock.now
        _ = try await process.makeConnection().send(Array("log-flood 5000".utf8))
        await process.invalidateAndWait()
        let elapsed = ContinuousClock.now - started
        await PluginLogWriter.forHost(test.host)?.waitForPendingEntries()
        let entries = try await Self.entries(test, [Self.probe.identifier])
        let lines = entries.filter { $0["event"] as? String == "log" }.count
        let seconds = Double(elapsed.components.seconds) + 1
        #expect(lines >= 100 && Double(lines) <= 100 + 50 * seconds, "\(lines) lines in \(elapsed)")
        let dropped = entries.filter { $0["event"] as? String == "dropped" }.compactMap { $0["message"] as? String }
        let counted = dropped.compactMap { Int($0.prefix { $0.isNumber }) }.reduce(0, +)
        #expect(counted + lines == 5000, "\(dropped)")
    }

    @Test("--follow shows a line logged after it started")
    func follow() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(Self.probe)
        defer { process.invalidate() }
        let connection = try await process.makeConnection()
        _ = try await connection.send(Array("log before".utf8))
        await PluginLogWriter.forHost(test.host)?.waitForPendingEntries()
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        let child = try StreamingChild(try BuiltProducts.plugind(), ["logs", Self.probe.identifier, "--follow"], environment: environment)
        defer { child.stop() }
        _ = try await Deadline.wait("the line logged before") { await child.line { $0.hasSuffix("info: before") } }
        _ = try await connection.send(Array("log after".utf8))
        let after = try await Deadline.wait("the line logged after --follow started") { await child.line { $0.hasSuffix("info: after") } }
        #expect(after != nil, "\(child.errors)")
    }

    @Test(
        "in the journal: a plugind entry with its fields, read back by plugind logs (a journald namespace started for the test)",
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/lib/systemd/systemd-journald"),
            "needs root and systemd-journald to start a journal namespace; the log file was tested instead")
    )
    func journal() async throws {
        var test = try TestHost()
        defer { test.remove() }
        let namespace = "plugind-test-\(getpid())"
        let journald = try await Self.startJournal(namespace: namespace)
        defer { Self.stopJournal(journald, namespace: namespace) }
        let socket = PluginLogWriter.journalSocketPath(namespace: namespace)
        test.host.pluginLog = .automatic
        test.host.journalNamespace = namespace
        #expect(PluginLogWriter.sink(for: test.host) == .journal(socket: socket, namespace: namespace))
        let process = try await test.launch(Self.probe)
        _ = try await process.makeConnection().send(Array("log into the journal".utf8))
        let worker = process.processIdentifier
        await process.invalidateAndWait()
        await PluginLogWriter.forHost(test.host)?.waitForPendingEntries()
        let environment = ["PLUGIND_LOG": "journal", "PLUGIND_JOURNAL_NAMESPACE": namespace]
        // journald takes the datagram in its own time: read until it shows.
        let reader = test
        let found = try await Deadline.wait("the entry in the journal") { () -> Int in
            while true {
                let entries = try await Self.entries(reader, [Self.probeID], environment: environment)
                if let index = entries.firstIndex(where: { $0["message"] as? String == "into the journal" }) { return index }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let line = try await Self.entries(test, [Self.probeID], environment: environment)[found]
        #expect(line["workerPID"] as? Int == Int(worker) && line["hostPID"] as? Int == Int(getpid()))
        #expect(line["level"] as? String == "info" && line["pluginVersion"] as? String == "1.0.0")
    }

    @Test(
        "in the journal: root sees whose each entry is, and an entry another user forged as plugind's is shown as theirs; a user sees their own only",
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/lib/systemd/systemd-journald"),
            "needs root and systemd-journald to start a journal namespace and to send as another user; the match was unit-tested")
    )
    func journalUsers() async throws {
        var test = try TestHost()
        defer { test.remove() }
        let namespace = "plugind-users-\(getpid())"
        let journald = try await Self.startJournal(namespace: namespace)
        defer { Self.stopJournal(journald, namespace: namespace) }
        let socket = PluginLogWriter.journalSocketPath(namespace: namespace)
        test.host.pluginLog = .automatic
        test.host.journalNamespace = namespace
        let process = try await test.launch(Self.probe)
        _ = try await process.makeConnection().send(Array("log from root's host".utf8))
        await process.invalidateAndWait()
        await PluginLogWriter.forHost(test.host)?.waitForPendingEntries()
        // Another user's process sends an entry with plugind's fields, and claims uid 0: journald
        // drops fields a sender gives that begin with '_', and stamps its own.
        let other: uid_t = 65534
        let forger = test.directory.path + "/forger"
        try await CCompiler.executable(Self.forgerSource, output: forger)
        let forged = try await CommandRunner.run(forger, [socket, String(other), Self.probeID], environment: [:])
        try #require(forged.status == 0, "the forger could not send: \(forged.status) \(forged.stderr)")

        let environment = ["PLUGIND_LOG": "journal", "PLUGIND_JOURNAL_NAMESPACE": namespace]
        let reader = test
        try await Deadline.wait("both entries in the journal") {
            while true {
                let entries = try await Self.entries(reader, [Self.probeID], environment: environment)
                if entries.contains(where: { $0["message"] as? String == "forged crash" }),
                    entries.contains(where: { $0["message"] as? String == "from root's host" })
                {
                    return
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let entries = try await Self.entries(test, [Self.probeID], environment: environment)
        let otherName = try #require(getpwuid(other)).pointee.pw_name.map { String(cString: $0) } ?? String(other)
        let mine = try #require(entries.first { $0["message"] as? String == "from root's host" })
        #expect(mine["uid"] as? Int == 0 && mine["user"] as? String == "root", "\(mine)")
        let theirs = try #require(entries.first { $0["message"] as? String == "forged crash" })
        #expect(theirs["uid"] as? Int == Int(other) && theirs["user"] as? String == otherName, "\(theirs)")
        #expect(theirs["event"] as? String == "crash")
        let text = try await plugind(["logs", Self.probeID], in: test, environment: environment)
        let lines = text.stdout.split(separator: "\n")
        #expect(lines.contains { $0.contains(" root \(Self.probeID)[") && $0.hasSuffix("info: from root's host") }, "\(text.stdout)")
        #expect(lines.contains { $0.contains(" \(otherName) \(Self.probeID) crash: forged crash") }, "\(text.stdout)")

        // The other user reads the same journal (made readable to it here): its own entry only.
        let journals = Self.journalDirectories(namespace: namespace)
        try #require(!journals.isEmpty, "no journal files for \(namespace)")
        for path in journals {
            chmod(path, 0o755)
            for file in try FileManager.default.contentsOfDirectory(atPath: path) { chmod(path + "/" + file, 0o644) }
        }
        let home = try TemporaryDirectory()
        defer { home.remove() }
        chown(home.path, other, other)
        var userEnvironment = environment
        userEnvironment["HOME"] = home.path
        userEnvironment["XDG_STATE_HOME"] = home.path + "/state"
        userEnvironment["XDG_CONFIG_HOME"] = home.path + "/config"
        userEnvironment["XDG_DATA_HOME"] = home.path + "/data"
        userEnvironment["PLUGIND_RUNTIME_DIR"] = home.path + "/run"
        userEnvironment["PATH"] = test.environment["PATH"]
        let asUser = try await CommandRunner.run(
            "/usr/bin/setpriv",
            ["--reuid=\(other)", "--regid=\(other)", "--clear-groups", "--", try BuiltProducts.plugind(), "logs", "--json", Self.probeID],
            environment: userEnvironment)
        #expect(asUser.status == 0, "\(asUser.stderr)")
        let seen = asUser.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(seen.map { $0["message"] as? String } == ["forged crash"], "\(asUser.stdout) \(asUser.stderr)")
        #expect(seen.allSatisfy { $0["uid"] as? Int == Int(other) })
    }

    /// Sends one entry to the journal socket argv[1] as uid argv[2] with plugind's fields for the
    /// plugin argv[3], claiming uid 0 in a field of its own.
    static let forgerSource = """
        #include <grp.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <sys/socket.h>
        #include <sys/un.h>
        #include <unistd.h>

        int main(int argc, char **argv) {
            if (argc != 4) return 2;
            uid_t uid = (uid_t)strtoul(argv[2], NULL, 10);
            if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) return 3;
            int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            struct sockaddr_un address = {.sun_family = AF_UNIX};
            strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
            char entry[1024];
            int length = snprintf(entry, sizeof entry,
                "MESSAGE=forged crash\\nPRIORITY=3\\nSYSLOG_IDENTIFIER=plugind\\nPLUGIND_EVENT=crash\\n"
                "PLUGIND_PLUGIN=%s\\n_UID=0\\n", argv[3]);
            if (fd < 0 || length <= 0 || length >= (int)sizeof entry) return 4;
            return sendto(fd, entry, (size_t)length, 0, (struct sockaddr *)&address, sizeof address) == length ? 0 : 5;
        }
        """

    /// Starts systemd-journald for `namespace` and waits for its socket.
    static func startJournal(namespace: String) async throws -> Process {
        let journald = Process()
        journald.executableURL = URL(fileURLWithPath: "/lib/systemd/systemd-journald")
        journald.arguments = [namespace]
        journald.standardOutput = FileHandle.nullDevice
        journald.standardError = FileHandle.nullDevice
        try journald.run()
        let socket = PluginLogWriter.journalSocketPath(namespace: namespace)
        do {
            try await Deadline.wait("journald's socket") {
                while !FileManager.default.fileExists(atPath: socket) { try await Task.sleep(for: .milliseconds(10)) }
            }
        } catch {
            stopJournal(journald, namespace: namespace)
            throw error
        }
        return journald
    }

    /// Ends the namespace's journald and removes its socket directory and journal files.
    static func stopJournal(_ journald: Process, namespace: String) {
        journald.terminate()
        journald.waitUntilExit()
        try? FileManager.default.removeItem(atPath: "/run/systemd/journal.\(namespace)")
        for directory in journalDirectories(namespace: namespace) { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Where the namespace's journald keeps its files, `<machine-id>.<namespace>`: in
    /// /var/log/journal where that exists (persistent storage), else in /run/log/journal.
    static func journalDirectories(namespace: String) -> [String] {
        ["/run/log/journal", "/var/log/journal"].flatMap { root in
            ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).filter { $0.hasSuffix("." + namespace) }.map {
                root + "/" + $0
            }
        }
    }

    @Test("top --json lists the workers of two hosts with their hosts' pids and the requests each was sent; info shows the last activity")
    func topSnapshot() async throws {
        let test = try TestHost()
        defer { test.remove() }
        // Host one: this process, three answered requests and one that fails.
        let process = try await test.launch(Self.probe)
        defer { process.invalidate() }
        let connection = try await process.makeConnection()
        for _ in 0..<3 { _ = try await connection.send(Array("log counted".utf8)) }
        _ = try? await connection.send(Array("no-such-vector x".utf8))
        // Host two: `plugind run` of a plugin that never answers, its one request in flight.
        let hang = PluginFixture(library: "FaultyHang")
        try test.install(hang)
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        environment["PLUGIND_BUNDLED_PLUGINS_DIR"] = test.bundledRoot
        let other = Process()
        other.executableURL = URL(fileURLWithPath: try BuiltProducts.plugind())
        other.arguments = ["run", hang.identifier, "x", "--timeout", "3600", "--quiet"]
        other.environment = environment
        other.standardOutput = FileHandle.nullDevice
        other.standardError = FileHandle.nullDevice
        try other.run()
        defer {
            kill(other.processIdentifier, SIGKILL)
            other.waitUntilExit()
        }
        let hangID = hang.identifier
        let snapshot = try await Deadline.wait("both workers in top") { () -> [UInt8] in
            while true {
                let output = try await plugind(["top", "--json"], in: test)
                let document = try? JSONSerialization.jsonObject(with: Data(output.standardOutput)) as? [String: Any]
                let rows = document?["workers"] as? [[String: Any]] ?? []
                if rows.contains(where: { $0["plugin"] as? String == hangID && $0["requestsInFlight"] as? Int == 1 }),
                    rows.contains(where: { $0["plugin"] as? String == Self.probeID })
                {
                    return output.standardOutput
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let rows = try #require((try JSONSerialization.jsonObject(with: Data(snapshot)) as? [String: Any])?["workers"] as? [[String: Any]])
        let mine = try #require(rows.first { $0["plugin"] as? String == Self.probe.identifier })
        #expect(mine["hostPID"] as? Int == Int(getpid()) && mine["workerPID"] as? Int == Int(process.processIdentifier))
        // The unknown vector is the plugin's error: a failed request.
        #expect(mine["requestsAnswered"] as? Int == 3 && mine["requestsFailed"] as? Int == 1, "\(mine)")
        #expect(mine["requestsInFlight"] as? Int == 0 && mine["state"] as? String == "running")
        #expect((mine["memoryBytes"] as? Int ?? 0) > 0 && (mine["memoryLimitBytes"] as? Int ?? 0) > 0)
        let theirs = try #require(rows.first { $0["plugin"] as? String == hangID })
        #expect(theirs["hostPID"] as? Int == Int(other.processIdentifier), "\(theirs)")
        #expect(theirs["requestsAnswered"] as? Int == 0 && theirs["requestsFailed"] as? Int == 0)
        #expect(rows.count == 2, "\(rows)")

        // Once the worker ends, its requests are in the plugin's last activity.
        await process.invalidateAndWait()
        await PluginActivityStore.waitForPendingUpdates()
        let info = try await plugind(
            "info", Self.probeID, "--no-probe", in: test, environment: ["PLUGIND_BUNDLED_PLUGINS_DIR": test.bundledRoot])
        #expect(info.stdout.contains("(1 launch(es)); 3 request(s) answered, 1 failed"), "\(info.stdout) \(info.stderr)")
    }

    @Test("top in a terminal shows the workers and updates as requests are answered; q quits and gives the terminal back")
    func topLive() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(Self.probe)
        defer { process.invalidate() }
        let connection = try await process.makeConnection()
        _ = try await connection.send(Array("log one".utf8))
        try await TmuxTerminal.with(
            directory: test.directory.path, script: BrowseTests.script([try BuiltProducts.plugind(), "top"], test: test), width: 160,
            height: 20
        ) { terminal in
            let first = try await terminal.waitForScreen("the worker's row") {
                Self.row(Self.probeID, in: $0) != nil && $0.contains("plugind top")
            }
            #expect(first.contains("ANSWERED") && first.contains("HOST PID"))
            for _ in 0..<4 { _ = try await connection.send(Array("log more".utf8)) }
            // Answered 5 now: the row's count changes on the next refresh.
            let updated = try await terminal.waitForScreen("the row to show 5 answered") { screen in
                guard let line = Self.row(Self.probeID, in: screen) else { return false }
                return line.split(separator: " ").contains("5")
            }
            #expect(Self.row(Self.probeID, in: updated)?.contains(String(getpid())) == true, "\(updated)")
            try await terminal.send("m")
            _ = try await terminal.waitForScreen(containing: "sorted by memory")
            try await terminal.send("q")
            let ended = try await terminal.waitForScreen(containing: "exited with")
            #expect(ended.contains("exited with 0") && ended.contains("terminal modes: restored"), "\(ended)")
        }
    }
}
