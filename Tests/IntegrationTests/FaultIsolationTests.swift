import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindPolicyEditing
import TestSupport
import Testing

/// One faulty example plugin per behaviour; each test asserts the exact outcome: the host lives,
/// the right typed error, the worker and its children gone.
@Suite("Fault isolation and confinement", .tags(.process, .root), .serialized, .timeLimit(.minutes(10)))
struct FaultIsolationTests {
    /// Launches `fixture`, runs `request`, and returns the error it must fail with.
    func failure(
        of fixture: PluginFixture,
        request: String = "",
        timeout: Duration? = nil,
        configure: (inout TestHost) -> Void = { _ in }
    ) async throws -> (AppExtensionError?, Int32) {
        var test = try TestHost()
        configure(&test)
        defer { test.remove() }
        let process = try await test.launch(fixture)
        let pid = process.processIdentifier
        let error = await #expect(throws: AppExtensionError.self) {
            try await process.makeConnection().send(Array(request.utf8), timeout: timeout)
        }
        await process.invalidateAndWait()
        #expect(!ProcessInspection.exists(pid), "worker \(pid) survived")
        return (error, pid)
    }

    /// Runs `request` and returns the answer, or the plugin's error text.
    func outcome(_ fixture: PluginFixture, request: String, bundled: Bool = true) async throws -> Result<String, AppExtensionError> {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(fixture, bundled: bundled)
        if !bundled {
            try PolicyEditor(directory: test.host.policyDirectory).approve(
                try #require(Inventory.take(host: test.host).item(fixture.identifier)?.entry))
        }
        let process = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        defer { process.invalidate() }
        do {
            return .success(String(decoding: try await process.makeConnection().send(Array(request.utf8)), as: UTF8.self))
        } catch let error as AppExtensionError {
            return .failure(error)
        }
    }

    @Test("segfault: workerCrashed with SIGSEGV and the fault address")
    func segfault() async throws {
        let (error, _) = try await failure(of: PluginFixture(library: "FaultySegfault"))
        #expect(error?.code == .workerCrashed)
        #expect(error?.reason == "crashed with SIGSEGV at address 0x0")
        // The crashed thread's frames, named from the host's copy of the library: the function
        // that faulted first, its caller next, with the source line of the faulting write.
        let frames = error?.backtrace ?? []
        #expect(frames.first?.function == "dereference_null_for_request", "\(frames)")
        #expect(frames.first?.object == "libFaultySegfault.so")
        #expect(frames.first?.file?.hasSuffix("segfault.c") == true && frames.first?.line == 13, "\(frames.map(\.description))")
        #expect(frames.dropFirst().first?.function == "handle", "\(frames)")
        #expect(frames.contains { $0.object == "plugind-worker" }, "the worker's own frames follow: \(frames)")
    }

    @Test(
        "a crash inside libc, after the plugin smashed its own frame, or from a recursion that used up the stack: still a report, with the frames that can be found",
        arguments: [("libc", "measure_null_in_libc"), ("smash", "smash_own_frame"), ("recurse", "recurse_until_the_stack_is_gone")])
    func hostileCrash(request: String, function: String) async throws {
        let (error, _) = try await failure(of: PluginFixture(library: "FaultySegfault"), request: request)
        #expect(error?.code == .workerCrashed)
        #expect(error?.termination == .signaled(signal: SIGSEGV, name: "SIGSEGV"))
        let frames = error?.backtrace ?? []
        #expect(frames.contains { $0.function == function }, "\(frames.map(\.description))")
        #expect(frames.count <= 64)
        if request == "libc" { #expect(frames.first?.object == "libc.so.6", "\(frames.map(\.description))") }
        if request == "recurse" { #expect(frames.prefix(8).allSatisfy { $0.function == function }, "\(frames.map(\.description))") }
    }

    @Test("a Swift plugin's crash names the Swift function it crashed in, demangled")
    func swiftCrash() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "SwiftExtensionProbe"))
        let connection = try await process.makeConnection()
        let error = await #expect(throws: AppExtensionError.self) { try await connection.send(Array("crash".utf8)) }
        await process.invalidateAndWait()
        #expect(error?.code == .workerCrashed)
        let frames = error?.backtrace ?? []
        #expect(frames.first?.function?.contains("crashInExtensionProbe(address: Swift.Int) -> Swift.Never") == true, "\(frames)")
        #expect(frames.first?.object == "libSwiftExtensionProbe.so", "\(frames)")
    }

    @Test(
        "a busy loop past the CPU limit: limitExceeded naming the CPU limit, from SIGXCPU or, when the plugin blocks it, the hard limit",
        arguments: [("", SIGXCPU), ("block-sigxcpu", SIGKILL)]
    )
    func cpuLimit(request: String, signal: Int32) async throws {
        // A second (two, past the hard limit) of the CPU: far longer in wall time on a loaded
        // machine, so the request's deadline is a backstop.
        let (error, _) = try await failure(
            of: PluginFixture(library: "FaultyBusyLoop", extra: ["limits": ["cpuSeconds": 1]]),
            request: request,
            timeout: TestHost.requestBackstop
        )
        #expect(error?.code == .limitExceeded, "\(error.map { "\($0)" } ?? "")")
        #expect(error?.exceededLimit == AppExtensionError.ExceededLimit(kind: .cpu, value: 1))
        #expect(error?.reason.hasPrefix("exceeded its CPU limit 1 s") == true, "\(error?.reason ?? "")")
        guard case .signaled(let ended, _) = error?.termination else {
            Issue.record("the worker did not end by a signal: \(String(describing: error?.termination))")
            return
        }
        #expect(ended == signal)
    }

    @Test("allocation past the memory limit: limitExceeded naming the memory limit")
    func memoryLimit() async throws {
        let (error, _) = try await failure(
            of: PluginFixture(library: "FaultyMemoryHog", extra: ["limits": ["memoryBytes": 256 << 20]]), timeout: TestHost.requestBackstop)
        #expect(error?.code == .limitExceeded)
        #expect(error?.exceededLimit == AppExtensionError.ExceededLimit(kind: .memory, value: 256 << 20))
        #expect(error?.reason.hasPrefix("exceeded its memory limit 256 MiB") == true, "\(error?.reason ?? "")")
    }

    @Test("the host caps what a manifest asks for")
    func hostCaps() async throws {
        var test = try TestHost()
        defer { test.remove() }
        test.host.limits.memoryBytes = 128 << 20
        let process = try await test.launch(PluginFixture(library: "Echo", extra: ["limits": ["memoryBytes": 1 << 40]]))
        let limits = ProcessInspection.readProcFile("/proc/\(process.processIdentifier)/limits")
        #expect(limits.contains("Max address space         134217728            134217728"), "\(limits)")
        await process.invalidateAndWait()
    }

    @Test("a fork bomb: every process it made dies with the worker")
    func forkBomb() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "FaultyForkBomb", extra: Self.processes))
        let answer = try await process.makeConnection().send([], timeout: TestHost.requestBackstop)
        #expect(String(decoding: answer, as: UTF8.self).hasPrefix("forked until"))
        let descendants = Self.descendants(of: process.processIdentifier)
        #expect(descendants.count >= 8, "the bomb made \(descendants.count) processes")
        await process.invalidateAndWait()
        for pid in descendants {
            #expect(await Deadline.processExit(pid), "process \(pid) outlived the worker")
        }
    }

    /// The manifest permission a plugin needs to start processes.
    static var processes: [String: Any] { ["permissions": ["processes": true]] }

    static func descendants(of pid: Int32) -> [Int32] {
        var result: [Int32] = []
        var frontier = [pid]
        while let next = frontier.popLast() {
            let children = ProcessInspection.children(of: next)
            result += children
            frontier += children
        }
        return result
    }

    @Test("opening descriptors past the limit: the plugin's failure names the open-files limit")
    func descriptorLimit() async throws {
        let (error, _) = try await failure(of: PluginFixture(library: "FaultyDescriptorHog", extra: ["limits": ["openFiles": 48]]))
        #expect(error?.code == .pluginError)
        #expect(error?.reason.contains("open files limit 48 reached") == true)
    }

    @Test("garbage written to the protocol descriptors: protocolViolation, worker stopped")
    func protocolGarbage() async throws {
        let (error, _) = try await failure(of: PluginFixture(library: "FaultyProtocolGarbage"))
        #expect(error?.code == .protocolViolation)
        #expect(
            error?.reason.hasPrefix("broke the wire protocol (frame does not start with the plugind magic") == true,
            "\(error?.reason ?? "")")
    }

    @Test("a shared-memory location outside the region: protocolViolation, the host reads nothing out of bounds")
    func sharedMemoryLie() async throws {
        let (error, _) = try await failure(of: PluginFixture(library: "FaultySharedMemoryLie"))
        #expect(error?.code == .protocolViolation)
        #expect(error?.reason.contains("lies outside the shared-memory region") == true, "\(error?.reason ?? "")")
    }

    @Test("closing the protocol descriptors: the worker is gone, and no later request is answered")
    func protocolClosed() async throws {
        // The plugin closes the worker's pipes and answers. Through the shared rings that answer
        // may still arrive (the worker need not read the pipe to send it); through the pipes it
        // cannot. Either way the worker cannot read the host any more: it ends, or is stopped,
        // and the next request fails instead of waiting for an answer that cannot come.
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "FaultyProtocolClose"))
        let pid = process.processIdentifier
        let connection = try await process.makeConnection()
        var errors: [AppExtensionError] = []
        do {
            #expect(try await connection.send([]) == Array("closed".utf8))
        } catch let error as AppExtensionError {
            errors.append(error)
        }
        errors += [await #expect(throws: AppExtensionError.self) { try await connection.send([]) }].compactMap { $0 }
        #expect(!errors.isEmpty)
        for error in errors {
            #expect([.protocolViolation, .workerExited, .connectionClosed].contains(error.code), "\(error)")
        }
        await process.invalidateAndWait()
        #expect(!ProcessInspection.exists(pid), "worker \(pid) survived")
    }

    @Test("every faulty plugin in turn leaves no descriptor and no child behind, and SIGPIPE never kills the host")
    func noLeaks() async {
        // In a process of its own: the descriptor count must not see other tests' descriptors, and
        // SIGPIPE must be handled by the library alone. Exit statuses 20–22 name the failed check.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            ProcessInspection.ignoreInheritedDescriptors()
            var test = try TestHost()
            defer { test.remove() }
            // The plugins that hang (at a request, at load) end by the host's deadlines, short
            // for them; every other case keeps the host's backstops, so that a loaded machine
            // sends no case down another path.
            let backstops = test.host
            var hanging = test.host
            hanging.launchTimeout = .milliseconds(500)
            hanging.cancellationGracePeriod = .milliseconds(100)
            hanging.shutdownGracePeriod = .milliseconds(200)
            let warmUp = try await test.launch(PluginFixture(library: "Echo"))
            await warmUp.invalidateAndWait()
            // Spare workers of the pre-forked launcher hold descriptors too; count with a full pool.
            await LaunchPool.settleAll()
            // Sealed copies of libraries and a worker primed for the next launch are kept on
            // purpose; the check is about everything else.
            LaunchPool.discardPrimedAndWait()
            SealedFileCache.shared.removeAll()
            // The activity store writes a second after a change, holding its lock file meanwhile.
            await PluginActivityStore.waitForPendingUpdates()
            let descriptorsBefore = ProcessInspection.openDescriptorKinds()
            let cases: [(String, String, [String: Any])] = [
                ("FaultySegfault", "", [:]), ("FaultyAbort", "", [:]), ("FaultyHang", "", [:]),
                ("FaultyBusyLoop", "", ["limits": ["cpuSeconds": 1]]), ("FaultyMemoryHog", "", ["limits": ["memoryBytes": 128 << 20]]),
                ("FaultyForkBomb", "", [:]), ("FaultyDescriptorHog", "", ["limits": ["openFiles": 32]]),
                ("FaultyProtocolGarbage", "", [:]), ("FaultyProtocolClose", "", [:]), ("FaultyFlood", "5", [:]),
                ("FaultyOversizedResponse", "2000000", ["limits": ["maxMessageBytes": 1 << 20]]),
                ("FaultyNetworkClient", "9", [:]), ("FaultyFileReader", "/etc/shadow", [:]), ("FaultyBundleWriter", "", [:]),
                ("FaultySignalHost", "1", [:]), ("FaultyGrandchild", "pgd-leak", [:]), ("FaultySharedMemoryLie", "", [:]),
                ("FaultyWrongABI", "", [:]),
                ("FaultyNoEntry", "", [:]), ("FaultyAbortAtLoad", "", [:]), ("FaultyExitAtLoad", "", [:]), ("FaultyHangAtLoad", "", [:]),
            ]
            for (library, request, extra) in cases {
                let hangs = ["FaultyHang", "FaultyHangAtLoad"].contains(library)
                test.host = hangs ? hanging : backstops
                let fixture = PluginFixture(library: library, extra: extra)
                guard let process = try? await test.launch(fixture) else { continue }
                let connection = try await process.makeConnection()
                _ = try? await connection.send(Array(request.utf8), timeout: hangs ? .seconds(3) : TestHost.requestBackstop)
                // A second request, possibly to a dead worker's closed pipe: EPIPE, never SIGPIPE.
                _ = try? await connection.send(Array(request.utf8), timeout: hangs ? .milliseconds(200) : TestHost.requestBackstop)
                await process.invalidateAndWait()
            }
            // Crash records are written in the background; let them finish first.
            await CrashRecorder.waitForPendingRecords()
            await LaunchPool.settleAll()
            LaunchPool.discardPrimedAndWait()
            SealedFileCache.shared.removeAll()
            await PluginActivityStore.waitForPendingUpdates()
            ProcessInspection.exitIfDescriptorsChanged(since: descriptorsBefore, status: 20)
            guard ProcessInspection.zombieChildren().isEmpty else { exit(21) }
            guard ProcessInspection.processes(named: "pgd-leak").isEmpty else { exit(22) }
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    @Test("a response over the message limit: limitExceeded naming the message limit")
    func oversizedResponse() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(
            PluginFixture(library: "FaultyOversizedResponse", extra: ["limits": ["maxMessageBytes": 1 << 20]]))
        let connection = try await process.makeConnection()
        let error = await #expect(throws: AppExtensionError.self) { try await connection.send(Array("2000000".utf8)) }
        #expect(error?.code == .limitExceeded)
        #expect(error?.exceededLimit == AppExtensionError.ExceededLimit(kind: .messageSize, value: 1 << 20))
        #expect(error?.description.contains("message limit 1 MiB") == true || error?.reason.contains("1048576 bytes") == true)
        // Under the limit it answers, and the worker survived the refusal.
        #expect(try await connection.send(Array("1000".utf8)).count == 1000)
        // A request over the limit is refused on the host side.
        let request = await #expect(throws: AppExtensionError.self) {
            try await connection.send([UInt8](repeating: 0, count: (1 << 20) + 1))
        }
        #expect(request?.exceededLimit?.kind == .messageSize)
        await process.invalidateAndWait()
    }

    @Test("TCP to 127.0.0.1: denied without the network permission, allowed with it")
    func network() async throws {
        let listener = try LoopbackListener()
        let port = String(listener.port)
        let denied = try await outcome(PluginFixture(library: "FaultyNetworkClient"), request: port)
        guard case .failure(let error) = denied else {
            Issue.record("connected without the network permission")
            return
        }
        #expect(error.reason.contains("socket: Permission denied"))
        let allowed = try await outcome(
            PluginFixture(library: "FaultyNetworkClient", extra: ["permissions": ["network": true]]),
            request: port,
            bundled: false
        )
        #expect(try allowed.get() == "connected")
    }

    @Test(
        "a worker from a spare, whose rulesets were prepared ahead, is confined exactly like a spawned one",
        arguments: [false, true])
    func spareConfinementMatchesSpawn(withPermissions: Bool) async throws {
        var reports: [[AppExtensionProcess.ConfinementLayer]] = []
        for strategy in [AppExtensionHost.LaunchStrategy.preforked, .spawn] {
            var test = try TestHost()
            defer { test.remove() }
            test.host.launchStrategy = strategy
            let extra: [String: Any] = withPermissions ? ["permissions": ["network": true, "read": ["/srv"]]] : [:]
            let fixture = PluginFixture(library: "Echo", extra: extra)
            try test.install(fixture, bundled: false)
            try PolicyEditor(directory: test.host.policyDirectory).approve(
                try #require(Inventory.take(host: test.host).item(fixture.identifier)?.entry))
            if strategy == .preforked {
                // A first launch starts the launcher; then wait for its spares, so that the
                // measured launch takes one.
                let warmUp = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
                await warmUp.invalidateAndWait()
                await LaunchPool.settleAll()
            }
            let process = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
            reports.append(process.confinement)
            await process.invalidateAndWait()
        }
        #expect(reports[0] == reports[1])
        #expect(reports[0].contains { $0.name == "filesystem" && $0.state == .applied })
    }

    @Test("plugin code sees only the worker's own descriptors, however the worker was started or confined")
    func visibleDescriptors() async throws {
        var lists: [String: [Int]] = [:]
        for strategy in [AppExtensionHost.LaunchStrategy.preforked, .spawn] {
            for confinement in [AppExtensionHost.ConfinementRequirement.required, .disabled] {
                var test = try TestHost()
                defer { test.remove() }
                test.host.launchStrategy = strategy
                test.host.confinement = confinement
                let fixture = PluginFixture(library: "FaultyDescriptorProbe")
                if strategy == .preforked {
                    // Take a spare, not a worker forked on the spot.
                    let warmUp = try await test.launch(fixture)
                    await warmUp.invalidateAndWait()
                    await LaunchPool.settleAll()
                }
                let process = try await test.launch(fixture)
                let answer = String(decoding: try await process.makeConnection().send([]), as: UTF8.self)
                lists["\(strategy) \(confinement)"] = answer.split(separator: " ").compactMap { Int($0) }
                await process.invalidateAndWait()
            }
        }
        for (configuration, list) in lists {
            #expect(Array(list.prefix(5)) == [0, 1, 2, 3, 4], "\(configuration): \(list)")
        }
        // Beyond the protocol's, the shared memory, the sealed copy of the library and the two the
        // fatal-signal reporter opens ahead: the same count whether the worker came from a spare
        // (which held Landlock rulesets) or not.
        #expect(Set(lists.values.map(\.count)) == [8], "\(lists)")
    }

    @Test("reading a file outside the bundle: denied unless the owner granted the path")
    func readOutsideBundle() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let secret = try directory.publicFile("secret.txt", contents: "owner's data")
        let denied = try await outcome(PluginFixture(library: "FaultyFileReader"), request: secret)
        guard case .failure(let error) = denied else {
            Issue.record("read \(secret) without permission")
            return
        }
        // Outside its view the file does not exist.
        #expect(error.reason.contains("open \(secret): No such file or directory"))
        let home = try await outcome(PluginFixture(library: "FaultyFileReader"), request: "/etc/passwd")
        #expect((try? home.get()) == nil, "read /etc/passwd")
        let granted = try await outcome(
            PluginFixture(library: "FaultyFileReader", extra: ["permissions": ["read": [directory.path]]]),
            request: secret,
            bundled: false
        )
        #expect(try granted.get() == "owner's data")
    }

    @Test(
        "a mount made after the spares got ready is seen through an approved grant: the spares are replaced",
        .enabled(if: getuid() == 0, "mounting in the host's namespace needs root"))
    func mountAfterSparesReady() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let granted = try test.directory.subdirectory("granted")
        chmod(test.directory.path, 0o755)
        chmod(granted, 0o755)
        let fixture = PluginFixture(library: "FaultyFileReader", extra: ["permissions": ["read": [granted]]])
        try test.install(fixture, bundled: false)
        try PolicyEditor(directory: test.host.policyDirectory).approve(
            try #require(Inventory.take(host: test.host).item(fixture.identifier)?.entry))
        let configuration = try test.configuration(fixture.identifier)
        // Spares ready before the mount: each holds a copy of the host's tree without it.
        try await AppExtensionProcess.withProcess(configuration: configuration) { _ in }
        await LaunchPool.settleAll()
        guard mount("tmpfs", granted, "tmpfs", 0, "size=64k,mode=0755") == 0 else {
            Issue.record("cannot mount a tmpfs on \(granted): \(String(cString: strerror(errno)))")
            return
        }
        defer { umount2(granted, Int32(MNT_DETACH)) }
        let file = try TemporaryDirectory.publicFile(at: granted, name: "on-the-mount", contents: "from the new mount")
        await LaunchPool.settleAll()
        let answer = try await AppExtensionProcess.withProcess(configuration: configuration) { process in
            String(decoding: try await process.makeConnection().send(Array(file.utf8)), as: UTF8.self)
        }
        #expect(answer == "from the new mount")
    }

    @Test("writing inside its own bundle: denied")
    func writeInsideBundle() async throws {
        let denied = try await outcome(PluginFixture(library: "FaultyBundleWriter"), request: "")
        guard case .failure(let error) = denied else {
            Issue.record("a plugin wrote into its bundle")
            return
        }
        #expect(error.reason.contains("for writing: Read-only file system"))
    }

    @Test("signalling the host: denied")
    func signalHost() async throws {
        let result = try await outcome(PluginFixture(library: "FaultySignalHost"), request: String(getpid()))
        guard case .failure(let error) = result else {
            Issue.record("a plugin signalled the host")
            return
        }
        // The host is outside the worker's pid namespace (and Landlock's signal scope).
        #expect(error.reason.contains("kill \(getpid()): No such process") || error.reason.contains("Operation not permitted"))
    }

    @Test("a grandchild left running is killed with the worker")
    func grandchild() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let name = "pgd-gc-\(getpid() % 100000)"
        let process = try await test.launch(PluginFixture(library: "FaultyGrandchild", extra: Self.processes))
        #expect(try await process.makeConnection().send(Array(name.utf8)) == Array("grandchild running".utf8))
        let orphans = ProcessInspection.processes(named: name)
        #expect(orphans.count == 1)
        await process.invalidateAndWait()
        for pid in orphans {
            #expect(await Deadline.processExit(pid), "grandchild \(pid) outlived the worker")
        }
    }

    @Test("killing the host with SIGKILL leaves no worker and no grandchild alive")
    func hostKilled() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "FaultyGrandchild", extra: Self.processes)
        try test.install(fixture, bundled: false)
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        let approve = try await CommandRunner.run(
            try BuiltProducts.plugind(), ["approve", fixture.identifier, "--yes"], environment: environment)
        #expect(approve.status == 0)
        let name = "pgd-hk-\(getpid() % 100000)"
        let host = Process()
        host.executableURL = URL(fileURLWithPath: try BuiltProducts.plugind())
        host.arguments = ["run", fixture.identifier, "\(name) hang", "--timeout", "3600"]
        host.environment = environment
        host.standardOutput = FileHandle.nullDevice
        host.standardError = FileHandle.nullDevice
        try host.run()
        let grandchild = try await Deadline.wait("the grandchild to start") {
            while true {
                if let pid = ProcessInspection.processes(named: name).first { return pid }
                // Polled: the start is another process's, with no event to wait on here; a
                // pause between reads of /proc keeps the poll off the cooperative pool's two threads.
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        let worker = try #require(ProcessInspection.children(of: host.processIdentifier).first)
        kill(host.processIdentifier, SIGKILL)
        host.waitUntilExit()
        #expect(await Deadline.processExit(worker), "worker outlived its host")
        #expect(await Deadline.processExit(grandchild), "grandchild outlived the host")
    }

    @Test("the worker runs with every layer, as /proc shows from outside")
    func layersFromOutside() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo", extra: ["limits": ["cpuSeconds": 7, "openFiles": 99]]))
        let pid = process.processIdentifier
        let status = ProcessInspection.readProcFile("/proc/\(pid)/status")
        #expect(status.contains("NoNewPrivs:\t1"))
        #expect(status.contains("Seccomp:\t2"))
        let nsPID = status.split(separator: "\n").first { $0.hasPrefix("NSpid:") }
        #expect(nsPID?.hasSuffix("\t1") == true, "\(nsPID ?? "")")
        #expect(getsid(pid) == pid)
        let limits = ProcessInspection.readProcFile("/proc/\(pid)/limits")
        #expect(limits.contains("Max core file size        0                    0"))
        #expect(limits.contains("Max cpu time              7                    8"))
        #expect(limits.contains("Max open files            99                   99"))
        let layers = Dictionary(uniqueKeysWithValues: process.confinement.map { ($0.name, $0.state) })
        for layer in [
            "process-tree", "session", "no-new-privileges", "not-dumpable", "no-core-files", "resource-limits", "network", "filesystem",
            "signals",
        ] {
            #expect(layers[layer] == .applied, "\(layer): \(String(describing: layers[layer]))")
        }
        await process.invalidateAndWait()
    }
}
