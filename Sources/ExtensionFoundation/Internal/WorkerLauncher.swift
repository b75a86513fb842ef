import Foundation
import Glibc
import PlugindSystem
import PlugindWire

/// Starts a worker for a `LaunchPlan`: pipes, spawn (on the event loop's thread, so the worker's
/// parent-death signal is tied to a thread that lives as long as the process), handshake.
enum WorkerLauncher {
    /// Variables a worker inherits; everything else in the host's environment stays behind.
    static let environmentAllowlist = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "TZ"]

    static func launch(_ plan: LaunchPlan) async throws -> (WorkerChannel, Ready) {
        let executable: String
        do {
            executable = try ExecutableLocator.worker.locate(explicit: plan.workerExecutable)
        } catch {
            throw AppExtensionError(.workerNotFound, plugin: nil, error.message)
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
        // A worker confined for this very plan waits already (see `PrimedWorkers`): this launch,
        // whose policy check has passed, is its go.
        if let primed = PrimedWorkers.take(for: plan, executable: executable) { return try await launch(plan, primed: primed, loop: loop) }
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
        let reservation =
            plan.load.confinement.permitsSpare
            ? plan.launchStrategy.forks.flatMap { PreforkedLauncher.running(executable: executable, forks: $0) }?.reserveSpare() : nil
        defer { reservation?.release() }
        // A plugin that may start processes runs in a control group of its own, where the host
        // may make one, so that its limits cover its children too.
        var cgroup: WorkerCgroup?
        if plan.load.confinement.allowsProcesses, let cgroups = WorkerCgroups.available(delegated: plan.cgroupDirectory) {
            do {
                cgroup = try cgroups.makeGroup(for: plan.pluginIdentifier, limits: plan.load.limits)
            } catch {
                throw AppExtensionError(
                    .spawnFailed, plugin: plan.pluginIdentifier, "cannot create its control group: \(error)", underlying: error)
            }
        }
        if let forks = plan.launchStrategy.forks,
            let launched = try await launch(
                plan, executable: executable, sealed: sealed, cgroup: cgroup, loop: loop, sharedLauncher: forks, reservation: reservation)
        {
            return launched
        }
        // Without the shared launcher (or when it failed), a launcher of its own: slower, never
        // less safe. With new pipes: a launcher that died mid-request may have forked a worker
        // holding the old ones.
        guard
            let launched = try await launch(plan, executable: executable, sealed: sealed, cgroup: cgroup, loop: loop, sharedLauncher: nil)
        else {
            cgroup?.remove()
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "cannot start \(executable)")
        }
        return launched
    }

    /// One attempt; nil when the launcher could not start the worker (everything opened for the
    /// attempt is closed again).
    private static func launch(
        _ plan: LaunchPlan,
        executable: String,
        sealed: [FileDescriptor],
        cgroup: WorkerCgroup?,
        loop: WorkerEventLoop,
        sharedLauncher: PreforkedLauncher.Forks?,
        reservation: SpareReservation? = nil
    ) async throws -> (WorkerChannel, Ready)? {
        let resources: WorkerResources
        do {
            resources = try WorkerResources(load: plan.load)
        } catch {
            throw AppExtensionError(
                .spawnFailed, plugin: plan.pluginIdentifier, "cannot create the worker's pipes: \(error)", underlying: error)
        }
        let started: (PreforkedLauncher.StartedWorker, PreforkedLauncher?)?
        do {
            started = try await start(
                executable: executable, resources: resources, sealed: sealed, cgroup: cgroup,
                confinement: plan.load.confinement, sharedLauncher: sharedLauncher, reservation: reservation, loop: loop)
        } catch {
            resources.hostEnds.close()
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "cannot start \(executable): \(error)", underlying: error)
        }
        guard let (worker, launcher) = started else {
            resources.hostEnds.close()
            return nil
        }
        let launched = try await handshake(
            plan, worker: worker, ends: resources.hostEnds, pending: resources.pending, cgroup: cgroup, loop: loop
        ) {
            // The spare's copy of the host's tree is released and the next spare forked, neither
            // while the worker starts.
            launcher?.launchFinished(worker, options: isolatingOptions())
        }
        // The next launch of the same plugin finds a worker confined for it already.
        if let launcher, cgroup == nil, let copies = try? sealed.map({ try $0.duplicate() }) {
            loop.execute { PrimedWorkers.prime(plan, sealed: copies, launcher: launcher) }
        }
        return launched
    }

    /// Launches `plan` on the worker primed for it: the same hello in mode `serve` is its go.
    private static func launch(_ plan: LaunchPlan, primed: PrimedWorkers.Primed, loop: WorkerEventLoop) async throws -> (
        WorkerChannel, Ready
    ) {
        let pending: [UInt8]
        do {
            pending = try WorkerResources.writeHello(
                load: plan.load, sharedMemory: primed.ends.sharedMemory != nil, to: primed.ends.toWorker)
        } catch {
            primed.end()
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "cannot write to the worker: \(error)", underlying: error)
        }
        let launched: (WorkerChannel, Ready)
        do {
            launched = try await handshake(plan, worker: primed.worker, ends: primed.ends, pending: pending, cgroup: nil, loop: loop) {
                primed.launcher.launchFinished(primed.worker, options: isolatingOptions())
            }
        } catch {
            for descriptor in primed.sealed { descriptor.close() }
            throw error
        }
        loop.execute { PrimedWorkers.prime(plan, sealed: primed.sealed, launcher: primed.launcher) }
        return launched
    }

    /// Watches a started worker and waits for its answer to the handshake; `finished` runs on the
    /// loop's thread once it answered or failed.
    static func handshake(
        _ plan: LaunchPlan,
        worker: PreforkedLauncher.StartedWorker,
        ends: WorkerHostEnds,
        pending: [UInt8],
        cgroup: WorkerCgroup?,
        loop: WorkerEventLoop,
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
            cgroup: cgroup
        )
        defer { loop.execute(finished) }
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

    /// Starts the worker through the shared pre-forked launcher (returning it, so that it makes
    /// the next spare) or through a launcher started for this worker alone. Nil when the launcher
    /// is unusable. The descriptors for the child are closed here either way.
    private static func start(
        executable: String,
        resources: WorkerResources,
        sealed: [FileDescriptor],
        cgroup: WorkerCgroup?,
        confinement: ConfinementRequest,
        sharedLauncher: PreforkedLauncher.Forks?,
        reservation: SpareReservation?,
        loop: WorkerEventLoop
    ) async throws -> (PreforkedLauncher.StartedWorker, PreforkedLauncher?)? {
        defer { resources.closeChildEnds() }
        let descriptors = resources.childDescriptors + sealed
        var options = isolatingOptions()
        // A spare has restricted itself ahead; a worker whose host turns confinement (or its
        // system-call layer) off is forked on the spot, restricting nothing before it knows.
        if !confinement.permitsAdvanceRestrictions { options.insert(.noAdvanceRestrictions) }
        // A plugin granted the network shares the host's network namespace, so it is forked on
        // the spot: every spare waits in a network namespace of its own.
        if confinement.allowsNetwork || confinement.disabled || confinement.skippedLayers.contains("network-namespace") {
            options.remove(.newNetworkNamespace)
        }
        #if PLUGIND_THREAD_SANITIZER
            // ThreadSanitizer cannot follow the launcher's forks: the worker is executed directly,
            // without namespaces (the tests that run under it turn confinement off).
            _ = (sharedLauncher, cgroup, options)
            let request = SpawnRequest(
                executablePath: executable, arguments: [executable], environment: environment(),
                descriptors: [resources.null, resources.output.writeEnd, resources.output.writeEnd] + descriptors.dropFirst(),
                options: [.dieWithParentThread]
            )
            let spawned: Result<SpawnedProcess, SystemError> = try await loop.run {
                do throws(SystemError) { return .success(try spawnProcess(request)) } catch { return .failure(error) }
            }
            return (PreforkedLauncher.StartedWorker(process: try spawned.get(), hostTree: nil), nil)
        #else
            if let forks = sharedLauncher {
                do {
                    let launcher = try await PreforkedLauncher.shared(executable: executable, forks: forks, loop: loop)
                    let started = try await launcher.start(
                        descriptors: descriptors, options: options, cgroup: cgroup, reservation: reservation)
                    return (started, launcher)
                } catch {
                    return nil
                }
            }
            // A launcher of its own, which forks this one worker and is ended at once: the worker
            // (the host's child, like every worker) gets a fresh address-space layout.
            let launcher: PreforkedLauncher
            do {
                launcher = try await PreforkedLauncher.startPrivate(executable: executable, loop: loop)
            } catch {
                return nil
            }
            defer { launcher.stop() }
            do {
                return (try await launcher.start(descriptors: descriptors, options: options, cgroup: cgroup), nil)
            } catch {
                return nil
            }
        #endif
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
