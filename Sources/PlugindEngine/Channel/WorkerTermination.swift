package import PlugindSystem
package import PlugindWire

/// Everything known about a worker once it has been reaped: how it ended, what it reported
/// before dying, why the host stopped it (if it did) and the tail of its output. `package` for
/// the fuzz target that ends the protocol's state machine with one.
package struct WorkerTermination: Sendable {
    let exit: ProcessExit
    let fatalReport: FatalSignalReport?
    let stopCause: WorkerChannel.StopCause?
    let loadFailure: LoadFailure?
    package let output: String
    let wasInvalidated: Bool
    /// The worker's control group saw a process killed for its memory limit.
    var cgroupHitMemoryLimit = false
    /// The crashed thread's frames, named, when the worker died of a signal it reported.
    var backtrace: [AppExtensionError.StackFrame] = []
    /// Calls the sandbox refused the plugin over the worker's life, and the last one.
    var refusals = 0
    var lastRefusal: AppExtensionMessage.SandboxRefusal?
    /// How long the worker's threads had waited for a processor when the host stopped it for a
    /// timeout (read just before the kill): whether the machine's load explains the timeout.
    var processorWait: ProcessorWait?

    package init(
        exit: ProcessExit, fatalReport: FatalSignalReport?, stopCause: WorkerChannel.StopCause?, loadFailure: LoadFailure?,
        output: String, wasInvalidated: Bool
    ) {
        self.exit = exit
        self.fatalReport = fatalReport
        self.stopCause = stopCause
        self.loadFailure = loadFailure
        self.output = output
        self.wasInvalidated = wasInvalidated
    }

    /// The end as the public API reports it. A fatal-signal report wins over the exit status: a
    /// worker that is pid 1 of its namespace cannot die of a signal it raised itself, so it exits
    /// instead, after reporting the signal.
    package var publicTermination: AppExtensionError.Termination {
        if let report = fatalReport {
            return .signaled(signal: report.signal, name: signalName(report.signal))
        }
        switch exit.reason {
        case .exited(let status): return .exited(status: status)
        case .signaled(let signal, _): return .signaled(signal: signal, name: signalName(signal))
        }
    }

    /// The limit the plugin ran into, judged from the fatal-signal report and the CPU time the
    /// kernel accounted.
    func exceededLimit(_ limits: ResourceLimits) -> AppExtensionError.ExceededLimit? {
        if case .exceededLimit(let limit) = stopCause { return limit }
        if cgroupHitMemoryLimit, limits.addressSpaceBytes > 0 {
            return .init(kind: .memory, value: limits.addressSpaceBytes)
        }
        if limits.cpuSeconds > 0, reachedCPULimit(limits.cpuSeconds) {
            return .init(kind: .cpu, value: limits.cpuSeconds)
        }
        if let report = fatalReport, limits.addressSpaceBytes > 0,
            report.addressSpaceBytes >= limits.addressSpaceBytes - min(limits.addressSpaceBytes / 8, 64 << 20)
        {
            return .init(kind: .memory, value: limits.addressSpaceBytes)
        }
        if let report = fatalReport, limits.openFiles > 0, report.openDescriptors >= limits.openFiles {
            return .init(kind: .openFiles, value: limits.openFiles)
        }
        return nil
    }

    /// At the soft CPU limit the kernel sends SIGXCPU, which the worker reports. A plugin that
    /// blocks it is killed at the hard limit, a second later: SIGKILL nobody in the host sent,
    /// after at least 90 % of the limit in CPU time. Not 100 %: the kernel checks the limit
    /// against tick-sampled time, while the exit's usage is the precise run time, which reads a
    /// few percent lower for a worker sharing the CPU.
    private func reachedCPULimit(_ seconds: UInt64) -> Bool {
        if fatalReport?.signal == SignalNumber.cpuTimeLimit { return true }
        guard case .signaled(let signal, _) = exit.reason else { return false }
        return signal == SignalNumber.cpuTimeLimit || (signal == SignalNumber.kill && exit.cpuMicroseconds / 900_000 >= seconds)
    }

    /// Whether the worker was killed from outside: SIGKILL, which nothing inside the worker can
    /// send it (it is pid 1 of its own PID namespace, and the kernel drops SIGKILL sent to a
    /// namespace's init from within), that the host did not send (no stop cause) and that no
    /// limit explains (the memory group's and the hard CPU limit's SIGKILL are the plugin's
    /// doing). Left: another process of the owner or the administrator, the kernel's
    /// out-of-memory killer, or plugind's own processes failing — never the plugin's crash.
    func killedFromOutside(_ limits: ResourceLimits) -> Bool {
        guard fatalReport == nil, stopCause == nil, case .signaled(let signal, _) = exit.reason, signal == SignalNumber.kill else {
            return false
        }
        return exceededLimit(limits) == nil
    }

    /// The sentence for a worker killed from outside.
    private static let killedFromOutsideReason =
        "its worker was killed with SIGKILL from outside (by another process, the kernel's out-of-memory killer or a failure of plugind's own processes; nothing inside a worker can send it), which does not count as a crash of the plugin"

    /// The error for requests that were waiting when the worker ended.
    func error(plugin: String, limits: ResourceLimits) -> AppExtensionError {
        if let stopped = stopError(plugin: plugin) { return stopped }
        if let limit = exceededLimit(limits) {
            return make(.limitExceeded, plugin, "exceeded its \(limit); the worker ended with \(publicTermination)", limit: limit)
        }
        if killedFromOutside(limits) { return make(.workerKilled, plugin, Self.killedFromOutsideReason) }
        switch publicTermination {
        case .signaled(let signal, let name):
            return make(.workerCrashed, plugin, "crashed with \(name)\(faultDetail(signal))")
        case .exited(let status):
            return make(.workerExited, plugin, "its worker exited unexpectedly with status \(status)")
        }
    }

    /// The error for a launch that did not reach `ready`.
    func launchError(plugin: String, limits: ResourceLimits) -> AppExtensionError {
        if let failure = loadFailure {
            let code: AppExtensionError.Code
            switch failure.kind {
            case .incompatibleProtocol: code = .incompatibleProtocol
            case .invalidConfiguration: code = .configurationError
            case .confinementFailed: code = .confinementUnavailable
            case .bundleChanged: code = .bundleChanged
            case .libraryOpenFailed: code = .pluginLoadFailed
            case .symbolMissing: code = .symbolMissing
            case .abiMismatch: code = .abiMismatch
            case .initializationFailed:
                return AppExtensionError(
                    .pluginError,
                    plugin: plugin,
                    "init failed with code \(failure.pluginCode): \(failure.message)",
                    termination: publicTermination,
                    pluginErrorCode: failure.pluginCode,
                    standardErrorTail: output
                )
            }
            return make(code, plugin, failure.message)
        }
        if let stopped = stopError(plugin: plugin) { return stopped }
        if let limit = exceededLimit(limits) {
            return make(.limitExceeded, plugin, "exceeded its \(limit) while loading", limit: limit)
        }
        if killedFromOutside(limits) { return make(.workerKilled, plugin, Self.killedFromOutsideReason + " (while loading)") }
        switch publicTermination {
        case .signaled(let signal, let name):
            return make(.workerCrashed, plugin, "crashed with \(name)\(faultDetail(signal)) while loading")
        case .exited(let status):
            return make(.pluginLoadFailed, plugin, "its worker exited with status \(status) while loading the plugin")
        }
    }

    private func stopError(plugin: String) -> AppExtensionError? {
        switch stopCause {
        case nil, .exceededLimit:
            return nil
        case .protocolViolation(let detail):
            return make(.protocolViolation, plugin, "broke the wire protocol (\(detail)); its worker was stopped")
        case .closedChannel:
            return make(.protocolViolation, plugin, "closed its protocol channel; its worker was stopped")
        case .unreadFrames(let bytes, let grace):
            return make(
                .timedOut,
                plugin,
                "left \(ByteCount(UInt64(bytes))) the host sent unread for \(DurationText(grace)) (the host stops reading a worker past its budget of \(ByteCount(UInt64(WorkerChannel.heldFrameBudget))) until it catches up); its worker was stopped"
                    + busyMachine(grace)
            )
        case .unresponsiveConnection(_, let grace):
            return make(
                .timedOut,
                plugin,
                "answered neither a connection in time nor its close within \(DurationText(grace)); its worker was killed"
                    + busyMachine(grace)
            )
        case .unresponsive(_, let grace):
            return make(
                .timedOut,
                plugin,
                "did not stop within \(DurationText(grace)) after a request was abandoned; its worker was killed" + busyMachine(grace)
            )
        case .missedBlockDeadline(let deadline):
            return make(
                .timedOut, plugin, "did not finish a block within \(DurationText(deadline)); its worker was stopped" + busyMachine(deadline)
            )
        case .launchTimedOut(let timeout):
            return make(
                .timedOut, plugin, "did not finish loading within \(DurationText(timeout)); its worker was killed" + busyMachine(timeout))
        case .cancelledLaunch:
            return make(.cancelled, plugin, "the launch was cancelled")
        case .hostFailure(let detail):
            return make(.workerExited, plugin, "\(detail); its worker was stopped")
        case .disabledByOwner(let reason):
            return make(.disabledByOwner, plugin, "\(reason); its process was ended")
        }
    }

    /// "; the machine was busy: …" when the worker's waits for a processor explain a timeout of
    /// `window`; nothing otherwise.
    private func busyMachine(_ window: Duration) -> String {
        processorWait?.busyMachineSentence(timeout: window).map { "; \($0)" } ?? ""
    }

    private func faultDetail(_ signal: Int32) -> String {
        guard let report = fatalReport, report.signal == signal,
            SignalNumber.isFault(signal)
        else { return "" }
        return " at address 0x\(String(report.faultAddress, radix: 16))"
    }

    private func make(
        _ code: AppExtensionError.Code,
        _ plugin: String,
        _ reason: String,
        limit: AppExtensionError.ExceededLimit? = nil
    ) -> AppExtensionError {
        var error = AppExtensionError(
            code,
            plugin: plugin,
            reason,
            termination: publicTermination,
            exceededLimit: limit,
            standardErrorTail: output
        )
        if case .signaled = publicTermination { error.backtrace = backtrace }
        return error
    }
}
