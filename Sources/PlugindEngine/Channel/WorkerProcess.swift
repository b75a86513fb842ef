import CPlugindShims
import FoundationEssentials
import Glibc
import PlugindSystem

/// A worker's process as the host holds it: its pid and pidfd, the control group it may run in,
/// and the system calls on them — the signal, the reap, the group's CPU time and its removal.
/// `WorkerChannel` decides when; this carries it out.
final class WorkerProcess: Sendable {
    let identifier: Int32
    /// Closed on the loop thread once the process is reaped (`close`), never before.
    let descriptor: FileDescriptor
    /// The worker's control group, for a plugin that may start processes (where the host can make
    /// one): its CPU time is watched, and it is removed once the worker is gone.
    let cgroup: WorkerCgroup?
    private let loop: WorkerEventLoop

    init(_ process: SpawnedProcess, cgroup: WorkerCgroup?, loop: WorkerEventLoop) {
        identifier = process.processIdentifier
        descriptor = process.processDescriptor
        self.cgroup = cgroup
        self.loop = loop
    }

    /// Sends SIGKILL from the loop thread, which is also where the pidfd is closed, so that a late
    /// kill can never reach a recycled descriptor; nothing when `isReaped` says it is gone.
    func kill(unless isReaped: @escaping @Sendable () -> Bool) {
        let signal: @Sendable () -> Void = { [descriptor] in
            guard !isReaped() else { return }
            try? descriptor.sendSignal(SignalNumber.kill)
        }
        if loop.isOnLoopThread { signal() } else { loop.execute(signal) }
    }

    /// How it ended, if it has (never waiting); an unreadable status counts as exit status -1.
    func reap() -> ProcessExit? {
        do {
            return try descriptor.waitForProcessExit(noHang: true)
        } catch {
            return ProcessExit(reason: .exited(status: -1))
        }
    }

    /// Asks the worker where request `id` is: its stack signal, queued with the request.
    func requestStack(of id: UInt64) {
        _ = plugind_shim_request_stack(descriptor.rawValue, id)
    }

    /// Kills it and waits until it is reaped: when the loop that would have reported its exit
    /// gave up.
    func killAndWait() -> ProcessExit {
        try? descriptor.sendSignal(SignalNumber.kill)
        return (try? descriptor.waitForProcessExit()) ?? ProcessExit(reason: .signaled(signal: SignalNumber.kill, coreDumped: false))
    }

    /// Whether the control group's memory limit was hit (read from the kernel's file).
    var hitMemoryLimit: Bool { cgroup?.hitMemoryLimit ?? false }

    /// Checks the control group's CPU time, the worker's and its children's together, and calls
    /// `exceeded` at the limit. The next check comes when the limit could be reached at the
    /// earliest, with every processor busy. Stops once `isReaped`.
    func watchCPUTime(limitSeconds: UInt64, isReaped: @escaping @Sendable () -> Bool, exceeded: @escaping @Sendable () -> Void) {
        guard let cgroup, limitSeconds > 0, !isReaped() else { return }
        let limit = limitSeconds * 1_000_000_000
        let used = cgroup.cpuNanoseconds ?? 0
        if used >= limit {
            exceeded()
            return
        }
        let processors = UInt64(max(ProcessInfo.processInfo.activeProcessorCount, 1))
        let wait = max((limit - used) / processors, 50_000_000)
        loop.schedule(after: .nanoseconds(Int64(clamping: wait))) { [weak self] in
            self?.watchCPUTime(limitSeconds: limitSeconds, isReaped: isReaped, exceeded: exceeded)
        }
    }

    /// Once reaped: the pidfd leaves the loop and is closed, and the control group is removed once
    /// the last of the worker's processes (dying with it, as pid 1 of their namespace) has left
    /// it: retried on the loop, never waited for. Loop thread.
    func close() {
        loop.deregister(descriptor)
        descriptor.close()
        if let cgroup { Self.retryRemoval(cgroup, attempts: 100, loop: loop) }
    }

    private static func retryRemoval(_ cgroup: WorkerCgroup, attempts: Int, loop: WorkerEventLoop) {
        guard !cgroup.remove(), attempts > 1 else { return }
        loop.schedule(after: .milliseconds(20)) { retryRemoval(cgroup, attempts: attempts - 1, loop: loop) }
    }
}
