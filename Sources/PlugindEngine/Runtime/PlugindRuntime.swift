import FoundationEssentials
import Glibc
import PlugindSystem

/// What plugind keeps between calls of the public API in a host process — the discovery engines,
/// the shared workers, the launch pools, the launch plans and the policy enforcement — in one
/// object with an owner and an end. Every host uses `shared`; a test (or a host that wants to
/// tear plugind down) runs its work under a runtime of its own with `withRuntime`, and ends it
/// with `shutdown()`.
///
/// What each part keys by is what changes its behaviour: discovery by what it reads of a host
/// configuration (`DiscoveryEngine.Key`), the shared workers by the host configuration, the launch pools by the worker executable and how many children a
/// launcher forks, launch plans by everything a plan is made of. What stays process-wide outside
/// this object is not state with a lifetime but facts and content-addressed caches (see
/// Documentation/Architecture.md, "Process-wide state").
///
/// Objects made under a runtime keep it (a session forgets itself in the runtime it was made
/// in, an engine leaves its own registry), so work that continues on plugind's threads, where
/// the task-local runtime is not set, stays in the right one.
package final class PlugindRuntime: Sendable {
    /// The runtime of the process.
    package static let shared = PlugindRuntime()

    /// The runtime the calling task works in: `shared` unless a caller chose another.
    @TaskLocal package static var current: PlugindRuntime = shared

    /// Discovery, one engine per discovery key while it has subscribers.
    let discoveryEngines = Locked<[DiscoveryEngine.Key: DiscoveryEngine]>([:])
    /// The running workers, shared or dedicated.
    package let sessions = WorkerSessions()
    /// Ends running workers whose plugin the owner disables, revokes or quarantines.
    let policyEnforcement: PolicyEnforcement
    /// The launch pools, by executable and forks (`LaunchPool.key`).
    let launchPools = Locked<[String: LaunchPool]>([:])
    /// Plans made lately, by everything they are made of.
    package let launchPlans = LaunchPlanCache()
    /// Launchers exec'd ahead of a one-shot launch (`oneShot`), a private pool each, by worker
    /// executable: the next launch that starts its worker from a pool of its own takes one.
    let poolsStartedAhead = Locked<[String: Task<LaunchPool, any Error>]>([:])
    private let ended = Locked(false)

    package init() {
        policyEnforcement = PolicyEnforcement(sessions: sessions)
    }

    /// Runs `body` with `self` as the current runtime of the task and the tasks it starts.
    package func withRuntime<Result: Sendable>(_ body: () async throws -> Result) async rethrows -> Result {
        try await Self.$current.withValue(self) { try await body() }
    }

    /// Follows a new session (shared or dedicated) until it ends: the policy is enforced on it.
    package func track(_ session: WorkerSession) {
        sessions.track(session)
        policyEnforcement.started(session)
    }

    /// A session that ended, or whose last claim was released.
    func forget(_ session: WorkerSession) {
        if sessions.forget(session) { policyEnforcement.ended(session) }
    }

    /// What the runtime holds now: the processes it started and the hosts it discovers for.
    package struct Holdings: Sendable {
        /// The pids of its running workers.
        package var workers: [Int32]
        /// The pids of the launchers of its running pools (idle and busy).
        package var launchers: [Int32]
        /// The pids of its pools' spares and primed workers.
        package var spares: [Int32]
        /// The identifiers of the hosts it has a discovery engine for.
        package var discoveringHosts: [String]
    }

    package var holdings: Holdings {
        let pools = LaunchPool.runningPools(in: self)
        return Holdings(
            workers: sessions.all().map(\.channel.processIdentifier),
            launchers: pools.flatMap(\.launcherProcessIdentifiers),
            spares: pools.flatMap(\.spareProcessIdentifiers),
            discoveringHosts: discoveryEngines.withLock { $0.keys.map(\.identifier) })
    }

    /// Throws when the runtime was shut down: nothing launches in it any more.
    package func checkRunning(for plugin: String) throws(AppExtensionError) {
        guard isShutDown else { return }
        throw AppExtensionError(
            .invalidated, plugin: plugin, "plugind's runtime in this process was shut down; nothing launches in it any more")
    }

    /// Whether `shutdown()` was called.
    package var isShutDown: Bool { ended.withLock { $0 } }

    /// Ends what the runtime holds: every running worker (asked to shut down within its grace
    /// period, then killed), the launch pools with their launchers and spares, the discovery
    /// engines' and the policy's watchers. Handles made under it fail from then on as if their
    /// worker had ended. `shared` is never shut down by plugind itself; a host may end it as the
    /// last thing it does. Idempotent.
    package func shutdown() {
        let first = ended.withLock { ended -> Bool in
            defer { ended = true }
            return !ended
        }
        guard first else { return }
        for session in sessions.all() { session.channel.invalidate(grace: session.plan.shutdownGracePeriod) }
        for pool in launchPools.withLock({ $0.removeValues() }) { pool.stop() }
        for started in poolsStartedAhead.withLock({ $0.removeValues() }) { Task { try? await started.value.stop() } }
        for engine in discoveryEngines.withLock({ $0.removeValues() }) { engine.stop() }
        policyEnforcement.stop()
        launchPlans.removeAll()
    }
}

// MARK: One launch, then exit

extension PlugindRuntime {
    /// Runs `body`, the one launch of a program that launches one plugin once and then exits
    /// (`plugind run`, `plugind call`), with `host` changed for it, and ends every process it
    /// started before it returns or throws.
    ///
    /// The launch pools of a long-lived host (an idle launcher exec'd ahead, spares, a worker
    /// primed for the next launch) only pay off on a later launch, which such a program never
    /// makes: its launch execs one launcher, which forks its worker (`LaunchStrategy.spawn`; the
    /// worker gets an address-space layout of its own, as by default) and primes nothing. That
    /// launcher is exec'd now, while `body` reads the catalog and the policy, not after: it does
    /// not depend on the plugin. Every confinement layer is what it would be.
    ///
    /// Only for a process that exits right after (the runtime is shut down, and every child of
    /// the process, whoever started it, is killed and reaped: see `shutdownAndReapChildren`).
    package func oneShot<Result: Sendable>(host: AppExtensionHost, _ body: (AppExtensionHost) async throws -> Result) async throws -> Result
    {
        var host = host
        host.launchStrategy = .spawn
        host.primesWorkers = false
        startLauncherAhead(for: host)
        do {
            let result = try await withRuntime { try await body(host) }
            await shutdownAndReapChildren()
            return result
        } catch {
            await shutdownAndReapChildren()
            throw error
        }
    }

    /// Execs a launcher of `host`'s worker executable in a private pool, for the next launch that
    /// needs a pool of its own (`privatePool`). Without a worker executable, nothing: the
    /// launch reports that itself.
    func startLauncherAhead(for host: AppExtensionHost) {
        guard !isShutDown, let executable = try? ExecutableLocator.worker.locate(explicit: host.workerExecutable) else { return }
        let started = Task {
            LaunchTrace.note("launcher ahead of the launch: starting")
            return try await LaunchPool.startPrivate(executable: executable, loop: try WorkerEventLoop.shared())
        }
        let replaced = poolsStartedAhead.withLock { pools in
            defer { pools[executable] = started }
            return pools[executable]
        }
        if let replaced { Task { try? await replaced.value.stop() } }
    }

    /// A private pool for one launch of `executable`, which the caller stops after it: the one
    /// started ahead for it (`startLauncherAhead`) if its launcher started, else a new one.
    func privatePool(executable: String, loop: WorkerEventLoop) async throws -> LaunchPool {
        if let started = poolsStartedAhead.withLock({ $0.removeValue(forKey: executable) }), let pool = try? await started.value,
            !pool.isStopped
        {
            return pool
        }
        return try await LaunchPool.startPrivate(executable: executable, loop: loop)
    }

    /// For a program about to exit: `shutdown()`, then every child of this process is killed and
    /// reaped, so that none outlives it, running or as a zombie. Workers, launchers, spares and
    /// the children launchers fork for this process (`CLONE_PARENT`) are all its children; the
    /// pools reap theirs on the loop thread, asynchronously, and a process whose launch was
    /// under way has no owner left to. Whoever reaps a child first, this or its owner, the other
    /// finds it gone (a pidfd names one process, never a later one with the same pid).
    package func shutdownAndReapChildren() async {
        for started in poolsStartedAhead.withLock({ $0.removeValues() }) { (try? await started.value)?.stop() }
        shutdown()
        var reaped = 0
        // A launcher killed in the middle of a fork may still have made a child of this process:
        // ask again until none is left.
        while true {
            let children = ChildProcesses.ofThisProcess()
            if children.isEmpty { break }
            var ended = 0
            for pid in children {
                guard let descriptor = try? FileDescriptor.processDescriptor(for: pid) else { continue }
                // Opened first, checked second: the pidfd names the process whose parent is read.
                guard ChildProcesses.parent(of: pid) == getpid() else {
                    descriptor.close()
                    continue
                }
                descriptor.killAndReap()
                ended += 1
            }
            reaped += ended
            if ended == 0 { break }
        }
        LaunchTrace.note("exit: reaped \(reaped) child process(es) left")
    }
}

/// The children of this process, from procfs.
enum ChildProcesses {
    /// Every child of every thread of this process, running or a zombie
    /// (`/proc/self/task/TID/children`).
    static func ofThisProcess() -> [Int32] {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return [] }
        return tasks.flatMap { task -> [Int32] in
            let text = (try? String(contentsOfFile: "/proc/self/task/\(task)/children", encoding: .utf8)) ?? ""
            return text.split(whereSeparator: { $0.isWhitespace }).compactMap { Int32($0) }
        }
    }

    /// The parent of `pid` (field 4 of `/proc/PID/stat`, after the command name in parentheses).
    static func parent(of pid: Int32) -> Int32? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? Int32(fields[1]) : nil
    }
}

extension Dictionary {
    /// Empties the dictionary and returns what it held.
    fileprivate mutating func removeValues() -> [Value] {
        defer { removeAll() }
        return Array(values)
    }
}
