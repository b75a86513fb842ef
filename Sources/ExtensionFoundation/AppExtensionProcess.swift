import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindEngine
import PlugindSystem
import PlugindWire

/// A running plugin: a `plugind-worker` process that has loaded the plugin's library and
/// answered the handshake. The plugin never runs in the host's process, so its crashes and hangs
/// surface as errors, not as a dead host.
///
/// Like Apple's, a process is shared: a second `AppExtensionProcess` for the same identity (the
/// same approved bytes) in this host process attaches to the worker already running instead of
/// starting another. Each instance is a claim on the worker; `invalidate()` (or releasing the
/// instance) gives it back, and the last claim ends the worker. Ask for a worker of its own with
/// `Configuration.sharing = .dedicated`.
///
/// Talk to it through `makeConnection()`. End it with `invalidate()`, or use
/// `withProcess(configuration:_:)`, which always ends it.
public final class AppExtensionProcess: Sendable {
    /// What to launch and what to do when it stops unexpectedly.
    public struct Configuration: Sendable {
        /// The plugin to launch, from `AppExtensionPoint.Monitor`.
        public var appExtensionIdentity: AppExtensionIdentity
        /// Called once, on an arbitrary thread, when the worker exits without `invalidate()`
        /// having been called: crash, limit, protocol violation, the owner disabling the plugin,
        /// or an unexpected exit. Every live process sharing the worker gets the call.
        public var onInterruption: @Sendable () -> Void
        /// The host configuration (search paths, policy, limits, worker): the host of the
        /// monitor that found the identity. Linux addition.
        public var host: AppExtensionHost
        /// Requires every confinement layer for this process, whatever `host.confinement` says;
        /// true when the identity's extension point declared `EnhancedSecurity(true)`.
        public var requiresEnhancedSecurity: Bool
        /// Whether this process may share a running worker (the default, as on Apple platforms)
        /// or gets one of its own, say one per document. A LADSPA or frei0r plugin's process
        /// always gets its own: its worker holds one instance. Linux addition.
        public var sharing: Sharing

        /// `onInterruption` may be left out, as on Apple platforms (then an interruption is only
        /// seen in the errors of the requests it fails).
        public init(appExtensionIdentity: AppExtensionIdentity, onInterruption: @escaping @Sendable () -> Void = {}) {
            self.appExtensionIdentity = appExtensionIdentity
            self.onInterruption = onInterruption
            self.host = appExtensionIdentity.host ?? .current
            self.requiresEnhancedSecurity = appExtensionIdentity.requiresEnhancedSecurity
            self.sharing = .shared
        }
    }

    /// How a process gets its worker.
    public enum Sharing: Sendable, Hashable {
        /// Attach to the worker already running the same approved plugin, else start one.
        case shared
        /// Always start a worker of its own.
        case dedicated
    }

    /// One confinement layer of the worker, as the worker verified it after applying it.
    public struct ConfinementLayer: Sendable, Hashable, CustomStringConvertible {
        public enum State: String, Sendable, Hashable {
            case applied
            case notRequested = "not-requested"
            case unavailable
        }

        public let name: String
        public let state: State
        public let detail: String

        public var description: String { "\(name): \(state.rawValue) (\(detail))" }
    }

    public let configuration: Configuration
    let session: WorkerSession
    private let claim: Int
    /// This handle's own state, apart from the worker's (which other handles may share): once it
    /// is invalidated, its connections are closed and it opens no more.
    private let handle = Locked<(invalidated: Bool, connections: Set<UInt32>)>((false, []))
    /// The handles its calls returned (`FunctionHandle`), and their releases.
    let handles: ProcessHandles
    /// The index of each declared function by name: a call finds its function in one lookup,
    /// not by comparing its name with every name declared before it.
    private let functionIndices: [String: Int]

    var channel: WorkerChannel { session.channel }
    var ready: Ready { session.ready }
    var plan: LaunchPlan { session.plan }

    /// Launches the plugin (or attaches to its running worker) and returns once it is loaded and
    /// has answered the handshake.
    ///
    /// - Throws: `AppExtensionError` with code `notFound`, `notApproved` or `quarantined` when the
    ///   identity may not be used; `workerNotFound` or `spawnFailed` when no worker starts;
    ///   `pluginLoadFailed`, `symbolMissing`, `abiMismatch`, `confinementUnavailable`,
    ///   `incompatibleProtocol` when loading fails; `workerCrashed`, `workerExited`, `timedOut`
    ///   when the worker dies or hangs while loading; `pluginError` when the plugin's init fails.
    public convenience init(configuration: Configuration) async throws {
        let (session, claim) = try await Self.attach(configuration)
        self.init(configuration: configuration, session: session, claim: claim)
    }

    /// Launches the plugin (or attaches to its running worker), blocking the calling thread until
    /// it is loaded and has answered the handshake, as Apple's synchronous initializer does.
    ///
    /// Call it from a thread of your own or the main thread, outside any task: the launch runs
    /// on Swift's concurrency pool, which a blocked pool thread would starve. In async code use
    /// the asynchronous initializer (Swift picks it there).
    ///
    /// - Throws: the errors of `init(configuration:) async`.
    public convenience init(configuration: Configuration) throws {
        let (session, claim) = try BlockingCall.run { try await Self.attach(configuration) }.get()
        self.init(configuration: configuration, session: session, claim: claim)
    }

    init(configuration: Configuration, session: WorkerSession, claim: Int) {
        self.configuration = configuration
        self.session = session
        self.claim = claim
        let functions = session.plan.load.functions
        self.handles = ProcessHandles(
            channel: session.channel, pluginIdentifier: session.plan.pluginIdentifier, functions: functions,
            timeout: session.plan.requestTimeout)
        functionIndices = Dictionary(functions.indices.map { (functions[$0].name, $0) }) { first, _ in first }
    }

    /// The worker session for `configuration` and this handle's claim on it.
    private static func attach(_ configuration: Configuration) async throws -> (WorkerSession, Int) {
        let host = configuration.host
        let runtime = PlugindRuntime.current
        try runtime.checkRunning(for: configuration.appExtensionIdentity.bundleIdentifier)
        // Taken before the policy is checked: if the files are the same after the launch, no
        // disable can have landed during it.
        let policyBefore = PolicyEnforcement.Fingerprint(host: host)
        let (entry, approval) = try PluginResolution.entry(for: configuration.appExtensionIdentity, host: host)
        // A foreign plugin's worker holds one instance (LADSPA and frei0r are single-threaded per
        // instance, and its buffers are that instance's): never shared.
        let key: WorkerSession.Key? =
            configuration.sharing == .dedicated || entry.manifest.adapter != nil
            ? nil
            : WorkerSession.Key(
                host: host, bundle: entry.bundle, approvedDigest: approval?.bundleDigest,
                requiresEnhancedSecurity: configuration.requiresEnhancedSecurity)
        let requiresEnhancedSecurity = configuration.requiresEnhancedSecurity
        let launch: () async throws -> WorkerSession = {
            try await Self.launch(
                entry: entry, approval: approval, host: host, requiresEnhancedSecurity: requiresEnhancedSecurity, key: key,
                policyBefore: policyBefore, runtime: runtime)
        }
        // A shared worker may end between the attach and the claim; then attach (or launch) again.
        for _ in 0..<3 {
            let session: WorkerSession
            if let key {
                session = try await runtime.sessions.session(for: key, launch: launch)
            } else {
                session = try await launch()
            }
            if let claim = session.claim(onInterruption: configuration.onInterruption) { return (session, claim) }
        }
        throw AppExtensionError(.workerExited, plugin: entry.identifier, "its worker ended each time as it was attached to")
    }

    private static func launch(
        entry: CatalogEntry, approval: Approval?, host: AppExtensionHost, requiresEnhancedSecurity: Bool, key: WorkerSession.Key?,
        policyBefore: PolicyEnforcement.Fingerprint, runtime: PlugindRuntime
    ) async throws -> WorkerSession {
        let plan = runtime.launchPlans.plan(
            entry: entry, host: host, approval: approval, requiresEnhancedSecurity: requiresEnhancedSecurity)
        let launched: WorkerLauncher.Launched
        do {
            launched = try await WorkerLauncher.launch(plan, in: runtime)
        } catch let error as AppExtensionError {
            CrashRecorder.recordLaunchFailure(error, entry: entry, host: host)
            throw error
        }
        let session = WorkerSession(launched, plan: plan, entry: entry, host: host, key: key, runtime: runtime)
        CrashRecorder.watch(launched.channel, entry: entry, host: host)
        runtime.track(session)
        // The policy was checked before the launch, and enforcement watches it from `track` on: a
        // disable, revoke or quarantine that landed in between (a plugin's init may take as long as
        // the launch timeout) is caught here, before the process answers anything. Unchanged
        // files cannot have changed the decision: the common case costs four stat calls.
        if PolicyEnforcement.Fingerprint(host: host) != policyBefore, let reason = PolicyEnforcement.launchRevocation(of: entry, host: host)
        {
            session.channel.stop(.disabledByOwner(reason))
            throw AppExtensionError(.disabledByOwner, plugin: entry.identifier, reason)
        }
        return session
    }

    deinit {
        session.release(claim)
    }

    /// Runs `body` with a launched process and ends the process when `body` returns or throws,
    /// waiting until the worker has exited.
    public static func withProcess<Result: Sendable>(
        configuration: Configuration,
        _ body: (AppExtensionProcess) async throws -> Result
    ) async throws -> Result {
        let process = try await AppExtensionProcess(configuration: configuration)
        do {
            let result = try await body(process)
            await process.invalidateAndWait()
            return result
        } catch {
            await process.invalidateAndWait()
            throw error
        }
    }

    /// Gives this process's claim on the worker back. When it was the last claim, the worker
    /// ends: pending requests fail with `cancelled`, the worker is asked to shut down and killed
    /// if it has not exited after the host's grace period. `onInterruption` is not called for
    /// this process any more. Idempotent.
    public func invalidate() {
        _ = endHandle()
    }

    /// Marks this handle invalidated, closes its connections and gives its claim back; true when
    /// that ended the worker.
    private func endHandle() -> Bool {
        let connections = handle.withLock { handle -> Set<UInt32> in
            defer { handle = (true, []) }
            return handle.invalidated ? [] : handle.connections
        }
        for connection in connections.sorted() { channel.closeConnection(connection) }
        return session.release(claim)
    }

    /// A connection of this handle closed.
    func forget(connection identifier: UInt32) {
        handle.withLock { _ = $0.connections.remove(identifier) }
    }

    /// `invalidate()`, then, when that ended the worker, waits until it has exited and been
    /// reaped. (A worker other processes still claim keeps running.)
    public func invalidateAndWait() async {
        if endHandle() || channel.isInvalidated { _ = await channel.termination() }
    }

    /// Opens a connection to the plugin, which may accept or refuse it. The plugin cannot ask
    /// the host anything on it (its asks fail with "unsupported").
    ///
    /// - Throws: `AppExtensionError` with code `connectionRefused` (the plugin's reason in the
    ///   description), `invalidated` once the process has ended.
    ///
    /// - Parameter timeout: how long the plugin has to accept or refuse the connection; the
    ///   request timeout by default. Past it the connection fails with `timedOut` and is closed,
    ///   and a worker that answers neither it nor the close within the host's cancellation grace
    ///   period is stopped, like one that ignores a cancelled request.
    public func makeConnection(timeout: Duration? = nil) async throws -> AppExtensionConnection {
        try await openConnection(timeout: timeout, handler: nil)
    }

    /// Opens a connection whose `requestHandler` answers what the plugin asks the host on it.
    /// The handler runs in a task of its own for each ask; it may itself send requests to the
    /// plugin (the plugin's thread that asked runs them), which it awaits. While the caller of a
    /// request on the connection waits for its answer alone, the task starts on that caller's
    /// thread and runs there until it first suspends, with no thread woken for it; a handler that
    /// blocked its thread until a request of its own ended would hold the thread that reads the
    /// answer. An error it throws reaches the plugin with its code
    /// (`AppExtensionConnection.RequestFailure`, else 1) and description. Closing the connection,
    /// or the end of the process, cancels the handlers still running and fails the plugin's
    /// waiting asks at once.
    /// `timeout` as in `makeConnection(timeout:)`.
    public func makeConnection(
        timeout: Duration? = nil,
        requestHandler: @escaping @Sendable (_ request: [UInt8]) async throws -> [UInt8]
    ) async throws -> AppExtensionConnection {
        try await openConnection(timeout: timeout, startsOnCaller: true, handler: requestHandler)
    }

    /// `makeConnection(requestHandler:)` for a handler that may block its thread (the C
    /// library's, which runs C code): each ask's task starts on a thread of its own.
    package func makeConnection(
        timeout: Duration? = nil, blockingRequestHandler: @escaping @Sendable (_ request: [UInt8]) async throws -> [UInt8]
    ) async throws -> AppExtensionConnection {
        try await openConnection(timeout: timeout, startsOnCaller: false, handler: blockingRequestHandler)
    }

    /// `makeConnection(requestHandler:)` with JSON: the plugin's ask is decoded as `Request`,
    /// the handler's result encoded as the answer.
    public func makeConnection<Request: Decodable & Sendable, Response: Encodable & Sendable>(
        timeout: Duration? = nil,
        requestHandler: @escaping @Sendable (_ request: Request) async throws -> Response
    ) async throws -> AppExtensionConnection {
        try await openConnection(timeout: timeout, startsOnCaller: true) { bytes in
            let request = try JSONDecoder().decode(Request.self, from: Data(bytes))
            return [UInt8](try JSONEncoder().encode(try await requestHandler(request)))
        }
    }

    private func openConnection(
        timeout: Duration? = nil, startsOnCaller: Bool = false, handler: WorkerChannel.RequestHandler?
    ) async throws -> AppExtensionConnection {
        if channel.isTerminated || channel.isInvalidated {
            throw AppExtensionError(.invalidated, plugin: plan.pluginIdentifier, "the process has ended")
        }
        let invalidated = AppExtensionError(.invalidated, plugin: plan.pluginIdentifier, "this process was invalidated")
        if handle.withLock({ $0.invalidated }) { throw invalidated }
        let identifier = try await channel.openConnection(
            handler: handler, timeout: timeout ?? plan.requestTimeout, startsOnCaller: startsOnCaller)
        let kept = handle.withLock { handle -> Bool in
            guard !handle.invalidated else { return false }
            handle.connections.insert(identifier)
            return true
        }
        guard kept else {
            channel.closeConnection(identifier)
            throw invalidated
        }
        return AppExtensionConnection(process: self, identifier: identifier)
    }

    /// The worker's process identifier in the host's pid namespace.
    public var processIdentifier: Int32 { channel.processIdentifier }

    /// Why the host's shared launch pool could not start this worker, when a launcher started for
    /// it alone did (slower, never less safe); nil for a worker from the pool.
    package var launchFallbackCause: String? { session.launchFallbackCause }

    /// How many requests and responses have travelled through shared memory rather than the pipe.
    package var sharedMemoryTransfers: (requests: Int, responses: UInt64) { channel.sharedMemoryTransfers }

    /// The data area a foreign plugin's buffers live in, shared with the worker; nil for a plugin
    /// of plugind's own ABI.
    package var sharedData: SharedDataArea? { channel.sharedData }

    /// The executor of the thread that does this host's worker I/O. A task that prefers it
    /// (`withTaskExecutorPreference(process.taskExecutor) { … }`) resumes on the thread that read
    /// the worker's answer instead of waking another one: worth it for tight loops of small
    /// requests. The thread serves every worker of the process, so code running there must be
    /// short and must never block.
    public var taskExecutor: any TaskExecutor { channel.loop }

    /// The plugin's name and version as its descriptor reports them (empty for function-only
    /// plugins).
    public var pluginName: String { ready.pluginName }
    public var pluginVersion: String { ready.pluginVersion }

    /// The confinement the worker runs under, layer by layer.
    public var confinement: [ConfinementLayer] {
        ready.confinement.map(ConfinementLayer.init)
    }

    /// Whether the plugin has a request handler (false for function-only plugins).
    public var acceptsRequests: Bool { ready.hasRequestHandler }

    /// The functions its manifest declares, callable with `AppExtensionConnection.call`.
    public var functions: [FunctionSignature] { plan.load.functions }

    /// The declared function named `name`, and its index in `functions` (what a call sends).
    func function(named name: String) -> (index: Int, signature: FunctionSignature)? {
        guard let index = functionIndices[name] else { return nil }
        return (index, plan.load.functions[index])
    }

    /// The deadline a request gets when the caller gives none.
    public var defaultRequestTimeout: Duration { plan.requestTimeout }

    /// Waits until the worker has exited; returns how it ended.
    public func waitForTermination() async -> AppExtensionError.Termination {
        await channel.termination().publicTermination
    }

    /// Waits until the worker has exited; returns the last bytes it wrote to stdout and stderr.
    package func outputTail() async -> String {
        await channel.termination().output
    }
}
