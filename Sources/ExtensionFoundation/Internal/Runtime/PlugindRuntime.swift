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
    let sessions = WorkerSessions()
    /// Ends running workers whose plugin the owner disables, revokes or quarantines.
    let policyEnforcement: PolicyEnforcement
    /// The launch pools, by executable and forks (`LaunchPool.key`).
    let launchPools = Locked<[String: LaunchPool]>([:])
    /// Plans made lately, by everything they are made of.
    let launchPlans = LaunchPlanCache()
    private let ended = Locked(false)

    package init() {
        policyEnforcement = PolicyEnforcement(sessions: sessions)
    }

    /// Runs `body` with `self` as the current runtime of the task and the tasks it starts.
    package func withRuntime<Result: Sendable>(_ body: () async throws -> Result) async rethrows -> Result {
        try await Self.$current.withValue(self) { try await body() }
    }

    /// Follows a new session (shared or dedicated) until it ends: the policy is enforced on it.
    func track(_ session: WorkerSession) {
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
    func checkRunning(for plugin: String) throws(AppExtensionError) {
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
        for engine in discoveryEngines.withLock({ $0.removeValues() }) { engine.stop() }
        policyEnforcement.stop()
        launchPlans.removeAll()
    }
}

extension Dictionary {
    /// Empties the dictionary and returns what it held.
    fileprivate mutating func removeValues() -> [Value] {
        defer { removeAll() }
        return Array(values)
    }
}
