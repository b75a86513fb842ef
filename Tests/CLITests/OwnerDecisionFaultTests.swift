import Foundation
import Glibc
import TestSupport
import Testing

/// The owner's decisions under faults: `plugind` killed before each system call that changes a
/// file (every write, sync, rename, unlink, mkdir, chmod and truncate it makes, found by tracing
/// a run first), a sync failing with EIO, and — as root, on a small file system mounted for the
/// test — a full or read-only policy directory. After each, the files hold the old decision or
/// the new one (never a torn or empty one), the next process reads them, and the same command run
/// again succeeds. strace's syscall tampering (`--inject`) is the seam: nothing in plugind knows.
@Suite(
    "Owner decisions survive a kill at every step and a failing file system",
    .tags(.process, .root, .slow), .serialized, .timeLimit(.minutes(6)),
    .enabled(if: ExternalToolCheck.available("strace"), "needs strace (Debian's strace), which Scripts/setup.sh installs")
)
struct OwnerDecisionFaultTests {
    static var echo: PluginFixture { PluginFixture(library: "Echo") }
    /// The system calls that change what is on disk (or what a reader sees of it).
    static let mutatingCalls = [
        "write", "pwrite64", "writev", "fsync", "fdatasync", "rename", "renameat", "renameat2", "unlink", "unlinkat", "rmdir",
        "mkdir", "mkdirat", "linkat", "symlinkat", "fchmod", "fchmodat", "ftruncate",
    ]

    /// A decision to test: how to reach the state before it, the command, and what the next
    /// process sees of the decision.
    struct Decision: Sendable, CustomTestStringConvertible {
        var name: String
        var prepare: @Sendable (TestHost) async throws -> [String]
        var observe: @Sendable (TestHost) async throws -> String
        var testDescription: String { name }
    }

    /// The plugins `list --all --json` shows, each with its state, the problems it reports, and
    /// whether `policy check` finds every policy file usable.
    static func listed(_ test: TestHost) async throws -> String {
        let list = try await plugind("list", "--all", "--json", in: test)
        guard list.status == 0, let document = try? JSONSerialization.jsonObject(with: Data(list.standardOutput)) as? [String: Any] else {
            return "list failed (\(list.status)): \(list.stderr)"
        }
        let plugins = (document["plugins"] as? [[String: Any]] ?? []).map {
            "\($0["identifier"] ?? "?")@\($0["version"] ?? "?")=\($0["state"] ?? "?")"
        }
        let problems = (document["problems"] as? [[String: Any]] ?? []).map { "problem \($0["kind"] ?? "?")" }
        let check = try await plugind("policy", "check", in: test)
        return (plugins.sorted() + problems.sorted() + ["policy check \(check.status)"]).joined(separator: ", ")
    }

    static let decisions: [Decision] = [
        Decision(
            name: "approve",
            prepare: { test in
                try test.install(echo, bundled: false)
                return ["approve", echo.identifier, "--yes"]
            }, observe: listed),
        Decision(
            name: "disable",
            prepare: { test in
                try await installApproved(echo, in: test)
                return ["disable", echo.identifier]
            }, observe: listed),
        Decision(
            name: "enable",
            prepare: { test in
                try await installApproved(echo, in: test)
                _ = try await plugind("disable", echo.identifier, in: test)
                return ["enable", echo.identifier]
            }, observe: listed),
        Decision(
            name: "revoke",
            prepare: { test in
                try await installApproved(echo, in: test)
                return ["revoke", echo.identifier]
            }, observe: listed),
        Decision(
            name: "trust add",
            prepare: { test in
                let key = try test.directory.subdirectory("keys") + "/publisher"
                _ = try await plugind("keygen", "--output", key, in: test)
                return ["trust", "add", key + ".pub"]
            },
            observe: { test in
                // The fingerprints trusted (not when: a second run trusts later).
                let trusted = try await plugind("trust", "list", "--json", in: test)
                let document = try? JSONSerialization.jsonObject(with: Data(trusted.standardOutput)) as? [String: Any]
                let entries = document?["publishers"] as? [[String: Any]] ?? []
                return "\(trusted.status) \(entries.map { "\($0["fingerprint"] ?? "?")" }.sorted()) \(try await listed(test))"
            }),
        Decision(
            name: "install",
            prepare: { test in
                ["install", try echo.install(in: try test.directory.subdirectory("work"))]
            }, observe: installed),
        Decision(
            name: "install --force (a different build replaces the installed one)",
            prepare: { test in
                _ = try await plugind("install", try echo.install(in: try test.directory.subdirectory("work")), in: test)
                let rebuilt = PluginFixture(library: "Echo", extra: ["version": "1.0.1"])
                return ["install", try rebuilt.install(in: try test.directory.subdirectory("rebuilt")), "--force"]
            }, observe: installed),
        Decision(
            name: "uninstall",
            prepare: { test in
                let bundle = try echo.install(in: try test.directory.subdirectory("work"))
                _ = try await plugind("install", bundle, in: test)
                return ["uninstall", echo.identifier]
            }, observe: installed),
    ]

    /// What the user's plugin directory holds (visible entries) and what `list` makes of it.
    static func installed(_ test: TestHost) async throws -> String {
        let directory = test.directory.path + "/data/plugind/plugins"
        let entries = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }
        return "\(entries.sorted()) \(try await listed(test))"
    }

    /// What a killed run may leave and the next run must clear: temporary policy files, hidden
    /// staging directories in the plugin directory.
    static func leftovers(_ test: TestHost) -> [String] {
        let policy = test.directory.path + "/config/plugind"
        let plugins = test.directory.path + "/data/plugind/plugins"
        let temporary = ((try? FileManager.default.contentsOfDirectory(atPath: policy)) ?? []).filter {
            $0.hasPrefix("policy.json.") && $0 != "policy.json.lock"
        }
        let hidden = ((try? FileManager.default.contentsOfDirectory(atPath: plugins)) ?? []).filter { $0.hasPrefix(".") }
        return temporary + hidden
    }

    /// The test's directory as it was before the decision, put back before every run.
    struct Snapshot {
        let test: TestHost
        let copy: String

        init(_ test: TestHost) async throws {
            self.test = test
            copy = test.directory.path + ".snapshot"
            let made = try await CommandRunner.run("/bin/cp", ["-a", test.directory.path, copy], environment: [:])
            #expect(made.status == 0, "\(made.stderr)")
        }

        func restore() async throws {
            let removed = try await CommandRunner.run("/bin/rm", ["-rf", test.directory.path], environment: [:])
            let copied = try await CommandRunner.run("/bin/cp", ["-a", copy, test.directory.path], environment: [:])
            #expect(removed.status == 0 && copied.status == 0, "\(removed.stderr) \(copied.stderr)")
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: copy)
        }
    }

    /// `plugind arguments` under strace with `options`.
    static func traced(_ test: TestHost, _ options: [String], _ arguments: [String]) async throws -> CommandRunner.Output {
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        return try await CommandRunner.run(
            "/usr/bin/strace", ["-f", "-qq"] + options + ["--", try BuiltProducts.plugind()] + arguments, environment: environment)
    }

    /// How often each thread of one run made each mutating call: the highest count per call.
    static func callCounts(_ test: TestHost, _ arguments: [String]) async throws -> [String: Int] {
        let trace = test.directory.path + "/../trace-\(getpid())"
        defer { unlink(trace) }
        let run = try await traced(test, ["-o", trace, "-e", "trace=" + mutatingCalls.joined(separator: ",")], arguments)
        #expect(run.status == 0, "the traced run failed: \(run.stderr)")
        var perThread: [String: Int] = [:]
        let text = (try? String(contentsOfFile: trace, encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") {
            // "<tid> <call>(…": a call as it starts (resumed halves begin with "<...").
            // (strace pads the tid to five columns.)
            let fields = line.split(separator: " ", maxSplits: 1)
            guard fields.count == 2 else { continue }
            let rest = fields[1].drop { $0 == " " }
            guard let open = rest.firstIndex(of: "(") else { continue }
            let call = String(rest[..<open])
            guard mutatingCalls.contains(call) else { continue }
            perThread["\(fields[0]) \(call)", default: 0] += 1
        }
        var counts: [String: Int] = [:]
        for (key, count) in perThread {
            let call = String(key.split(separator: " ")[1])
            counts[call] = max(counts[call] ?? 0, count)
        }
        return counts
    }

    @Test(
        "killed before each file-changing call: the old decision or the new, read by the next process; the command then succeeds",
        arguments: decisions)
    func killedAtEveryStep(decision: Decision) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let arguments = try await decision.prepare(test)
        let snapshot = try await Snapshot(test)
        defer { snapshot.remove() }
        let before = try await decision.observe(test)
        let counts = try await Self.callCounts(test, arguments)
        let after = try await decision.observe(test)
        #expect(before != after, "the decision changed nothing to observe: \(after)")
        #expect(!counts.isEmpty)
        var kills = 0
        var sawBefore = false
        for (call, count) in counts.sorted(by: { $0.key < $1.key }) {
            for step in 1...count {
                try await snapshot.restore()
                let run = try await Self.traced(
                    test, ["-o", "/dev/null", "-e", "trace=\(call)", "-e", "inject=\(call):signal=KILL:when=\(step)"], arguments)
                if run.status != 0 { kills += 1 }
                let seen = try await decision.observe(test)
                #expect(seen == before || seen == after, "killed at \(call) #\(step): \(seen)\nbefore: \(before)\nafter: \(after)")
                sawBefore = sawBefore || seen == before
                // Where the decision was not made yet, the next process makes it, whatever the
                // killed one left behind.
                guard seen == before else { continue }
                let again = try await plugind(arguments, in: test)
                #expect(again.status == 0, "after a kill at \(call) #\(step), \(arguments.joined(separator: " ")) failed: \(again.stderr)")
                #expect(try await decision.observe(test) == after, "after a kill at \(call) #\(step) and a second run")
                #expect(Self.leftovers(test).isEmpty, "after a kill at \(call) #\(step) and a second run: \(Self.leftovers(test))")
            }
        }
        #expect(kills > 0, "no run was killed: \(counts)")
        #expect(sawBefore, "no kill came before the decision was made: \(counts)")
    }

    @Test(
        "a sync that fails with EIO: the decision fails naming the file and the cause; the old one stands",
        arguments: ["approve", "disable", "trust add"])
    func syncFails(name: String) async throws {
        let decision = try #require(Self.decisions.first { $0.name == name })
        let test = try TestHost()
        defer { test.remove() }
        let arguments = try await decision.prepare(test)
        let before = try await decision.observe(test)
        let run = try await Self.traced(test, ["-o", "/dev/null", "-e", "trace=fsync", "-e", "inject=fsync:error=EIO"], arguments)
        #expect(run.status != 0)
        #expect(run.stderr.contains("policy.json") && run.stderr.contains("Input/output error"), "\(run.stderr)")
        #expect(try await decision.observe(test) == before)
    }

    @Test(
        "a full or read-only policy directory: the decision fails naming the file and the cause; the old one stands and is read",
        .enabled(if: getuid() == 0, "mounting the small file system needs root; as a user the EIO case stands for it")
    )
    func fullAndReadOnly() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try await installApproved(Self.echo, in: test)
        let config = test.directory.path + "/config"
        let kept = test.directory.path + "/config.kept"
        #expect(rename(config, kept) == 0)
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: false)
        #expect(mount("tmpfs", config, "tmpfs", 0, "size=256k,mode=0700") == 0, "mount: \(String(cString: strerror(errno)))")
        defer { umount2(config, Int32(MNT_DETACH)) }
        let copied = try await CommandRunner.run("/bin/cp", ["-a", kept + "/.", config], environment: [:])
        #expect(copied.status == 0, "\(copied.stderr)")
        let before = try await Self.listed(test)
        #expect(before.contains("\(Self.echo.identifier)@1.0.0=available"), "\(before)")
        // Full: a file takes every block that is left (dd stops at ENOSPC).
        _ = try await CommandRunner.run("/bin/dd", ["if=/dev/zero", "of=" + config + "/filler", "bs=4096"], environment: [:])
        let full = try await plugind("disable", Self.echo.identifier, in: test)
        #expect(full.status != 0)
        #expect(full.stderr.contains("policy.json") && full.stderr.contains("No space left on device"), "\(full.stderr)")
        #expect(try await Self.listed(test) == before)
        unlink(config + "/filler")
        // Read-only.
        #expect(mount("tmpfs", config, "tmpfs", UInt(MS_REMOUNT | MS_RDONLY), "size=256k,mode=0700") == 0)
        let readOnly = try await plugind("disable", Self.echo.identifier, in: test)
        #expect(readOnly.status != 0)
        #expect(readOnly.stderr.contains("policy") && readOnly.stderr.contains("Read-only file system"), "\(readOnly.stderr)")
        #expect(try await Self.listed(test) == before)
        // Writable again: the same command works.
        #expect(mount("tmpfs", config, "tmpfs", UInt(MS_REMOUNT), "size=256k,mode=0700") == 0)
        #expect(try await plugind("disable", Self.echo.identifier, in: test).status == 0)
        #expect(try await Self.listed(test).contains("\(Self.echo.identifier)@1.0.0=disabled"))
    }
}
