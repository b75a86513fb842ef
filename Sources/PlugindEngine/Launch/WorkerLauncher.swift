import FoundationEssentials
import Glibc
import PlugindSystem
package import PlugindWire

/// Starts a worker for a `LaunchPlan`: pipes, spawn (on the event loop's thread, so the worker's
/// parent-death signal is tied to a thread that lives as long as the process), handshake.
package enum WorkerLauncher {
    /// Variables a worker inherits; everything else in the host's environment stays behind.
    static let environmentAllowlist = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "TZ", BusyPolling.switchName]

    /// A worker that answered its handshake.
    package struct Launched {
        package let channel: WorkerChannel
        package let ready: Ready
        /// Why the first try could not start this worker, when a later one did (another launcher
        /// of the shared pool, or a launcher of its own): slower, never less safe, and said
        /// (`plugind run` prints it).
        let fallbackCause: String?
    }

    /// Launches `plan` with the launch pools of `runtime`. A launch refused for layers this
    /// machine cannot apply says how its policy could accept them.
    package static func launch(_ plan: LaunchPlan, in runtime: PlugindRuntime) async throws -> Launched {
        do {
            return try await start(plan, in: runtime)
        } catch let error as AppExtensionError where error.code == .confinementUnavailable {
            throw plan.missingLayerPolicy?.advised(error) ?? error
        }
    }

    private static func start(_ plan: LaunchPlan, in runtime: PlugindRuntime) async throws -> Launched {
        // The launch's deadline: no try starts after it.
        let deadline = ContinuousClock.now + plan.launchTimeout
        let executable: String
        do {
            executable = try ExecutableLocator.worker.locate(explicit: plan.workerExecutable)
        } catch {
            throw AppExtensionError(.workerNotFound, plugin: nil, error.message)
        }
        if let failure = plan.dependencyHostFailure {
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "\(failure); the plugin is not at fault")
        }
        if let refusal = plan.dependencyRefusal {
            throw AppExtensionError(.pluginLoadFailed, plugin: plan.pluginIdentifier, "\(refusal); nothing was loaded")
        }
        let loop: WorkerEventLoop
        do {
            loop = try WorkerEventLoop.shared()
        } catch {
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "cannot start the event loop: \(error)", underlying: error)
        }
        let pool = plan.launchStrategy.forks.flatMap { LaunchPool.running(executable: executable, forks: $0, in: runtime) }
        // A worker confined for this very plan waits already (see `PrimedWorker`): this launch,
        // whose policy check has passed, is its go.
        if let pool, let primed = pool.takePrimed(for: plan), let launched = try await launch(plan, primed: primed, pool: pool) {
            return launched
        }
        // The bytes the worker will load: read, hashed and sealed (or reused from an earlier
        // launch), and checked against the approval before any process starts.
        let sealed: [FileDescriptor]
        do {
            sealed = try await SealedFileCache.shared.descriptors(for: plan.sealedFiles)
        } catch {
            throw AppExtensionError(sealedFileFailure: error, plugin: plan.pluginIdentifier)
        }
        defer { for descriptor in sealed { descriptor.close() } }
        // The spare this launch will most likely use is woken now, so that it runs by the time
        // the pipes and the shared memory below are made.
        let reservation = plan.load.confinement.permitsSpare ? pool?.reserveSpare() : nil
        defer { reservation?.release() }
        var attempt = try Attempt(plan: plan, executable: executable, sealed: sealed, loop: loop, runtime: runtime)
        var retries = LaunchRetries(deadline: deadline)
        // Why the first try failed, when a later one started the worker (`plugind run` says it).
        var fallbackCause: String?
        // A limit of the host's (its processes, descriptors, memory) named in the final error: the
        // owner can act on it, and it is never the plugin's doing.
        var exhausted: String?
        var path: LaunchRetries.Path = plan.launchStrategy.forks == nil ? .own : .shared
        while true {
            let failure: any Error
            let choice: PoolChoice = plan.launchStrategy.forks.flatMap { path == .shared ? .shared($0) : nil } ?? .own
            do {
                // The reserved spare is for the first try only; a later one finds its own.
                switch try await attempt.run(pool: choice, reservation: retries.tries == 1 ? reservation : nil) {
                case .launched(let launched):
                    return Launched(channel: launched.channel, ready: launched.ready, fallbackCause: fallbackCause)
                case .failed(let cause):
                    failure = cause
                    exhausted = (cause as? SystemError)?.exhaustedHostResource ?? exhausted
                }
            } catch let error as AppExtensionError where error.code == .workerKilled {
                failure = error
            }
            let kind = LaunchRetries.Failure(failure)
            switch retries.decide(after: kind, on: path, now: .now) {
            case .tryAgain(let next):
                fallbackCause =
                    fallbackCause
                    ?? (kind == .workerKilled ? "the worker it started was killed from outside before it was ready" : "\(failure)")
                // A worker killed before it was ready takes its control group with it: the next
                // try makes another. Any other try leaves the group to the next, and the next try
                // makes new pipes: a launcher that died mid-request may have forked a worker
                // holding the old ones.
                if kind == .workerKilled {
                    attempt = try Attempt(plan: plan, executable: executable, sealed: sealed, loop: loop, runtime: runtime)
                }
                path = next
            case .giveUp:
                // A worker that was started and failed: its own error, never retried (it may be the
                // plugin's crash).
                if kind == .workerKilled || kind == .workerFailed { throw failure }
                attempt.cgroup?.remove()
                let limit = ((failure as? SystemError)?.exhaustedHostResource ?? exhausted).map { "; " + $0 } ?? ""
                let tries = retries.tries
                let reason =
                    kind.isLauncherLost
                    ? "cannot start \(executable): plugind's launcher died before the worker was started (\(failure)), "
                        + "\(tries) \(tries == 1 ? "try" : "tries")\(limit); the plugin is not at fault"
                    : "cannot start \(executable): \(fallbackCause.map { "the shared launcher failed (\($0)), then " } ?? "")\(failure)\(limit)"
                throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, reason, underlying: failure)
            }
        }
    }

    /// Which pool an attempt starts its worker from.
    private enum PoolChoice {
        /// The host's shared pool with launchers of this kind.
        case shared(LaunchPool.Forks)
        /// A private pool, whose one launcher forks this worker and is ended at once.
        case own
    }

    /// One attempt at starting the worker and waiting for its handshake.
    private struct Attempt {
        enum Outcome {
            case launched(Launched)
            /// The pool could not start the worker (everything opened for the attempt is closed
            /// again): why.
            case failed(any Error)
        }

        let plan: LaunchPlan
        let executable: String
        let sealed: [FileDescriptor]
        /// A plugin that may start processes runs in a control group of its own, where the host
        /// may make one, so that its limits cover its children too. A worker that started takes
        /// its group with it when it is reaped; one that never started leaves it to the next
        /// attempt.
        let cgroup: WorkerCgroup?
        let loop: WorkerEventLoop
        let runtime: PlugindRuntime

        init(plan: LaunchPlan, executable: String, sealed: [FileDescriptor], loop: WorkerEventLoop, runtime: PlugindRuntime) throws {
            self.plan = plan
            self.executable = executable
            self.sealed = sealed
            self.loop = loop
            self.runtime = runtime
            guard plan.load.confinement.allowsProcesses, let cgroups = WorkerCgroups.available(delegated: plan.cgroupDirectory) else {
                cgroup = nil
                return
            }
            do {
                cgroup = try cgroups.makeGroup(for: plan.pluginIdentifier, limits: plan.load.limits)
            } catch {
                throw AppExtensionError(
                    .spawnFailed, plugin: plan.pluginIdentifier, "cannot create its control group: \(error)", underlying: error)
            }
        }

        func run(pool choice: PoolChoice, reservation: SpareReservation?) async throws -> Outcome {
            let resources: WorkerResources
            do {
                resources = try WorkerResources(load: plan.load)
            } catch {
                let exhausted = error.exhaustedHostResource.map { "; " + $0 } ?? ""
                throw AppExtensionError(
                    .spawnFailed, plugin: plan.pluginIdentifier, "cannot create the worker's pipes: \(error)\(exhausted)",
                    underlying: error)
            }
            let started: (StartedWorker, LaunchPool?)
            do {
                started = try await start(resources: resources, pool: choice, reservation: reservation)
            } catch {
                resources.hostEnds.close()
                return .failed(error)
            }
            let (worker, pool) = started
            let launched = try await handshake(
                plan, worker: worker, ends: resources.hostEnds, pending: resources.pending, cgroup: cgroup, loop: loop,
                executable: executable
            ) {
                // The spare's copy of the host's tree is released and the next spare forked,
                // neither while the worker starts.
                pool?.launchFinished(worker, options: isolatingOptions())
            }
            // The next launch of the same plugin finds a worker confined for it already, confined
            // once the host is quiet.
            if let pool, cgroup == nil, let copies = try? sealed.map({ try $0.duplicate() }) {
                pool.primeWhenQuiet(plan, sealed: copies)
            }
            return .launched(Launched(channel: launched.0, ready: launched.1, fallbackCause: nil))
        }

        /// Starts the worker from the shared pool (returning it, so that it makes the next spare)
        /// or from a pool of its own. The descriptors for the child are closed here either way.
        private func start(resources: WorkerResources, pool choice: PoolChoice, reservation: SpareReservation?) async throws -> (
            StartedWorker, LaunchPool?
        ) {
            defer { resources.closeChildEnds() }
            let descriptors = resources.childDescriptors + sealed
            let confinement = plan.load.confinement
            var options = isolatingOptions()
            // A spare has restricted itself ahead; a worker whose host turns confinement (or its
            // system-call layer) off is forked on the spot, restricting nothing before it knows.
            if !confinement.permitsAdvanceRestrictions { options.insert(.noAdvanceRestrictions) }
            // A plugin granted the network shares the host's network namespace, so it is forked
            // on the spot: every spare waits in a network namespace of its own.
            if confinement.allowsNetwork || confinement.disabled || confinement.skippedLayers.contains("network-namespace") {
                options.remove(.newNetworkNamespace)
            }
            #if PLUGIND_THREAD_SANITIZER
                // ThreadSanitizer cannot follow the launcher's forks: the worker is executed
                // directly, without namespaces (the tests that run under it turn confinement off).
                _ = (choice, reservation, options)
                let request = SpawnRequest(
                    executablePath: executable, arguments: [executable], environment: environment(),
                    descriptors: [resources.null, resources.output.writeEnd, resources.output.writeEnd] + descriptors.dropFirst(),
                    options: [.dieWithParentThread]
                )
                let spawned: Result<SpawnedProcess, SystemError> = try await loop.run {
                    do throws(SystemError) { return .success(try spawnProcess(request)) } catch { return .failure(error) }
                }
                return (StartedWorker(process: try spawned.get(), hostTree: nil), nil)
            #else
                switch choice {
                case .shared(let forks):
                    let pool = try await LaunchPool.shared(executable: executable, forks: forks, loop: loop, in: runtime)
                    let started = try await pool.start(descriptors: descriptors, options: options, cgroup: cgroup, reservation: reservation)
                    return (started, pool)
                case .own:
                    // The worker (the host's child, like every worker) gets a fresh address-space
                    // layout.
                    let pool = try await runtime.privatePool(executable: executable, loop: loop)
                    defer { pool.stop() }
                    return (try await pool.start(descriptors: descriptors, options: options, cgroup: cgroup), nil)
                }
            #endif
        }
    }

    /// Launches `plan` on the worker primed for it: the same hello in mode `serve` is its go. Nil
    /// when the primed worker was gone before it was ready — its pipe closed, or it was killed from
    /// outside (`workerKilled`, never the plugin's doing): the launch goes on as if none had been
    /// primed.
    private static func launch(_ plan: LaunchPlan, primed: PrimedWorker, pool: LaunchPool) async throws -> Launched? {
        let pending: [UInt8]
        do {
            pending = try WorkerResources.writeHello(
                load: plan.load, sharedMemory: primed.ends.sharedMemory != nil, to: primed.ends.toWorker)
        } catch {
            pool.end(primed)
            return nil
        }
        let launched: (WorkerChannel, Ready)
        do {
            launched = try await handshake(
                plan, worker: primed.worker, ends: primed.ends, pending: pending, cgroup: nil, loop: pool.loop, executable: pool.executable
            ) {
                pool.launchFinished(primed.worker, options: isolatingOptions())
            }
        } catch {
            for descriptor in primed.sealed { descriptor.close() }
            if let error = error as? AppExtensionError, error.code == .workerKilled { return nil }
            throw error
        }
        pool.primeWhenQuiet(plan, sealed: primed.sealed)
        return Launched(channel: launched.0, ready: launched.1, fallbackCause: nil)
    }

    /// Watches a started worker and waits for its answer to the handshake; `finished` runs on the
    /// loop's thread once it answered or failed.
    static func handshake(
        _ plan: LaunchPlan,
        worker: StartedWorker,
        ends: WorkerHostEnds,
        pending: [UInt8],
        cgroup: WorkerCgroup?,
        loop: WorkerEventLoop,
        executable: String,
        finished: @escaping @Sendable () -> Void
    ) async throws -> (WorkerChannel, Ready) {
        let channel = WorkerChannel(
            pluginIdentifier: plan.pluginIdentifier,
            hostIdentifier: plan.hostIdentifier,
            asksPerConnection: plan.asksPerConnection,
            limits: plan.load.limits,
            process: worker.process,
            toWorker: ends.toWorker,
            fromWorker: ends.fromWorker,
            diagnostics: ends.diagnostics,
            loop: loop,
            cancellationGracePeriod: plan.cancellationGracePeriod,
            sharedMemory: ends.sharedMemory,
            cgroup: cgroup,
            stackSource: (plan, executable),
            // Probes of the confinement and of the library run no plugin code for anyone: no page,
            // no launch in the plugin's activity (their log entries, if any, still count).
            activity: WorkerActivity(
                plan.activity, workerPID: worker.process.processIdentifier,
                servesRequests: plan.load.mode == .serve || plan.load.mode == .debug)
        )
        defer { loop.execute(finished) }
        plan.workerStarted?(worker.process.processIdentifier, executable)
        // With the whole hello in the pipe, a quick worker's answer is awaited right here.
        if pending.isEmpty { channel.receiveHandshake(within: min(plan.launchTimeout, handshakeWaitOnCaller)) }
        do {
            try channel.activate(pending: pending)
        } catch {
            channel.stop(.cancelledLaunch)
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "cannot watch the worker: \(error)", underlying: error)
        }
        let ready = try await channel.awaitReady(timeout: plan.launchTimeout)
        return (channel, ready)
    }

    /// How long a launch waits for the worker's answer on its own thread before it leaves the
    /// wait to the event loop: longer than a quick plugin takes to load, short enough that a
    /// slow one does not hold a thread of the cooperative pool for long.
    static let handshakeWaitOnCaller: Duration = .milliseconds(2)

    /// A new session and new user, pid, mount and IPC namespaces (also under root): the worker
    /// and everything it starts die together, it holds no privilege outside, and it builds its
    /// own view of the filesystem.
    static func isolatingOptions() -> SpawnRequest.Options {
        [.newSession, .dieWithParentThread, .namespaces, .newNetworkNamespace]
    }

    static func environment() -> [String] {
        let current = ProcessInfo.processInfo.environment
        var result = environmentAllowlist.compactMap { name in current[name].map { "\(name)=\($0)" } }
        // The worker reports crashes itself; the Swift runtime's backtracer would only slow them.
        result.append("SWIFT_BACKTRACE=enable=no")
        return result
    }
}
