import FoundationEssentials
import Glibc
import PlugindEngine
import PlugindSystem

/// The owner's plugin browser, `plugind browse`, presented by a host on its own terminal: the
/// Linux counterpart of presenting `EXAppExtensionBrowserViewController` when a monitor's
/// `state.unapprovedCount > 0`. The owner reviews, approves and disables plugins there; the
/// host's monitors see each decision as it is made. Linux addition.
public enum AppExtensionBrowser {
    /// Why the browser could not be shown, or how it ended badly.
    public enum PresentationError: Error, Sendable, CustomStringConvertible {
        /// Standard input or output is not a terminal (a service, a pipe, a test): there is
        /// nothing to draw on. `command` is what the owner can run in a terminal instead.
        case noTerminal(command: String)
        /// The `plugind` executable was not found; the message names where it was looked for.
        case toolNotFound(String)
        /// It was found but could not be started.
        case cannotStart(String)
        /// It started but did not end normally (an exit status other than 0, or a signal).
        case ended(String)

        public var description: String {
            switch self {
            case .noTerminal(let command):
                "cannot present the plugin browser: standard input and output are not a terminal; the owner can run '\(command)' in one"
            case .toolNotFound(let message): "cannot present the plugin browser: \(message)"
            case .cannotStart(let message): "cannot present the plugin browser: \(message)"
            case .ended(let message): "the plugin browser \(message)"
            }
        }
    }

    /// The command line that browses `points` of `host`, for showing to an owner.
    public static func command(for points: [AppExtensionPoint], host: AppExtensionHost = .current) -> String {
        (["plugind", "browse"] + points.flatMap { ["--point", $0.identifier(in: host)] }).joined(separator: " ")
    }

    /// Why the browser cannot be presented here, or nil when it can: a terminal on standard
    /// input and output, and a `plugind` executable (`$PLUGIND_TOOL`, beside the host's
    /// executable, or on `PATH`).
    public static func unavailability(for points: [AppExtensionPoint], host: AppExtensionHost = .current) -> PresentationError? {
        guard FileDescriptor.standardInput.isTerminal, FileDescriptor.standardOutput.isTerminal else {
            return .noTerminal(command: command(for: points, host: host))
        }
        do {
            _ = try ExecutableLocator.tool.locate()
            return nil
        } catch {
            return .toolNotFound(error.message)
        }
    }

    /// Runs `plugind browse --point …` for `points` on this process's terminal, configured like
    /// `host`, and returns when the owner quits it. Cancelling the calling task ends the browser
    /// (SIGTERM), which gives the terminal back before it exits.
    public static func present(for points: [AppExtensionPoint], host: AppExtensionHost = .current) async throws(PresentationError) {
        if let reason = unavailability(for: points, host: host) { throw reason }
        let executable: String
        do {
            executable = try ExecutableLocator.tool.locate()
        } catch {
            throw .toolNotFound(error.message)
        }
        var environment = ProcessInfo.processInfo.environment
        environment.merge(host.commandLineEnvironment) { _, hosts in hosts }
        // Same process group as the host, so that the browser is the terminal's foreground and
        // may read keys and set modes; the terminal is the only thing it shares with the host.
        let request = SpawnRequest(
            executablePath: executable,
            arguments: [executable, "browse"] + points.flatMap { ["--point", $0.identifier(in: host)] },
            environment: environment.map { "\($0.key)=\($0.value)" },
            descriptors: [.standardInput, .standardOutput, .standardError],
            options: []
        )
        let process: SpawnedProcess
        do {
            process = try spawnProcess(request)
        } catch {
            throw .cannotStart("\(executable): \(error)")
        }
        // Signalled and closed under one lock, so a cancellation never signals a reused number.
        let descriptor = Locked<FileDescriptor?>(process.processDescriptor)
        let exit = await withTaskCancellationHandler {
            await waitForExit(of: descriptor)
        } onCancel: {
            descriptor.withLock { try? $0?.sendSignal(SignalNumber.terminate) }
        }
        switch exit {
        case .exited(status: 0): return
        case .exited(let status): throw .ended("exited with status \(status)")
        case .signaled(let signal, _): throw .ended("was ended by \(signalName(signal))")
        case nil: throw .ended("could not be waited for")
        }
    }

    /// Blocks a thread of its own (not the cooperative pool) until the browser has exited.
    private static func waitForExit(of descriptor: Locked<FileDescriptor?>) async -> ProcessExit.Reason? {
        await withCheckedContinuation { continuation in
            let wait = {
                let exit = try? descriptor.withLock { $0 }?.waitForProcessExit()
                descriptor.withLock { descriptor in
                    descriptor?.close()
                    descriptor = nil
                }
                continuation.resume(returning: exit?.reason)
            }
            do {
                pthread_detach(try SystemThread.start(stackBytes: 256 << 10, wait))
            } catch {
                // No thread to spare (the limit on threads): the pool's own waits instead.
                wait()
            }
        }
    }
}

extension AppExtensionPoint.Monitor {
    /// Presents the plugin browser for this monitor's extension points when some of their
    /// plugins wait for the owner's approval (`state.unapprovedCount > 0`), and returns whether
    /// it did; when it returns, `identities` and `state` already reflect what the owner decided.
    /// Linux addition.
    ///
    /// - Throws: `AppExtensionBrowser.PresentationError`, e.g. `noTerminal` with the command the
    ///   owner can run instead when the host has no terminal.
    @discardableResult
    public func presentBrowserIfNeeded() async throws(AppExtensionBrowser.PresentationError) -> Bool {
        guard state.unapprovedCount > 0 else { return false }
        try await AppExtensionBrowser.present(for: appExtensionPoints, host: host)
        // The owner's decisions reach the monitor through inotify anyway; scanning now means the
        // host's next look at `identities` sees them.
        try? await engine.refreshNow()
        return true
    }
}
