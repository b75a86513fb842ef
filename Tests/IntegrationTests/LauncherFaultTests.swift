import ExtensionFoundation
import Foundation
import Glibc
import PlugindSystem
import TestSupport
import Testing

/// Faults of plugind's own processes: workers, spares, primed workers and launchers killed from
/// outside at each step of a launch. Each launch succeeds through another path or fails with an
/// error that names plugind; no such death is recorded as the plugin's crash or counts toward a
/// quarantine; every process killed is reaped.
@Suite("Faults of plugind's own processes", .serialized, .timeLimit(.minutes(3)))
struct LauncherFaultTests {
    /// A host whose worker executable is a copy of its own, so that its launch pool is one no
    /// other suite's launch uses (and whose spares and primed worker only this test touches).
    struct IsolatedHost {
        var test: TestHost
        let worker: String
        let identifier = "org.plugind.tests.echo"

        init() throws {
            test = try TestHost()
            worker = test.directory.path + "/plugind-worker"
            try FileManager.default.copyItem(atPath: try BuiltProducts.worker(), toPath: worker)
            test.host.workerExecutable = URL(fileURLWithPath: worker)
            try test.install(PluginFixture(library: "Echo"))
        }

        func configuration() throws -> AppExtensionProcess.Configuration {
            try test.configuration(identifier)
        }

        /// One launch answering one request.
        func launchAndAnswer(_ byte: UInt8) async throws -> AppExtensionProcess {
            let process = try await AppExtensionProcess(configuration: configuration())
            #expect(try await process.makeConnection().send([byte]) == [byte])
            return process
        }

        /// Neither a crash nor a quarantine of the plugin was recorded.
        func expectNothingCounted(_ comment: Comment) async throws {
            await CrashRecorder.waitForPendingRecords()
            let log = try CrashLog(host: test.host).read().get()
            #expect(log.plugins[identifier]?.crashes.isEmpty ?? true, comment)
            #expect(log.plugins[identifier]?.quarantine == nil, comment)
        }

        func remove() {
            LaunchPool.stopPools(executable: worker)
            test.remove()
        }
    }

    @Test(
        "a worker killed from outside mid-request, more often than a quarantine allows: workerKilled naming the plugin, a log entry, never a crash"
    )
    func workerKilledFromOutside() async throws {
        let host = try IsolatedHost()
        defer { host.remove() }
        try host.test.install(PluginFixture(library: "Countdown"))
        let countdown = try host.test.configuration("org.plugind.tests.countdown")
        let rounds = host.test.host.quarantine.crashes + 1
        for _ in 0..<rounds {
            let process = try await AppExtensionProcess(configuration: countdown)
            let pid = process.processIdentifier
            // Killed once the plugin reports it is working on the request.
            let pending = try await process.makeConnection().sendInFlight(Array("100000".utf8))
            #expect(kill(pid, SIGKILL) == 0)
            let error = await #expect(throws: AppExtensionError.self) { try await pending.value }
            #expect(error?.code == .workerKilled, "\(String(describing: error))")
            #expect(error?.description.contains("org.plugind.tests.countdown") == true)
            #expect(error?.reason.contains("does not count as a crash") == true, "\(String(describing: error))")
            #expect(await process.waitForTermination() == .signaled(signal: SIGKILL, name: "SIGKILL"))
            process.invalidate()
            #expect(await Deadline.reaped(pid))
        }
        await CrashRecorder.waitForPendingRecords()
        let log = try CrashLog(host: host.test.host).read().get()
        #expect(log.plugins["org.plugind.tests.countdown"]?.crashes.isEmpty ?? true, "a kill from outside counted against the plugin")
        #expect(log.plugins["org.plugind.tests.countdown"]?.quarantine == nil)
        // Each is in the plugin's log, as a warning of its own kind.
        PluginLogWriter.waitForAllPendingEntries(timeout: .seconds(10))
        let entries = PluginLogFile(directory: host.test.host.stateDirectory.appendingPathComponent("logs").path).entries()
        let killed = entries.filter { $0.event == .killed && $0.plugin == "org.plugind.tests.countdown" }
        #expect(killed.count == rounds, "\(entries.map { "\($0.event) \($0.message)" })")
        #expect(killed.allSatisfy { $0.priority == 4 })
        #expect(!entries.contains { $0.event == .crash || $0.event == .quarantine })
        // Still launchable: no quarantine stands in the way.
        let answer = try await AppExtensionProcess(configuration: countdown)
        #expect(String(decoding: try await answer.makeConnection().send(Array("1".utf8)), as: UTF8.self) == "counted down 1 steps\n")
        await answer.invalidateAndWait()
    }

    @Test(
        "the worker primed for the next launch killed while it waits: reaped with no launch to find it; that launch answers from another, nothing counted"
    )
    func primedWorkerKilled() async throws {
        let host = try IsolatedHost()
        defer { host.remove() }
        var killed = 0
        for round in 0..<4 {
            try await host.launchAndAnswer(UInt8(round)).invalidateAndWait()
            await LaunchPool.settleAll()
            guard let primed = LaunchPool.primedProcessIdentifier(executable: host.worker) else { continue }
            #expect(kill(primed, SIGKILL) == 0)
            killed += 1
            // Every other round the launch comes before the pool could notice the death; in the
            // others the pool reaps it first, with no launch to find it (the soak found primed
            // workers left zombies until their plugin's next launch, which may never come).
            if round.isMultiple(of: 2) { #expect(await Deadline.reaped(primed, seconds: 20), "the killed primed worker was left unreaped") }
            let process = try await host.launchAndAnswer(UInt8(round + 10))
            #expect(process.processIdentifier != primed)
            await process.invalidateAndWait()
            #expect(await Deadline.reaped(primed))
        }
        #expect(killed > 0, "no worker was ever primed")
        try await host.expectNothingCounted("a primed worker killed from outside counted against the plugin")
    }

    @Test("the pool's spares killed, before the launch notices or after: the launch answers, nothing counted")
    func sparesKilled() async throws {
        let host = try IsolatedHost()
        defer { host.remove() }
        var killed: [Int32] = []
        for round in 0..<4 {
            try await host.launchAndAnswer(UInt8(round)).invalidateAndWait()
            await LaunchPool.settleAll()
            // The primed worker would take the launch: out of the way, so that a spare must.
            LaunchPool.discardPrimedAndWait()
            var spares = LaunchPool.spareProcessIdentifiers(executable: host.worker)
            // A mount made by a test running in parallel ends every pool's spares and asks for
            // new ones a little later (CI: none listed once): settled again, they are there.
            for _ in 0..<5 where spares.isEmpty {
                await LaunchPool.settleAll()
                LaunchPool.discardPrimedAndWait()
                spares = LaunchPool.spareProcessIdentifiers(executable: host.worker)
            }
            #expect(!spares.isEmpty)
            for spare in spares { #expect(kill(spare, SIGKILL) == 0) }
            killed += spares
            if round.isMultiple(of: 2) {
                for spare in spares { #expect(await Deadline.processExit(spare)) }
            }
            try await host.launchAndAnswer(UInt8(round + 10)).invalidateAndWait()
        }
        for spare in killed { #expect(await Deadline.reaped(spare), "spare \(spare) was not reaped") }
        try await host.expectNothingCounted("a spare killed from outside counted against the plugin")
    }

    @Test("the idle launcher killed before a launch, again and again: every launch answers, each from a launcher made anew")
    func idleLauncherKilled() async throws {
        var host = try IsolatedHost()
        defer { host.remove() }
        // Confinement off: each worker is forked on the spot by the idle launcher, never a spare.
        host.test.host.confinement = .disabled
        for round in 0..<6 {
            try await host.launchAndAnswer(UInt8(round)).invalidateAndWait()
            await LaunchPool.settleAll()
            let launcher = try #require(LaunchPool.idleLauncherProcessIdentifier(executable: host.worker), "round \(round)")
            #expect(kill(launcher, SIGKILL) == 0)
            if round.isMultiple(of: 2) { #expect(await Deadline.processExit(launcher)) }
            let process = try await host.launchAndAnswer(UInt8(round + 10))
            await process.invalidateAndWait()
            #expect(await Deadline.reaped(launcher))
        }
        try await host.expectNothingCounted("a launcher killed from outside counted against the plugin")
    }

    @Test(
        "a launcher killed after its fork and before its answer: the launch answers from another path; the child it forked is found and reaped",
        .enabled(if: getuid() == 0, "strace must attach to the launcher, which is not dumpable: that takes CAP_SYS_PTRACE"),
        .enabled(if: ExternalToolCheck.available("strace"), "needs strace (Debian's strace), which Scripts/setup.sh installs")
    )
    func launcherKilledAfterFork() async throws {
        var host = try IsolatedHost()
        defer { host.remove() }
        // Confinement off: the worker is forked on the spot by the idle launcher, never a spare.
        host.test.host.confinement = .disabled
        try await host.launchAndAnswer(1).invalidateAndWait()
        // strace kills the launcher at its answer (the sendmsg after its fork), and writes the
        // clone's result (the child's pid) to its trace. The launcher may be replaced before
        // strace attaches, or answer something other than this launch first (the full suite's
        // load shifts what the pool does when): then the scenario runs again, up to five times.
        let trace = host.test.directory.path + "/launcher.trace"
        var observed: (launcher: Int32, clone: Substring)?
        var traces: [String] = []
        for _ in 0..<5 where observed == nil {
            await LaunchPool.settleAll()
            // No idle launcher (one being replaced) or one gone before strace attached: again.
            guard let launcher = LaunchPool.idleLauncherProcessIdentifier(executable: host.worker),
                let strace = try await Self.attachStrace(to: launcher, trace: trace)
            else { continue }
            defer {
                if strace.isRunning { strace.terminate() }
                strace.waitUntilExit()
            }
            // The launch answers: the pool falls back to a launcher of its own.
            try await host.launchAndAnswer(2).invalidateAndWait()
            #expect(await Deadline.reaped(launcher))
            #expect(await Deadline.processExit(strace.processIdentifier))
            let written = try String(contentsOfFile: trace, encoding: .utf8)
            traces.append(written)
            if let clone = written.split(separator: "\n").first(where: { $0.hasPrefix("clone(") }) { observed = (launcher, clone) }
        }
        let (_, clone) = try #require(observed, "the traced launcher never forked for the launch: \(traces)")
        let child = try #require(clone.split(separator: "=").last.flatMap { Int32($0.trimmingCharacters(in: .whitespaces)) })
        #expect(child > 0, "\(clone)")
        // The child the launcher never told the host of: still the host's child, never left a zombie.
        #expect(await Deadline.reaped(child, seconds: 20), "the launcher's child \(child) was left unreaped")
        try await host.expectNothingCounted("a launcher killed after its fork counted against the plugin")
    }

    /// strace attached to `launcher`, killing it at its first `sendmsg` and tracing its forks to
    /// `trace`; nil (and strace reaped) when it could not attach, the launcher being gone.
    static func attachStrace(to launcher: Int32, trace: String) async throws -> Foundation.Process? {
        let strace = Foundation.Process()
        strace.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        strace.arguments = ["-p", "\(launcher)", "-e", "trace=clone,sendmsg", "-e", "inject=sendmsg:signal=KILL", "-o", trace]
        let messages = Foundation.Pipe()
        strace.standardError = messages
        try strace.run()
        // Attached once it says so (the launch must not race the attach); end of file if it failed.
        let attached = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Thread {
                var said = ""
                while !said.contains("attached") {
                    let data = messages.fileHandleForReading.availableData
                    guard !data.isEmpty else { return continuation.resume(returning: false) }
                    said += String(decoding: data, as: UTF8.self)
                }
                continuation.resume(returning: true)
            }.start()
        }
        if attached { return strace }
        if strace.isRunning { strace.terminate() }
        strace.waitUntilExit()
        return nil
    }
}
