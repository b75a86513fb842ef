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
        let executable = try WorkerLocator.locate(explicit: plan.workerExecutable)
        let loop: WorkerEventLoop
        do {
            loop = try WorkerEventLoop.shared()
        } catch {
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "cannot start the event loop: \(error)", underlying: error)
        }

        let pipes: (toWorker: PlugindSystem.Pipe, fromWorker: PlugindSystem.Pipe, output: PlugindSystem.Pipe, null: FileDescriptor)
        do {
            pipes = (
                try PlugindSystem.Pipe(), try PlugindSystem.Pipe(), try PlugindSystem.Pipe(), try FileDescriptor.open("/dev/null", O_RDONLY)
            )
        } catch {
            throw AppExtensionError(
                .spawnFailed, plugin: plan.pluginIdentifier, "cannot create the worker's pipes: \(error)", underlying: error)
        }
        let request = SpawnRequest(
            executablePath: executable,
            arguments: [executable],
            environment: environment(),
            descriptors: [pipes.null, pipes.output.writeEnd, pipes.output.writeEnd, pipes.toWorker.readEnd, pipes.fromWorker.writeEnd],
            options: isolatingOptions()
        )
        let spawned: Result<SpawnedProcess, SystemError> = try await loop.run { spawnIsolated(request) }
        // The child has its own copies now.
        for descriptor in [pipes.null, pipes.output.writeEnd, pipes.toWorker.readEnd, pipes.fromWorker.writeEnd] {
            descriptor.close()
        }
        let process: SpawnedProcess
        switch spawned {
        case .success(let started):
            process = started
        case .failure(let error):
            for descriptor in [pipes.output.readEnd, pipes.toWorker.writeEnd, pipes.fromWorker.readEnd] { descriptor.close() }
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "cannot start \(executable): \(error)", underlying: error)
        }

        let channel = WorkerChannel(
            pluginIdentifier: plan.pluginIdentifier,
            limits: plan.load.limits,
            process: process,
            toWorker: pipes.toWorker.writeEnd,
            fromWorker: pipes.fromWorker.readEnd,
            diagnostics: pipes.output.readEnd,
            loop: loop,
            cancellationGracePeriod: plan.cancellationGracePeriod
        )
        do {
            try channel.activate()
        } catch {
            channel.stop(.cancelledLaunch)
            throw AppExtensionError(.spawnFailed, plugin: plan.pluginIdentifier, "cannot watch the worker: \(error)", underlying: error)
        }
        let ready = try await channel.handshake(Hello(load: plan.load), timeout: plan.launchTimeout)
        return (channel, ready)
    }

    /// A new session and a new pid namespace (with a user namespace when not root), so that the
    /// worker and everything it starts die together.
    static func isolatingOptions() -> SpawnRequest.Options {
        var options: SpawnRequest.Options = [.newSession, .dieWithParentThread, .newPIDNamespace]
        if geteuid() != 0 { options.insert(.newUserNamespace) }
        return options
    }

    /// Spawns with namespaces, falling back to a plain spawn where the system refuses them; the
    /// worker then reports its process-tree layer as unavailable, which fails the launch unless
    /// the host accepts best-effort confinement.
    private static func spawnIsolated(_ request: SpawnRequest) -> Result<SpawnedProcess, SystemError> {
        do {
            return .success(try spawnProcess(request))
        } catch {
            let refusals: Set<Errno> = [.operationNotPermitted, .invalidArgument, Errno(rawValue: ENOSPC), Errno(rawValue: EUSERS)]
            guard refusals.contains(error.errno) else { return .failure(error) }
            var plain = request
            plain.options.remove([.newPIDNamespace, .newUserNamespace])
            do {
                return .success(try spawnProcess(plain))
            } catch {
                return .failure(error)
            }
        }
    }

    private static func environment() -> [String] {
        let current = ProcessInfo.processInfo.environment
        var result = environmentAllowlist.compactMap { name in current[name].map { "\(name)=\($0)" } }
        // The worker reports crashes itself; the Swift runtime's backtracer would only slow them.
        result.append("SWIFT_BACKTRACE=enable=no")
        return result
    }
}
