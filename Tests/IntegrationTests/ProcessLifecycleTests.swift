import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

@Suite("Worker lifecycle and failures", .tags(.process, .root), .serialized, .timeLimit(.minutes(10)))
struct ProcessLifecycleTests {
    /// Launches and ends `configuration`'s plugin until a worker is primed for its next launch
    /// (one is when a spare is ready after the launch), and returns that worker's pid.
    static func primeWorker(_ configuration: AppExtensionProcess.Configuration) async -> Int32? {
        for _ in 0..<5 {
            await LaunchPool.settleAll()
            guard (try? await AppExtensionProcess.withProcess(configuration: configuration) { _ in }) != nil else { return nil }
            await LaunchPool.settleAll()
            if let pid = LaunchPool.primedProcessIdentifier { return pid }
        }
        return nil
    }

    @Test("a crash in handle is a typed error naming the signal; the host lives; onInterruption fires once")
    func crash() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let interruptions = InterruptionCounter()
        let process = try await test.launch(PluginFixture(library: "FaultySegfault"), onInterruption: interruptions.handler)
        let pid = process.processIdentifier
        let error = await #expect(throws: AppExtensionError.self) { try await process.makeConnection().send([1]) }
        #expect(error?.code == .workerCrashed)
        #expect(error?.termination == .signaled(signal: SIGSEGV, name: "SIGSEGV"))
        #expect(error?.description.contains("org.plugind.tests.faultysegfault") == true)
        #expect(error?.description.contains("SIGSEGV") == true)
        #expect(error?.standardErrorTail.contains("about to dereference NULL for request") == true)
        try await Deadline.wait("onInterruption") { await interruptions.firstCall() }
        _ = await process.waitForTermination()
        #expect(!ProcessInspection.exists(pid))
        // Later requests fail at once with the same cause; invalidating afterwards calls nothing.
        let later = await #expect(throws: AppExtensionError.self) { try await process.makeConnection().send([2]) }
        #expect(later?.code == .invalidated || later?.code == .workerCrashed)
        process.invalidate()
        #expect(interruptions.count == 1)
    }

    @Test("a launcher that dies mid-launch: the launch falls back to a launcher of its own and says why; the pool recovers")
    func launcherDiesMidLaunch() async throws {
        var test = try TestHost()
        defer { test.remove() }
        // A copy of the worker: a pool of this test's own, which no other suite's launch uses.
        let worker = test.directory.path + "/plugind-worker"
        try FileManager.default.copyItem(atPath: try BuiltProducts.worker(), toPath: worker)
        defer { LaunchPool.stopPools(executable: worker) }
        test.host.workerExecutable = URL(fileURLWithPath: worker)
        // Confinement off: forked on the spot by the pool's idle launcher, never from a spare.
        test.host.confinement = .disabled
        try test.install(PluginFixture(library: "Echo"))
        let configuration = try test.configuration("org.plugind.tests.echo")
        try await AppExtensionProcess(configuration: configuration).invalidateAndWait()
        // Stopped, it takes the request and cannot answer; killed then, it never will.
        let launcher = try await Deadline.wait("the pool's idle launcher stopped") {
            try await LaunchPool.signalIdleLauncherWhenSettled(executable: worker, SIGSTOP)
        }
        let launch = Task { try await AppExtensionProcess(configuration: configuration) }
        try await Deadline.wait("the launch's request to the stopped launcher") {
            await LaunchPool.awaitRequest(executable: worker, toLauncher: launcher)
        }
        #expect(kill(launcher, SIGKILL) == 0)
        let process = try await Deadline.wait("the launch") { try await launch.value }
        let cause = try #require(process.launchFallbackCause)
        #expect(cause.contains("launcher (pid \(launcher)) ended before it answered"), "\(cause)")
        #expect(try await process.makeConnection().send([7]) == [7])
        await process.invalidateAndWait()
        #expect(await Deadline.processExit(launcher))
        // The pool made a new launcher: the next launch is its own again.
        let next = try await AppExtensionProcess(configuration: configuration)
        #expect(next.launchFallbackCause == nil)
        #expect(try await next.makeConnection().send([8]) == [8])
        await next.invalidateAndWait()
    }

    @Test("launches back to back each get a worker, whether their spare has finished getting ready or not")
    func backToBackLaunches() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo"))
        let configuration = try test.configuration("org.plugind.tests.echo")
        // Each launch takes a spare and asks for the next: some find one still getting ready, some
        // hand one its work just as it says it is ready. Every launch must answer.
        for round in 0..<24 {
            let process = try await AppExtensionProcess(configuration: configuration)
            let answer = try await process.makeConnection().send([UInt8(round)])
            #expect(answer == [UInt8(round)])
            await process.invalidateAndWait()
        }
    }

    @Test("launches in quick succession, each taking the worker primed by the one before, all succeed")
    func primedTakenAsItIsPublished() async throws {
        // The worker primed after a launch is published on the event loop's thread while the
        // next launch may take it on another. It used to be watched only after it was published:
        // a launch that took it in between watched its pidfd first, and one of the two
        // registrations failed ("cannot watch the worker: epoll_ctl: File exists"), about once
        // in a few hundred launches (found by the benchmark of 1,000 live workers).
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo"))
        var configuration = try test.configuration("org.plugind.tests.echo")
        configuration.sharing = .dedicated
        var processes: [AppExtensionProcess] = []
        defer { for process in processes { process.invalidate() } }
        for _ in 0..<400 {
            let process = try await AppExtensionProcess(configuration: configuration)
            processes.append(process)
            // A few alive at once, like a host's; the rest ended without waiting.
            if processes.count > 8 { processes.removeFirst().invalidate() }
        }
        for process in processes {
            #expect(try await process.makeConnection().send([7]) == [7])
            await process.invalidateAndWait()
        }
        processes.removeAll()
    }

    @Test("a host that turns confinement off gets a worker that restricted nothing ahead, though spares are ready")
    func unconfinedLaunchSkipsSpares() async throws {
        var test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo"))
        // Spares ready and restricted ahead: they must not be handed to this launch.
        _ = try await AppExtensionProcess(configuration: test.configuration("org.plugind.tests.echo")).invalidateAndWait()
        await LaunchPool.settleAll()
        test.host.confinement = .disabled
        let process = try await AppExtensionProcess(configuration: test.configuration("org.plugind.tests.echo"))
        #expect(process.confinement.map(\.state) == [.notRequested])
        #expect(try await process.makeConnection().send([7]) == [7])
        await process.invalidateAndWait()
    }

    @Test("abort() is reported as SIGABRT even though the worker is pid 1 of its namespace")
    func abort() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "FaultyAbort"))
        let error = await #expect(throws: AppExtensionError.self) { try await process.makeConnection().send([]) }
        #expect(error?.code == .workerCrashed)
        #expect(error?.termination == .signaled(signal: SIGABRT, name: "SIGABRT"))
        #expect(error?.standardErrorTail.contains("giving up: abort()") == true)
    }

    @Test("a hung request hits its deadline; the stuck worker is killed and reaped")
    func hang() async throws {
        var test = try TestHost()
        defer { test.remove() }
        // The kill after the grace is what this test checks, not a backstop.
        test.host.cancellationGracePeriod = .milliseconds(500)
        let interruptions = InterruptionCounter()
        let process = try await test.launch(PluginFixture(library: "FaultyHang"), onInterruption: interruptions.handler)
        let pid = process.processIdentifier
        let error = await #expect(throws: AppExtensionError.self) {
            try await process.makeConnection().send([], timeout: .milliseconds(300))
        }
        // The reason names the deadline that ended the wait; how long it took on a loaded
        // machine is the benchmarks' business, not this test's.
        #expect(error?.code == .timedOut)
        #expect(error?.reason == "request did not finish within 300 ms")
        // Where it hung, taken before the cancel: in the kernel's pause, called by the plugin's
        // own function, called by its handler.
        let functions = error?.backtrace.compactMap(\.function) ?? []
        #expect(functions.first == "pause", "\(error?.backtrace ?? [])")
        #expect(functions.dropFirst().prefix(2) == ["wait_forever_in_plugin", "handle"], "\(error?.backtrace ?? [])")
        // The plugin ignores the cancel, so after the grace period the worker is killed.
        let termination = await process.waitForTermination()
        #expect(termination == .signaled(signal: SIGKILL, name: "SIGKILL"))
        #expect(!ProcessInspection.exists(pid))
        try await Deadline.wait("onInterruption") { await interruptions.firstCall() }
    }

    @Test("a cancelled task's request fails with cancelled")
    func cancellation() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Countdown"))
        let connection = try await process.makeConnection()
        // Cancelled once the plugin reports it is working on the request.
        let request = await connection.sendInFlight(Array("1000".utf8))
        request.cancel()
        let error = await #expect(throws: AppExtensionError.self) { try await request.value }
        #expect(error?.code == .cancelled)
        // Countdown honours cancellation, so the worker stays usable.
        let answer = try await connection.send(Array("1".utf8))
        #expect(String(decoding: answer, as: UTF8.self) == "counted down 1 steps\n")
        await process.invalidateAndWait()
    }

    @Test("invalidate fails pending requests, never calls onInterruption, and reaps the worker")
    func invalidateWhileBusy() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let interruptions = InterruptionCounter()
        let process = try await test.launch(PluginFixture(library: "Countdown"), onInterruption: interruptions.handler)
        let pid = process.processIdentifier
        let connection = try await process.makeConnection()
        // Invalidate once the plugin reports it is working on the request: before that, the
        // request may not have been sent yet, and fails as sent on a closed connection.
        let pending = await connection.sendInFlight(Array("100000".utf8))
        process.invalidate()
        // Invalidating the handle closes its connections first (other handles may share the
        // worker), so the request fails as one whose connection closed while it waited.
        let error = await #expect(throws: AppExtensionError.self) { try await pending.value }
        #expect(error?.code == .connectionClosed)
        _ = await process.waitForTermination()
        #expect(!ProcessInspection.exists(pid))
        #expect(interruptions.count == 0)
        await #expect(throws: AppExtensionError.self) { try await process.makeConnection() }
    }

    @Test(
        "invalidate ends an idle worker cleanly, through its deinit, with exit status 0",
        arguments: [AppExtensionHost.LaunchStrategy.preforked, .spawn])
    func cleanShutdown(strategy: AppExtensionHost.LaunchStrategy) async throws {
        var test = try TestHost()
        defer { test.remove() }
        test.host.launchStrategy = strategy
        let process = try await test.launch(PluginFixture(library: "Echo"))
        #expect(try await process.makeConnection().send([7]) == [7])
        await process.invalidateAndWait()
        #expect(await process.waitForTermination() == .exited(status: 0))
    }

    @Test("a hello larger than the pipe's buffer (a manifest with the most and longest paths allowed) still launches")
    func largeHello() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let padding = String(repeating: "a-path-long-enough-to-add-up/", count: 30)
        let paths = (0..<256).map { "/nonexistent/plugind-large-hello/\($0)/" + padding }
        let process = try await test.launch(PluginFixture(library: "Echo", extra: ["permissions": ["read": paths]]))
        #expect(try await process.makeConnection().send([42]) == [42])
        await process.invalidateAndWait()
    }

    @Test("workers come from the pre-forked launcher, which forks without exec and has exactly one thread")
    func launcherSingleThreaded() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        // Forked from the launcher, not spawned: it carries the launcher's command line.
        #expect(ProcessInspection.readProcFile("/proc/\(process.processIdentifier)/cmdline").contains("--launcher"))
        await process.invalidateAndWait()
        await LaunchPool.settleAll()
        // Workers and spares carry the launcher's command line too, but live in pid namespaces of
        // their own (two pids in NSpid); the launcher does not.
        let launchers = ProcessInspection.children(of: getpid()).filter {
            let nsPID = ProcessInspection.readProcFile("/proc/\($0)/status").split(separator: "\n").first { $0.hasPrefix("NSpid:") }
            return ProcessInspection.readProcFile("/proc/\($0)/cmdline").contains("--launcher")
                && nsPID?.split(separator: "\t").count == 2
        }
        #expect(!launchers.isEmpty)
        for launcher in launchers {
            let status = ProcessInspection.readProcFile("/proc/\(launcher)/status")
            // A launcher ends once it has forked its spare: one listed a moment ago may be gone.
            guard !status.isEmpty else { continue }
            #expect(status.contains("Threads:\t1\n"), "launcher \(launcher): \(status)")
        }
    }

    @Test("a plugin launched again takes the worker primed for it, which loaded nothing before that launch")
    func primedRelaunch() async {
        // In a process of its own: a launch of anything else, in a test running in parallel, would
        // end the primed worker. Exit statuses 30–35 name the check that failed.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            let test = try TestHost()
            defer { test.remove() }
            try test.install(PluginFixture(library: "Echo"))
            let configuration = try test.configuration("org.plugind.tests.echo")
            guard let pid = await ProcessLifecycleTests.primeWorker(configuration) else { exit(30) }
            // Root may read the maps of the worker, which is not dumpable: no plugin code in them.
            if getuid() == 0 {
                let maps = ProcessInspection.readProcFile("/proc/\(pid)/maps")
                guard !maps.isEmpty else { exit(31) }
                guard !maps.contains("libEcho") else { exit(32) }
                // Its filters were compiled by the launcher, which let libseccomp go before it forked.
                guard !maps.contains("libseccomp") else { exit(35) }
            }
            let process = try await AppExtensionProcess(configuration: configuration)
            guard process.processIdentifier == pid else { exit(33) }
            guard try await process.makeConnection().send([7]) == [7] else { exit(34) }
            await process.invalidateAndWait()
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    @Test("a worker primed for a plugin has loaded the system libraries it needs, not the plugin, and the launch uses them")
    func primedPreloadsDependencies() async {
        // As `primedRelaunch`, in a process of its own. Exit statuses 40–45 name the check.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            let test = try TestHost()
            defer { test.remove() }
            try test.install(PluginFixture(library: "SystemLibraryProbe"))
            let configuration = try test.configuration("org.plugind.tests.systemlibraryprobe")
            guard let pid = await ProcessLifecycleTests.primeWorker(configuration) else { exit(40) }
            // Root may read the maps of the worker, which is not dumpable. libarchive is nothing
            // the worker loads for itself: there before the launch only if preloaded for it.
            if getuid() == 0 {
                let maps = ProcessInspection.readProcFile("/proc/\(pid)/maps")
                guard !maps.isEmpty else { exit(41) }
                guard maps.contains("libarchive.so") else {
                    FileHandle.standardError.write(Data(maps.utf8))
                    exit(42)
                }
                guard !maps.contains("libSystemLibraryProbe") else { exit(43) }
            }
            let process = try await AppExtensionProcess(configuration: configuration)
            guard process.processIdentifier == pid else { exit(44) }
            let answer = try await process.makeConnection().send([1])
            guard String(decoding: answer, as: UTF8.self).hasPrefix("libarchive ") else {
                FileHandle.standardError.write(Data(answer))
                exit(45)
            }
            await process.invalidateAndWait()
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    @Test("a worker primed for one plan is ended, never used, by a launch of another")
    func primedMismatch() async {
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            var test = try TestHost()
            defer { test.remove() }
            try test.install(PluginFixture(library: "Echo"))
            guard let pid = await ProcessLifecycleTests.primeWorker(try test.configuration("org.plugind.tests.echo")) else { exit(40) }
            let primed = try FileDescriptor.processDescriptor(for: pid)
            defer { primed.close() }
            // Another memory limit: the worker was confined for other limits than this launch's.
            test.host.limits.memoryBytes /= 2
            let process = try await AppExtensionProcess(configuration: try test.configuration("org.plugind.tests.echo"))
            guard process.processIdentifier != pid else { exit(41) }
            guard try await process.makeConnection().send([7]) == [7] else { exit(42) }
            // The primed worker ends (its pidfd becomes readable); it never answered anything.
            // The wait's end is a backstop.
            var watched = pollfd(fd: primed.rawValue, events: Int16(POLLIN), revents: 0)
            guard poll(&watched, 1, 120_000) == 1 else { exit(43) }
            await process.invalidateAndWait()
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    @Test("200 launch and invalidate cycles leave no zombie and no descriptor behind")
    func launchCycles() async {
        // In a process of its own, so that descriptors and children of tests running in parallel
        // cannot blur the count. Exit statuses 10–13 name the check that failed.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            ProcessInspection.ignoreInheritedDescriptors()
            let test = try TestHost()
            defer { test.remove() }
            try test.install(PluginFixture(library: "Echo"))
            let configuration = try test.configuration("org.plugind.tests.echo")
            // One warm-up cycle starts the event loop, whose descriptors live for the process.
            try await AppExtensionProcess.withProcess(configuration: configuration) { _ in }
            // Spare workers of the pre-forked launcher hold descriptors too; count with a full pool,
            // and without a worker primed for the next launch (made when a spare is ready).
            await LaunchPool.settleAll()
            LaunchPool.discardPrimedAndWait()
            // The activity store writes a second after a change, holding its lock file meanwhile.
            await PluginActivityStore.waitForPendingUpdates()
            let descriptorsBefore = ProcessInspection.openDescriptorKinds()
            var pids: [Int32] = []
            for index in 0..<200 {
                let process = try await AppExtensionProcess(configuration: configuration)
                pids.append(process.processIdentifier)
                if index % 2 == 0 {
                    let answer = try await process.makeConnection().send([UInt8(index % 256)])
                    guard answer == [UInt8(index % 256)] else { exit(10) }
                }
                await process.invalidateAndWait()
            }
            await LaunchPool.settleAll()
            LaunchPool.discardPrimedAndWait()
            await PluginActivityStore.waitForPendingUpdates()
            ProcessInspection.exitIfDescriptorsChanged(since: descriptorsBefore, status: 11)
            guard ProcessInspection.zombieChildren().isEmpty else { exit(12) }
            guard pids.allSatisfy({ !ProcessInspection.exists($0) }), Set(pids).count == 200 else { exit(13) }
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    @Test(
        "load failures name the plugin and the cause",
        arguments: [
            ("FaultyWrongABI", AppExtensionError.Code.abiMismatch, "was built for plugin ABI 999; this worker supports ABI 1"),
            ("FaultyNoEntry", AppExtensionError.Code.symbolMissing, "does not export plugind_plugin_entry"),
            ("FaultyAbortAtLoad", AppExtensionError.Code.workerCrashed, "crashed with SIGABRT while loading"),
            ("FaultyExitAtLoad", AppExtensionError.Code.pluginLoadFailed, "exited with status 3 while loading the plugin"),
        ])
    func loadFailures(library: String, code: AppExtensionError.Code, reason: String) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: library)
        try test.install(fixture)
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        }
        #expect(error?.code == code)
        #expect(error?.reason.contains(reason) == true, "\(error?.reason ?? "")")
        #expect(error?.pluginIdentifier == fixture.identifier)
    }

    @Test("dlerror() reaches the host verbatim")
    func dlopenError() async throws {
        let test = try TestHost()
        defer { test.remove() }
        // A library whose bytes are ELF enough for the catalog but truncated for the loader.
        let fixture = PluginFixture(library: "Echo")
        let bundle = try test.install(fixture)
        let library = bundle + "/libEcho.so"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: library))
        try bytes.prefix(256).write(to: URL(fileURLWithPath: library))
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        }
        #expect(error?.code == .pluginLoadFailed)
        #expect(error?.reason.hasPrefix(library + ":") == true, "\(error?.reason ?? "")")
    }

    @Test("a plugin hanging at load hits the launch deadline and is killed")
    func hangAtLoad() async throws {
        var test = try TestHost()
        defer { test.remove() }
        test.host.launchTimeout = .milliseconds(500)
        let fixture = PluginFixture(library: "FaultyHangAtLoad")
        try test.install(fixture)
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        }
        #expect(error?.code == .timedOut)
        #expect(error?.reason == "did not finish loading within 500 ms; its worker was killed")
        #expect(error?.termination == .signaled(signal: SIGKILL, name: "SIGKILL"))
    }

    @Test("when the host dies, its worker exits")
    func hostDeath() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "FaultyHang"), bundled: false)
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        let approve = try await CommandRunner.run(
            try BuiltProducts.plugind(), ["approve", "org.plugind.tests.faultyhang", "--yes"], environment: environment)
        #expect(approve.status == 0, "\(approve.stderr)")
        // A host (plugind run) whose request hangs forever.
        let host = Process()
        host.executableURL = URL(fileURLWithPath: try BuiltProducts.plugind())
        host.arguments = ["run", "org.plugind.tests.faultyhang", "x", "--timeout", "3600"]
        host.environment = environment
        host.standardOutput = FileHandle.nullDevice
        host.standardError = FileHandle.nullDevice
        try host.run()
        let hostPID = host.processIdentifier
        let worker = try await Deadline.wait("the worker to start") {
            while true {
                if let child = ProcessInspection.children(of: hostPID).first,
                    ProcessInspection.readProcFile("/proc/\(child)/comm").hasPrefix("plugind-worker")
                {
                    return child
                }
                // Polled: the start is another process's, with no event to wait on here; a
                // pause between reads of /proc keeps the poll off the cooperative pool's two threads.
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        kill(hostPID, SIGKILL)
        host.waitUntilExit()
        #expect(await Deadline.processExit(worker), "worker \(worker) outlived its host")
    }
}
