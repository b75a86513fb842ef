import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// Faults of plugind's own processes: workers, spares, primed workers and launchers killed from
/// outside at each step of a launch. Each launch succeeds through another path or fails with an
/// error that names plugind; no such death is recorded as the plugin's crash or counts toward a
/// quarantine; every process killed is reaped.
@Suite("Faults of plugind's own processes", .tags(.process, .root, .slow), .serialized, .timeLimit(.minutes(10)))
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
            let launcher = try await Deadline.wait("the pool's idle launcher killed, round \(round)") { [worker = host.worker] in
                try await LaunchPool.signalIdleLauncherWhenSettled(executable: worker, SIGKILL)
            }
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

    /// How many launches the launcher storm makes, and how many must answer (95%).
    static let stormLaunches = 402
    static let stormAnswersRequired = 382

    @Test(
        "launchers killed every 50 ms (longer when a launcher takes longer to start) through 402 launches: at least 95% answer, the rest fail with spawnFailed naming plugind's launcher; nothing counted, nothing leaked"
    )
    func launcherStorm() async throws {
        // In a process of its own: every launcher in it is this test's to kill, and its
        // descriptors and children are counted without other suites' in the way. Exit statuses
        // 40–48 name the check that failed; the child's last line says how many answered.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            ProcessInspection.ignoreInheritedDescriptors()
            var test = try TestHost()
            defer { test.remove() }
            try test.install(PluginFixture(library: "Echo"))
            let identifier = "org.plugind.tests.echo"
            // Every other launch with confinement off, forked on the spot by a launcher (never a
            // spare, never a primed worker); the others with every layer on, from a spare when
            // one is ready, else a launcher too (the launchers that fork spares die as well).
            let confined = try test.configuration(identifier)
            test.host.confinement = .disabled
            let open = try test.configuration(identifier)
            // The storm's period: 50 ms, or one and a half times as long as a launcher takes to get
            // ready on this machine now, if that is longer. A storm faster than a launcher can
            // start leaves no launcher to fork from, and no retry could help short of giving up a
            // layout of its own per worker; a loaded machine slows every launcher's start.
            try await Self.launchEachKind(open, confined)
            let period = try await Self.stormPeriod(open, confined)
            // Each of both kinds once more, before the storm, as after it: the event loop's
            // descriptors live for the process, the pool's are counted settled (its spares made
            // again) and without a primed worker.
            try await Self.launchEachKind(open, confined)
            await LaunchPool.settleAll()
            LaunchPool.discardPrimedAndWait()
            await PluginActivityStore.waitForPendingUpdates()
            let descriptorsBefore = ProcessInspection.openDescriptorKinds()

            let storm = LauncherStorm(period: period)
            storm.start()
            var answered = 0
            var failures: [String] = []
            var workers: [Int32] = []
            for index in 0..<Self.stormLaunches {
                let byte = UInt8(index % 256)
                do {
                    let process = try await Deadline.wait("launch \(index)") {
                        try await AppExtensionProcess(configuration: index.isMultiple(of: 2) ? open : confined)
                    }
                    workers.append(process.processIdentifier)
                    let answer = try await Deadline.wait("the answer to launch \(index)") {
                        try await process.makeConnection().send([byte])
                    }
                    guard answer == [byte] else { Self.fail(41, "launch \(index) answered \(answer)") }
                    await process.invalidateAndWait()
                    answered += 1
                } catch let error as AppExtensionError {
                    // The plugin is never named as the cause, and the launcher always is.
                    guard error.code == .spawnFailed, error.pluginIdentifier == identifier,
                        error.reason.contains("plugind's launcher"), error.reason.contains("the plugin is not at fault")
                    else { Self.fail(42, "launch \(index) failed otherwise: \(error.code): \(error)") }
                    failures.append(error.reason)
                }
            }
            let killed = storm.stop()
            let summary =
                "answered \(answered) of \(Self.stormLaunches), \(failures.count) spawnFailed, \(killed) launchers killed, "
                + "one every \(LauncherStorm.milliseconds(period)) ms"
                + (failures.first.map { "; first failure: \($0)" } ?? "")
            FileHandle.standardError.write(Data((summary + "\n").utf8))
            // Also beside the report, which keeps a child's words only when it fails.
            try? summary.write(toFile: path + ".count", atomically: false, encoding: .utf8)
            guard killed > 0 else { Self.fail(43, "no launcher was ever killed: " + summary) }
            guard answered >= Self.stormAnswersRequired else { Self.fail(44, "too few answers: " + summary) }

            // Nothing counted against the plugin.
            await CrashRecorder.waitForPendingRecords()
            let log = try CrashLog(host: test.host).read().get()
            guard log.plugins[identifier]?.crashes.isEmpty ?? true, log.plugins[identifier]?.quarantine == nil else {
                Self.fail(45, "the launchers' deaths counted against the plugin: \(String(describing: log.plugins[identifier]))")
            }
            // The pool whole again (one launch of each kind without the storm), then nothing left
            // behind: every worker reaped, no zombie, no descriptor more than before.
            try await Self.launchEachKind(open, confined)
            await LaunchPool.settleAll()
            LaunchPool.discardPrimedAndWait()
            await PluginActivityStore.waitForPendingUpdates()
            for pid in workers + ProcessInspection.zombieChildren() {
                guard await Deadline.reaped(pid) else { Self.fail(46, "process \(pid) was left unreaped") }
            }
            guard ProcessInspection.zombieChildren().isEmpty else { Self.fail(47, "zombies: \(ProcessInspection.zombieChildren())") }
            ProcessInspection.exitIfDescriptorsChanged(since: descriptorsBefore, status: 48)
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
        // The count is what this test measures: said, pass or fail (on standard error, unbuffered).
        let count = report.path + ".count"
        if let summary = try? String(contentsOfFile: count, encoding: .utf8) {
            FileHandle.standardError.write(Data("launcher storm: \(summary)\n".utf8))
        }
        unlink(count)
    }

    static func fail(_ status: Int32, _ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(status)
    }

    /// The pids of `pid` in each pid namespace it is in, outermost first (NSpid); nil once it
    /// is gone.
    static func namespacedPID(of pid: Int32) -> [Substring]? {
        let status = ProcessInspection.readProcFile("/proc/\(pid)/status")
        return status.split(separator: "\n").first { $0.hasPrefix("NSpid:") }?.split(separator: "\t").dropFirst().map { $0 }
    }

    /// One launch with confinement off, one with every layer on, each answering.
    static func launchEachKind(_ configurations: AppExtensionProcess.Configuration...) async throws {
        for configuration in configurations {
            let process = try await Deadline.wait("a launch outside the storm") {
                try await AppExtensionProcess(configuration: configuration)
            }
            guard let worker = Self.namespacedPID(of: process.processIdentifier), worker.count > 1 else {
                Self.fail(40, "the worker is not in a pid namespace of its own, so launchers cannot be told from workers")
            }
            guard try await process.makeConnection().send([7]) == [7] else { Self.fail(41, "a launch outside the storm") }
            await process.invalidateAndWait()
        }
    }

    /// 50 ms, or one and a half times the longest time the pool's recent launchers took to get
    /// ready, if that is longer; after three launches of each kind on launchers started anew
    /// (every launcher killed before).
    static func stormPeriod(_ configurations: AppExtensionProcess.Configuration...) async throws -> Duration {
        for _ in 0..<3 {
            for pid in LauncherStorm.killLaunchers() { _ = await Deadline.reaped(pid) }
            for configuration in configurations { try await launchEachKind(configuration) }
            await LaunchPool.settleAll()
        }
        let slowest = LaunchPool.recentLauncherStartTimes().max() ?? .zero
        return max(.milliseconds(50), slowest * 3 / 2)
    }

    /// A thread that kills every launcher of this process every `period`: each child with
    /// `--launcher` in its command line that is in this pid namespace only (workers and spares
    /// carry the same command line but are pid 1 of their own). Each is signalled through a
    /// pidfd opened before it is looked at, so a pid reaped and reused meanwhile is never hit.
    final class LauncherStorm: Sendable {
        private let state = Locked((stopping: false, killed: 0))
        private let finished = DispatchSemaphore(value: 0)
        private let period: Duration

        init(period: Duration) {
            self.period = period
        }

        func start() {
            Thread { [self] in
                while !state.withLock({ $0.stopping }) {
                    let killed = Self.killLaunchers().count
                    state.withLock { $0.killed += killed }
                    // The storm's period, not a wait for anything.
                    usleep(UInt32(clamping: Self.milliseconds(period) * 1000))
                }
                finished.signal()
            }.start()
        }

        /// Stops the storm and returns how many launchers it killed.
        func stop() -> Int {
            state.withLock { $0.stopping = true }
            finished.wait()
            return state.withLock { $0.killed }
        }

        static func milliseconds(_ duration: Duration) -> Int64 {
            duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        }

        /// Kills every launcher of this process; returns their pids.
        static func killLaunchers() -> [Int32] {
            var killed: [Int32] = []
            for pid in ProcessInspection.children(of: getpid()) {
                guard let process = try? FileDescriptor.processDescriptor(for: pid) else { continue }
                defer { process.close() }
                guard LauncherFaultTests.namespacedPID(of: pid)?.count == 1,
                    ProcessInspection.readProcFile("/proc/\(pid)/cmdline").split(separator: "\0").contains("--launcher"),
                    (try? process.sendSignal(SignalNumber.kill)) != nil
                else { continue }
                killed.append(pid)
            }
            return killed
        }
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
