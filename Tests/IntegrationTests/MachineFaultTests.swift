import CTestSupport
import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// Faults of the machine around a running worker: a worker stopped by someone else mid-request.
/// Deadlines are kept on the monotonic clock, so a stopped (or starved) worker still meets its
/// request's deadline, and the host's own threads never wait on it.
@Suite("Faults of the machine around a worker", .tags(.process, .root), .timeLimit(.minutes(5)))
struct MachineFaultTests {
    /// The parent of `pid`, from /proc; nil once it is gone.
    static func parent(of pid: Int32) -> Int32? {
        ProcessInspection.readProcFile("/proc/\(pid)/status").split(separator: "\n")
            .first { $0.hasPrefix("PPid:") }.flatMap { Int32($0.dropFirst(5).trimmingCharacters(in: .whitespaces)) }
    }

    /// The Countdown plugin launched, once its launcher has exited (the worker is then the
    /// host's child alone, so that nothing but the host is left to act on it).
    static func launchCountdownLeftToHost(_ test: TestHost) async throws -> AppExtensionProcess {
        let process = try await test.launch(PluginFixture(library: "Countdown"))
        let pid = process.processIdentifier
        // Its launcher's exit (waited on through its pidfd) hands the worker to the host.
        if let launcher = Self.parent(of: pid), launcher != getpid() {
            guard await Deadline.processExit(launcher) else { throw Deadline.Expired(what: "the worker's launcher to exit") }
        }
        guard Self.parent(of: pid) == getpid() else { throw Deadline.Expired(what: "the worker to become the host's child") }
        return process
    }

    /// Writes `message` to standard error and exits with `status`: how the child of an exit test
    /// says which check failed.
    static func fail(_ status: Int32, _ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(status)
    }

    @Test("a worker stopped (SIGSTOP) mid-request: the deadline holds (timedOut), the stopped worker is killed and reaped")
    func stoppedWorker() async throws {
        // In a process of its own: the stop is a signal anyone may undo, and the host's reaping
        // must be this host's alone. Exit statuses 10–17 name the check that failed.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            var configured = try TestHost()
            // The kill after the grace is what this test checks, not a backstop.
            configured.host.cancellationGracePeriod = .milliseconds(500)
            let test = configured
            defer { test.remove() }
            let process = try await Self.launchCountdownLeftToHost(test)
            let pid = process.processIdentifier
            let connection = try await process.makeConnection()
            // Mid-request: stopped once the plugin reports it works on a request of the default
            // deadline (minutes). The deadline under test is the next request's, sent once the
            // worker is stopped: a deadline armed before the stop would race the wait for the
            // plugin's first report.
            let running = await connection.sendInFlight(Array("100000".utf8))
            guard kill(pid, SIGSTOP) == 0 else { Self.fail(10, "kill(SIGSTOP): \(Errno.current)") }
            let pending = Task { try await connection.send(Array("1".utf8), timeout: .milliseconds(400)) }
            let outcome = try await Deadline.wait("the request's deadline") { await pending.result }
            guard case .failure(let failure) = outcome, let failure = failure as? AppExtensionError else {
                Self.fail(11, "the request did not fail: \(outcome)")
            }
            guard failure.code == .timedOut, failure.reason == "request did not finish within 400 ms" else {
                Self.fail(12, "the request failed otherwise: \(failure)")
            }
            // Stopped, it can neither answer the cancel nor report its stack: killed after the
            // grace period.
            guard
                let termination = try? await Deadline.wait("the stopped worker's end", { await process.waitForTermination() })
            else {
                let status = ProcessInspection.readProcFile("/proc/\(pid)/status").split(separator: "\n")
                    .filter { line in ["State", "PPid", "SigPnd", "ShdPnd", "NSpgid", "NSsid"].contains(where: line.hasPrefix) }
                Self.fail(13, "the stopped worker did not end: \(status)")
            }
            guard termination == .signaled(signal: SIGKILL, name: "SIGKILL") else { Self.fail(14, "it ended otherwise: \(termination)") }
            guard await Deadline.reaped(pid) else { Self.fail(15, "it was not reaped") }
            // The request it was stopped in fails with the kill's cause.
            let ran = await running.result
            guard case .failure(let killed as AppExtensionError) = ran, killed.code == .timedOut,
                killed.reason.contains("its worker was killed")
            else { Self.fail(17, "the running request ended otherwise: \(ran)") }
            // The same plugin launches and answers again.
            let again = try await Deadline.wait("the next launch") {
                try await test.launch(PluginFixture(library: "Countdown"))
            }
            let answer = try await Deadline.wait("the next answer") { try await again.makeConnection().send(Array("1".utf8)) }
            guard String(decoding: answer, as: UTF8.self) == "counted down 1 steps\n" else { Self.fail(16, "the next answer: \(answer)") }
            await again.invalidateAndWait()
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    @Test("requests to a stopped worker fill its pipe, which nobody reads: each still fails with timedOut at its own deadline")
    func pipeFilledNeverRead() async throws {
        // In a process of its own, like the test above. Exit statuses 20–23 name the check that failed.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            var test = try TestHost()
            defer { test.remove() }
            // The kill after the grace is one of the outcomes this test names, not a backstop.
            test.host.cancellationGracePeriod = .milliseconds(500)
            let process = try await Self.launchCountdownLeftToHost(test)
            let pid = process.processIdentifier
            let connection = try await process.makeConnection()
            guard kill(pid, SIGSTOP) == 0 else { Self.fail(20, "kill(SIGSTOP): \(Errno.current)") }
            // 1,000 requests of 256 bytes: four times what the pipe holds, so most wait in the
            // host's queue for room that never comes.
            let outcomes = try await Deadline.wait("every request's end") {
                await withTaskGroup(of: Result<[UInt8], any Error>.self) { group in
                    for _ in 0..<1000 {
                        group.addTask {
                            do {
                                return .success(
                                    try await connection.send([UInt8](repeating: 0x31, count: 256), timeout: .milliseconds(300)))
                            } catch {
                                return .failure(error)
                            }
                        }
                    }
                    var outcomes: [Result<[UInt8], any Error>] = []
                    for await outcome in group { outcomes.append(outcome) }
                    return outcomes
                }
            }
            var reasons: [String: Int] = [:]
            for outcome in outcomes {
                switch outcome {
                case .success: reasons["answered", default: 0] += 1
                case .failure(let error as AppExtensionError): reasons["\(error.code): \(error.reason)", default: 0] += 1
                case .failure(let error): reasons["\(error)", default: 0] += 1
                }
            }
            // Each timed out: at its own deadline, whether it was in the pipe or still in the
            // queue, or — on a slow machine, for requests queued last — when the worker was killed
            // for not answering the first cancel, just before theirs.
            let atDeadline = "timedOut: request did not finish within 300 ms"
            let atKill = "timedOut: did not stop within 500 ms after a request was abandoned; its worker was killed"
            guard Set(reasons.keys).isSubset(of: [atDeadline, atKill]), reasons[atDeadline, default: 0] > 0 else {
                Self.fail(21, "the requests ended otherwise: \(reasons)")
            }
            let termination = try await Deadline.wait("the stopped worker's end") { await process.waitForTermination() }
            guard termination == .signaled(signal: SIGKILL, name: "SIGKILL") else { Self.fail(22, "it ended otherwise: \(termination)") }
            guard await Deadline.reaped(pid) else { Self.fail(23, "it was not reaped") }
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    /// Sets the soft process limit (RLIMIT_NPROC) of this process and of its children (the
    /// launchers and spares, which inherited the old one) to `soft`, or back to the hard limit.
    static func limitProcesses(to soft: Int64?) {
        for pid in [getpid()] + ProcessInspection.children(of: getpid()) {
            _ = plugind_test_limit_processes(pid, soft ?? -1)
        }
    }

    @Test(
        "the host's user at its process limit (RLIMIT_NPROC): a launch fails naming the limit, a running worker keeps answering, and launches work again once the limit is raised",
        .enabled(if: geteuid() != 0, "root is not held to RLIMIT_NPROC: the suite's run as an ordinary user covers it"))
    func processLimit() async throws {
        // In a process of its own, whose limit the test lowers. Exit statuses 30–35 name the check that failed.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            let test = try TestHost()
            defer { test.remove() }
            let running = try await test.launch(PluginFixture(library: "Echo"))
            let connection = try await running.makeConnection()
            guard try await connection.send([1]) == [1] else { Self.fail(30, "the echo did not answer") }
            try test.install(PluginFixture(library: "Countdown"))
            // Every thread the launch needs exists already (the event loop's, the pool's): only new
            // processes are refused.
            Self.limitProcesses(to: 0)
            // A spare forked before the limit fell may still take a launch (and must answer);
            // past those, a launch needs a new process and fails.
            let countdown = try {
                var configuration = try test.configuration("org.plugind.tests.countdown")
                configuration.sharing = .dedicated
                return configuration
            }()
            var started: [AppExtensionProcess] = []
            var refusal: AppExtensionError?
            for _ in 0..<6 where refusal == nil {
                do {
                    started.append(
                        try await Deadline.wait("a launch at the limit") {
                            try await AppExtensionProcess(configuration: countdown)
                        })
                } catch let error as AppExtensionError {
                    refusal = error
                }
            }
            guard let refused = refusal else { Self.fail(31, "six launches succeeded at the process limit") }
            for process in started {
                let answer = try await Deadline.wait("an answer") { try await process.makeConnection().send(Array("1".utf8)) }
                guard String(decoding: answer, as: UTF8.self) == "counted down 1 steps\n" else {
                    Self.fail(35, "a spare's answer: \(answer)")
                }
                await process.invalidateAndWait()
            }
            guard refused.code == .spawnFailed, refused.reason.contains("the host's user is at its process limit (RLIMIT_NPROC is 0)")
            else {
                Self.fail(32, "the launch failed otherwise: \(refused)")
            }
            guard try await Deadline.wait("the running echo's answer", { try await connection.send([2]) }) == [2] else {
                Self.fail(33, "the running echo stopped answering")
            }
            Self.limitProcesses(to: nil)
            let again = try await Deadline.wait("the launch after the limit was raised") {
                try await AppExtensionProcess(configuration: countdown)
            }
            let answer = try await again.makeConnection().send(Array("1".utf8))
            guard String(decoding: answer, as: UTF8.self) == "counted down 1 steps\n" else { Self.fail(34, "the next answer: \(answer)") }
            await again.invalidateAndWait()
            await running.invalidateAndWait()
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    /// This process's resident memory (VmRSS), in bytes.
    static func residentBytes() -> Int? {
        let status = ProcessInspection.readProcFile("/proc/self/status")
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kibibytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        return kibibytes << 10
    }

    /// /proc/PID/oom_score_adj; nil once the process is gone.
    static func oomScoreAdjustment(of pid: Int32) -> Int? {
        Int(ProcessInspection.readProcFile("/proc/\(pid)/oom_score_adj").trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// A memory control group of the machine's (version 1's memory controller, or version 2's
    /// root when it delegates memory) in which a test may make a group of its own; nil where
    /// there is none or it is not writable (not root).
    static var memoryGroupParent: String? {
        guard geteuid() == 0 else { return nil }
        if access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0, access("/sys/fs/cgroup/memory", W_OK) == 0 {
            return "/sys/fs/cgroup/memory"
        }
        let controllers = ProcessInspection.readProcFile("/sys/fs/cgroup/cgroup.subtree_control")
        return controllers.split(separator: " ").contains("memory") && access("/sys/fs/cgroup", W_OK) == 0 ? "/sys/fs/cgroup" : nil
    }

    /// What the memory group `group` holds now, in bytes (memory.usage_in_bytes of version 1,
    /// memory.current of version 2); nil when it cannot be read.
    static func memoryUsage(of group: String) -> Int? {
        let file = group.hasPrefix("/sys/fs/cgroup/memory/") ? "/memory.usage_in_bytes" : "/memory.current"
        return Int(ProcessInspection.readProcFile(group + file).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// An unlinked file of `bytes` in /dev/shm, allocated: shared memory that counts against
    /// this process's memory group but toward no process's resident memory, and that nothing
    /// reclaims without swap. Its descriptor, or nil.
    static func sharedMemoryFiller(bytes: Int) -> Int32? {
        let path = "/dev/shm/plugind-test-filler-\(getpid())"
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return nil }
        unlink(path)
        guard bytes == 0 || posix_fallocate(descriptor, 0, off_t(bytes)) == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    @Test(
        "memory pressure on host and workers together: the kernel's OOM killer takes the worker, not the larger host, which gets a typed error and launches again",
        .enabled(if: memoryGroupParent != nil, "needs a memory control group the test can make (root, cgroup memory controller)"))
    func memoryPressure() async throws {
        // In a process of its own, moved into a memory group of 256 MiB with its workers: the
        // host holds more than the memory hog can take, yet the kernel kills the hog. Exit
        // statuses 50–57 name the check that failed.
        let group = try #require(Self.memoryGroupParent) + "/plugind-test-oom-\(getpid())"
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String, group = group as String] in
            ExitTestReport.redirectStandardError(to: path)
            let limit = 256 << 20
            let version1 = group.hasPrefix("/sys/fs/cgroup/memory/")
            guard mkdir(group, 0o755) == 0 || errno == EEXIST,
                (try? "\(limit)".write(
                    toFile: group + (version1 ? "/memory.limit_in_bytes" : "/memory.max"), atomically: false, encoding: .utf8))
                    != nil,
                (try? "\(getpid())".write(toFile: group + "/cgroup.procs", atomically: false, encoding: .utf8)) != nil
            else { Self.fail(50, "cannot make the memory group \(group): \(Errno.current)") }
            let test = try TestHost()
            defer { test.remove() }
            let echo = try await test.launch(PluginFixture(library: "Echo"))
            // The OOM killer ranks each process of the group by its resident memory plus
            // oom_score_adj thousandths of the group's limit: plugind's 500 adds 128 MiB here. The
            // host is made resident 104 MiB (its mapped code counts, and differs from build to
            // build) and the hog gets 64 MiB of room: the host is the larger, yet ranked below
            // the hog (about 72 + 128 MiB) and below every other process of plugind's (about
            // 10 + 128 MiB). Below those too, because a second kill can follow the hog's within
            // milliseconds: the kernel stops counting a victim once its threads have exited,
            // while it still frees its memory, and an allocation in the full group meanwhile
            // (a launcher forking a spare, seen) kills the next in rank. A host of 150 MiB was
            // that next one: killed in about one run in fifteen under load. The rest of the
            // group is filled with shared memory, which ranks nobody.
            let hostResident = 104 << 20
            let resident = Self.residentBytes() ?? 0
            guard resident < hostResident - (16 << 20) else {
                Self.fail(56, "the host holds \(resident >> 20) MiB before its ballast, more than this arithmetic allows")
            }
            let ballast = UnsafeMutableRawBufferPointer.allocate(byteCount: hostResident - resident, alignment: 4096)
            defer { ballast.deallocate() }
            // Touched, so that it is the host's own memory.
            for offset in stride(from: 0, to: ballast.count, by: 4096) { ballast[offset] = 1 }
            let hog = try await test.launch(PluginFixture(library: "FaultyMemoryHog", extra: ["limits": ["memoryBytes": 1 << 30]]))
            // Nothing of the pool's on its way while the group is full: its spares and launcher
            // ready, its worker primed.
            await LaunchPool.settleAll()
            let usage = Self.memoryUsage(of: group) ?? limit
            guard let filler = Self.sharedMemoryFiller(bytes: max(0, limit - usage - (64 << 20))) else {
                Self.fail(57, "cannot fill the memory group with shared memory: \(Errno.current)")
            }
            FileHandle.standardError.write(
                Data("host \((Self.residentBytes() ?? 0) >> 20) MiB resident; the group held \(usage >> 20) MiB before its filler\n".utf8))
            let failure: AppExtensionError
            do {
                _ = try await Deadline.wait("the memory hog's end") { try await hog.makeConnection().send([]) }
                Self.fail(51, "the memory hog answered")
            } catch let error as AppExtensionError {
                failure = error
            }
            close(filler)
            guard failure.code == .workerKilled, failure.termination == .signaled(signal: SIGKILL, name: "SIGKILL") else {
                Self.fail(52, "the memory hog ended otherwise: \(failure)")
            }
            guard try await Deadline.wait("the echo's answer", { try await echo.makeConnection().send([3]) }) == [3] else {
                Self.fail(53, "the running echo stopped answering")
            }
            let again = try await Deadline.wait("a launch after the pressure") {
                try await test.launch(PluginFixture(library: "Countdown"))
            }
            let answer = try await Deadline.wait("its answer") { try await again.makeConnection().send(Array("1".utf8)) }
            guard String(decoding: answer, as: UTF8.self) == "counted down 1 steps\n" else { Self.fail(54, "the next answer: \(answer)") }
            // Every worker and launcher the host started is ranked above it for the OOM killer,
            // counted once the pool is settled.
            await LaunchPool.settleAll()
            let host = Self.oomScoreAdjustment(of: getpid()) ?? -1
            let started = ProcessInspection.children(of: getpid()).filter {
                ProcessInspection.readProcFile("/proc/\($0)/comm").hasPrefix("plugind-worker") && ProcessInspection.state(of: $0) != "Z"
            }
            let running = [echo.processIdentifier, again.processIdentifier]
            for child in Set(started + running) {
                let score = Self.oomScoreAdjustment(of: child)
                // One the pool ended since it was listed (a primed worker the last launch had no
                // use for, killed and reaped on the loop) ranks nowhere any more.
                if score == nil, ProcessInspection.state(of: child) == nil, !running.contains(child) { continue }
                guard let score, score >= max(host, 500) else { Self.fail(55, "process \(child) has OOM score adjustment \(score ?? -1)") }
            }
            await again.invalidateAndWait()
            await echo.invalidateAndWait()
        }
        // The group is removed once the child and its workers have left it (a worker of a killed
        // host ends a moment later).
        for pid in ProcessInspection.readProcFile(group + "/cgroup.procs").split(separator: "\n").compactMap({ Int32($0) }) {
            _ = await Deadline.processExit(pid)
        }
        rmdir(group)
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }
}
