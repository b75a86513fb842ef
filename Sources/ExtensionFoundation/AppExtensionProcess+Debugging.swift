import FoundationEssentials
import Glibc
import PlugindEngine
import PlugindSystem
import PlugindWire

extension AppExtensionProcess {
    /// A process for `plugind debug`: the approved plugin of `configuration`, launched by the
    /// owner's own command in a worker of its own, confined as usual except that once every layer
    /// is applied the worker is made traceable by the owner's debugger (dumpable; any tracer of
    /// its user where Yama restricts ptrace). `workerStarted` learns the worker's pid and its
    /// executable (whose sealed copy runs: the same bytes, for the debugger's symbols) at once;
    /// the worker then waits until a debugger has attached and stops (SIGTRAP, the init's address
    /// as the signal's value) before the plugin's init. The launch and its requests wait as long
    /// as the owner debugs: a day. Its crashes are not recorded (a debugger makes them on
    /// purpose); the owner's policy still ends it.
    ///
    /// - Throws: what a launch throws: `notApproved` and the other refusals before anything starts.
    package static func debugging(
        configuration: Configuration, workerStarted: @escaping @Sendable (_ pid: Int32, _ executable: String) -> Void
    ) async throws -> AppExtensionProcess {
        var host = configuration.host
        host.launchStrategy = .spawn
        host.primesWorkers = false
        host.launchTimeout = debuggingDeadline
        host.limits.requestTimeout = debuggingDeadline
        let (entry, approval) = try PluginResolution.entry(for: configuration.appExtensionIdentity, host: host)
        var plan = LaunchPlan(
            entry: entry, host: host, approval: approval, requiresEnhancedSecurity: configuration.requiresEnhancedSecurity)
        plan.load.mode = .debug
        plan.workerStarted = workerStarted
        let runtime = PlugindRuntime.current
        try runtime.checkRunning(for: entry.identifier)
        let launched = try await WorkerLauncher.launch(plan, in: runtime)
        let session = WorkerSession(launched, plan: plan, entry: entry, host: host, key: nil, runtime: runtime)
        runtime.track(session)
        guard let claim = session.claim(onInterruption: configuration.onInterruption) else {
            throw AppExtensionError(.workerExited, plugin: entry.identifier, "its worker ended as it started")
        }
        var debugged = configuration
        debugged.host = host
        debugged.sharing = .dedicated
        return AppExtensionProcess(configuration: debugged, session: session, claim: claim)
    }

    /// How long a debugged launch and its requests may take.
    package static let debuggingDeadline: Duration = .seconds(86_400)
}
