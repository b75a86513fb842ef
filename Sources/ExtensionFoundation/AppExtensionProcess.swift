import PlugindBundle
import PlugindSystem
import PlugindWire

/// A running plugin: a `plugind-worker` process that has loaded the plugin's library and
/// answered the handshake. The plugin never runs in the host's process, so its crashes and hangs
/// surface as errors, not as a dead host.
///
/// Talk to it through `makeConnection()`. End it with `invalidate()`, or use
/// `withProcess(configuration:_:)`, which always ends it.
public final class AppExtensionProcess: Sendable {
    /// What to launch and what to do when it stops unexpectedly.
    public struct Configuration: Sendable {
        /// The plugin to launch, from `AppExtensionPoint.Monitor`.
        public var appExtensionIdentity: AppExtensionIdentity
        /// Called once, on an arbitrary thread, when the worker exits without `invalidate()`
        /// having been called: crash, limit, protocol violation or unexpected exit.
        public var onInterruption: @Sendable () -> Void
        /// The host configuration (search paths, policy, limits, worker). Linux addition.
        public var host: AppExtensionHost
        /// Requires every confinement layer for this process, whatever `host.confinement` says.
        public var requiresEnhancedSecurity: Bool

        public init(appExtensionIdentity: AppExtensionIdentity, onInterruption: @escaping @Sendable () -> Void) {
            self.appExtensionIdentity = appExtensionIdentity
            self.onInterruption = onInterruption
            self.host = .current
            self.requiresEnhancedSecurity = false
        }
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
    let channel: WorkerChannel
    let ready: Ready
    let plan: LaunchPlan

    /// Launches the plugin and returns once it is loaded and has answered the handshake.
    ///
    /// - Throws: `AppExtensionError` with code `notFound`, `notApproved` or `quarantined` when the
    ///   identity may not be used; `workerNotFound` or `spawnFailed` when no worker starts;
    ///   `pluginLoadFailed`, `symbolMissing`, `abiMismatch`, `confinementUnavailable`,
    ///   `incompatibleProtocol` when loading fails; `workerCrashed`, `workerExited`, `timedOut`
    ///   when the worker dies or hangs while loading; `pluginError` when the plugin's init fails.
    public init(configuration: Configuration) async throws {
        let host = configuration.host
        let (entry, approval) = try PluginResolution.entry(for: configuration.appExtensionIdentity, host: host)
        let plan = LaunchPlan(
            entry: entry, host: host, approval: approval, requiresEnhancedSecurity: configuration.requiresEnhancedSecurity)
        let channel: WorkerChannel
        let ready: Ready
        do {
            (channel, ready) = try await WorkerLauncher.launch(plan)
        } catch let error as AppExtensionError {
            CrashRecorder.recordLaunchFailure(error, entry: entry, host: host)
            throw error
        }
        self.configuration = configuration
        self.channel = channel
        self.ready = ready
        self.plan = plan
        let onInterruption = configuration.onInterruption
        channel.setInterruptionHandler(onInterruption)
        CrashRecorder.watch(channel, entry: entry, host: host)
    }

    deinit {
        channel.invalidate(grace: plan.shutdownGracePeriod)
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

    /// Ends the process: pending requests fail with `cancelled`, the worker is asked to shut
    /// down and killed if it has not exited after the host's grace period. `onInterruption` is
    /// not called. Idempotent.
    public func invalidate() {
        channel.invalidate(grace: plan.shutdownGracePeriod)
    }

    /// `invalidate()`, then waits until the worker has exited and been reaped.
    public func invalidateAndWait() async {
        invalidate()
        _ = await channel.termination()
    }

    /// A connection for requests, typed calls and messages from the plugin.
    ///
    /// - Throws: `AppExtensionError` with code `invalidated` once the process has ended.
    public func makeConnection() throws -> AppExtensionConnection {
        if channel.isTerminated || channel.isInvalidated {
            throw AppExtensionError(.invalidated, plugin: plan.pluginIdentifier, "the process has ended")
        }
        return AppExtensionConnection(process: self)
    }

    /// The worker's process identifier in the host's pid namespace.
    public var processIdentifier: Int32 { channel.processIdentifier }

    /// How many requests and responses have travelled through shared memory rather than the pipe.
    package var sharedMemoryTransfers: (requests: Int, responses: UInt64) { channel.sharedMemoryTransfers }

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
