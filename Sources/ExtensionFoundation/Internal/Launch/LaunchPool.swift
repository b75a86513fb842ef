import CPlugindShims
import Foundation
import PlugindSystem
import PlugindWire

/// The one owner of the launch pipeline for a worker executable: its launcher processes
/// (`plugind-worker --launcher`), the spares they fork, the reservations of spares, and the worker
/// primed for the next launch. One pool per (executable, `Forks`), started on first use, or a
/// private one for a single launch (`LaunchStrategy.spawn`, and the fallback when a shared pool
/// fails).
///
/// A launcher forks *spares* ahead of time and hands their sockets to this side; a launch sends
/// the worker's descriptors straight to a spare, so fork, exec, dynamic linking and even the
/// launcher are off its path. Without a spare, a launcher forks a worker on the spot. The
/// multi-threaded host never forks without exec itself; a launcher is single-threaded. Workers
/// and spares are children of the host (CLONE_PARENT): the host holds a pidfd for each from the
/// moment it learns of it, and reaps it whether it becomes a worker or dies unused.
///
/// With `Forks.one` each launcher forks exactly one child and is then let go: a forked child
/// shares its parent's address-space layout, stack canary and hash seed, so one launcher forking
/// every worker would show each plugin where everything of every other plugin's worker lives.
/// The next launcher is exec'd ahead, off the launch's path, from an execute-only copy of the
/// worker executable (`LauncherImages`).
///
/// Every system call runs outside `state`'s lock; the lock guards data only. The launchers and
/// the events the loop thread handles are in `LaunchPool+Launchers.swift`, the spares (asking for
/// them, adopting, readiness, reservations, priming) in `LaunchPool+Spares.swift`.
package final class LaunchPool: EventLoopHandler {
    /// How many children each launcher forks.
    enum Forks: Sendable {
        /// One: every worker has an address-space layout, stack canary and hash seed of its own,
        /// and more unique memory than with `many` (Documentation/Performance.md has both); each
        /// costs the exec of a launcher, ahead.
        case one
        /// Any number: the workers of one host share the launcher's layout, canary and hash seed
        /// and most of its memory, and launches in quick succession do not wait for launchers to
        /// start.
        case many
    }

    struct State: ~Copyable {
        var stopped = false
        /// Launches waiting for a launcher's answer, by request.
        var pending: [UInt32: CheckedContinuation<SpawnedProcess, any Error>] = [:]
        /// The launcher the next request goes to, exec'd ahead (nil while one is being made, or
        /// when making one failed: the next request makes one then).
        var idle: LauncherProcess?
        /// The serials of launchers with open sockets that said they are ready. One that ends
        /// before it did never read a request, so it forked no worker (`LauncherLost`).
        var ready: Set<UInt64> = []
        /// The idle launcher said it is ready (loaded and warmed up): until then its start-up
        /// competes with whatever the host does.
        var idleReady: Bool { idle.map { ready.contains($0.serial) } ?? false }
        /// How long its most recent launchers took from their spawn to saying they are ready,
        /// oldest first (at most `keptStartTimes`).
        var startTimes: [Duration] = []
        /// A job that makes the idle launcher is scheduled.
        var makingIdle = false
        /// The launcher each request in flight went to.
        var busy: [UInt32: LauncherProcess] = [:]
        /// Launchers that answered and were let go (their socket closed, which ends them), by
        /// pidfd, until they are reaped.
        var retired: [CInt: LauncherProcess] = [:]
        /// The serials of launchers whose socket is still open: each is let go exactly once,
        /// whichever comes first of its end, a request it could not be sent, its answer and the
        /// pool's stop (two of them could close one socket twice when a launcher is killed
        /// mid-send).
        var open: Set<UInt64> = []
        /// Never 0, which a launcher's readiness uses.
        var nextRequestID: UInt32 = 1

        /// Spares not handed out yet.
        var spares = SpareSlots()
        /// Spares taken out of `spares` for a moment, to receive what they send when ready.
        var sparesReceiving = 0
        var nextArrival: UInt64 = 0
        /// The request for a spare in flight, if any.
        var spareRequest: UInt32?
        /// The last spare could not be forked: no more are asked for until the next launch, so
        /// that a launcher that cannot fork is not asked again and again.
        var spareFailed = false
        /// Changes of the host's mounts seen, and how many had been seen when the spare in
        /// flight was asked for: one asked for before a change may copy the tree before it.
        var mountGeneration = 0
        var spareRequestGeneration = 0
        /// The worker confined ahead for the next launch of the plan launched last.
        var primed: PrimedWorker?
        /// The plan launched last, to be primed once the host is quiet (`primeWhenQuiet`).
        var primeWaiting: PrimeWaiting?
        var nextPrimeSerial: UInt64 = 0
        /// When the last launch asked for a worker to be primed after it.
        var lastLaunch: ContinuousClock.Instant?
        /// Callers of `settled()` waiting until nothing is on its way.
        var settleWaiters: [CheckedContinuation<Void, Never>] = []
        /// Callers of `awaitRequest` waiting until a launcher (by pid) has been sent a request.
        var requestWaiters: [(launcher: Int32, continuation: CheckedContinuation<Void, Never>)] = []

        /// A new request's id.
        mutating func takeRequestID() -> UInt32 {
            defer { nextRequestID = nextRequestID == .max ? 1 : nextRequestID + 1 }
            return nextRequestID
        }

        /// The launcher whose socket is `descriptor`, if it is not retired.
        func launcher(socket descriptor: CInt) -> LauncherProcess? {
            idle?.socket.rawValue == descriptor ? idle : busy.values.first { $0.socket.rawValue == descriptor }
        }

        /// The launcher whose pidfd is `descriptor`, if it is not retired.
        func launcher(processDescriptor descriptor: CInt) -> LauncherProcess? {
            idle?.process.processDescriptor.rawValue == descriptor
                ? idle : busy.values.first { $0.process.processDescriptor.rawValue == descriptor }
        }

        /// Nothing on its way: every spare there is ready, no launcher busy or unreaped, the
        /// idle launcher ready.
        var isSettled: Bool {
            stopped
                || (spareRequest == nil && (spares.isFull || spareFailed) && spares.allPrepared && sparesReceiving == 0
                    && busy.isEmpty && retired.isEmpty && !makingIdle && (idle == nil || idleReady) && primeWaiting == nil)
        }
    }

    let executable: String
    let forks: Forks
    /// The execute-only copy launchers are exec'd from, if one could be made.
    let image: FileDescriptor?
    /// The launchers' environment. Binding every symbol at exec spares each child the lazy
    /// binding of its own, which would otherwise run on the launch's path.
    let environment = WorkerLauncher.environment() + ["LD_BIND_NOW=1"]
    let loop: WorkerEventLoop
    /// The host's mount table, watched: spares copy the host's tree when they get ready (see
    /// `StartedWorker.hostTree`), so a change of mounts replaces them. Nil where it cannot be
    /// watched.
    let mountTable: FileDescriptor?
    let state = Locked(State())

    /// The pools `runtime` shares, by executable and how many children their launchers fork.
    static func runningPools(in runtime: PlugindRuntime = .current) -> [LaunchPool] {
        runtime.launchPools.withLock { Array($0.values) }
    }

    private static func key(_ executable: String, _ forks: Forks) -> String { "\(forks) \(executable)" }

    /// The running shared pool for `executable` in `runtime`, if there is one.
    static func running(executable: String, forks: Forks, in runtime: PlugindRuntime = .current) -> LaunchPool? {
        runtime.launchPools.withLock { $0[key(executable, forks)] }.flatMap { $0.isStopped ? nil : $0 }
    }

    /// The running shared pool for `executable` in `runtime`, started if there is none (or it
    /// stopped).
    static func shared(executable: String, forks: Forks, loop: WorkerEventLoop, in runtime: PlugindRuntime) async throws -> LaunchPool {
        let key = key(executable, forks)
        let pools = runtime.launchPools
        if let running = pools.withLock({ $0[key] }), !running.isStopped { return running }
        let started = try await startPrivate(executable: executable, forks: forks, loop: loop)
        return pools.withLock { pools in
            if let running = pools[key], !running.isStopped {
                started.stop()
                return running
            }
            pools[key] = started
            return started
        }
    }

    /// A pool of the caller's own, not shared: it forks no spares unless asked to (`replenish`),
    /// and the caller stops it.
    static func startPrivate(executable: String, forks: Forks = .one, loop: WorkerEventLoop) async throws -> LaunchPool {
        let mountTable = try? FileDescriptor.open("/proc/self/mountinfo", .readOnly)
        let started = LaunchPool(
            executable: executable, forks: forks, image: LauncherImages.image(of: executable), loop: loop, mountTable: mountTable)
        do {
            if let mountTable { try loop.register(mountTable, events: Epoll.priority, handler: started) }
            // The first launcher now, so that a launcher that cannot start fails here.
            let first: Result<LauncherProcess, SystemError> = try await loop.run {
                do throws(SystemError) { return .success(try started.startLauncher()) } catch { return .failure(error) }
            }
            let launcher = try first.get()
            if !started.state.withLock({ state in
                guard !state.stopped else { return false }
                state.idle = launcher
                return true
            }) {
                loop.execute { started.retire(launcher) }
            }
        } catch {
            started.stop()
            throw error
        }
        return started
    }

    private init(executable: String, forks: Forks, image: FileDescriptor?, loop: WorkerEventLoop, mountTable: FileDescriptor?) {
        self.executable = executable
        self.forks = forks
        self.image = image
        self.loop = loop
        self.mountTable = mountTable
    }

    var isStopped: Bool {
        state.withLock { $0.stopped }
    }

    // MARK: Starting a worker

    /// Starts a worker with `descriptors` (output, protocol in, protocol out, the shared memory or
    /// /dev/null, then the sealed files) and `options`: a spare when there is one (the one
    /// `reservation` holds first), else one forked on the spot. The worker is a child of this
    /// process. With `cgroup`, it joins that control group before it runs any code of its own.
    func start(
        descriptors: [FileDescriptor], options: SpawnRequest.Options, cgroup: WorkerCgroup? = nil, reservation: SpareReservation? = nil
    ) async throws -> StartedWorker {
        let raw = descriptors.map(\.rawValue)
        // Spares restricted themselves ahead, for launches with every layer on, and wait in a
        // network namespace of their own, for launches without the network.
        let spareUsable = !options.contains(.noAdvanceRestrictions) && options.contains(.newNetworkNamespace)
        // A spare reserved from another pool (one that has since stopped) is given back.
        if let reservation, reservation.pool !== self || !spareUsable { reservation.release() }
        var reserved = reservation?.take()
        while spareUsable, let spare = reserved.take() ?? state.withLock({ $0.stopped ? nil : $0.spares.takeForLaunch() }) {
            // A spare runs only plugind's code until it has its descriptors.
            if let cgroup, (try? cgroup.add(spare.process.processIdentifier)) == nil {
                spare.end(loop: loop)
                continue
            }
            if let started = spare.hand(raw, loop: loop) { return started }
        }
        let taken: Result<LauncherProcess, SystemError> = try await loop.run {
            do throws(SystemError) { return .success(try self.takeLauncher()) } catch { return .failure(error) }
        }
        let launcher = try taken.get()
        let process = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SpawnedProcess, any Error>) in
            // Known before it is sent: the answer is read on the loop thread.
            let id = state.withLock { state -> UInt32? in
                guard !state.stopped else { return nil }
                let id = state.takeRequestID()
                state.pending[id] = continuation
                return id
            }
            guard let id else {
                loop.execute { self.finished(with: launcher) }
                continuation.resume(throwing: SystemError("launcher", .noSuchProcess))
                return
            }
            if let error = ask(launcher, request: id, options: options, descriptors: raw, cgroupFiles: cgroup?.processFiles ?? []) {
                let unanswered = state.withLock { $0.pending.removeValue(forKey: id) }
                loop.execute { self.finished(with: launcher) }
                unanswered?.resume(throwing: error)
            }
        }
        return StartedWorker(process: process, hostTree: nil)
    }

    /// After a launch that `start` began, once the worker answered or failed: releases the
    /// spare's copy of the host's tree and asks for the next spare, so that the fork does not
    /// compete with the worker that just started.
    func launchFinished(_ started: StartedWorker, options: SpawnRequest.Options) {
        started.hostTree?.close()
        _ = loop.schedule(after: Self.replenishDelay) { [weak self] in self?.replenish(options: options) }
    }

    /// How long after a launch the next spare (and, with `Forks.one`, the next launcher) is made.
    /// Making a spare costs the kernel processor time (its network namespace above all); right
    /// after a launch that competes with the first request the host sends the new worker, and
    /// slows it on a machine with few processors; a few milliseconds later it does not.
    static let replenishDelay: Duration = .milliseconds(3)

    // MARK: Settling and stopping

    /// How long the recent launchers of every running pool of the current runtime took to get
    /// ready, from spawn to readiness: what a load on the machine slows down first (the fault
    /// tests pace their launcher kills by it).
    package static func recentLauncherStartTimes() -> [Duration] {
        runningPools().flatMap { pool in pool.state.withLock { $0.startTimes } }
    }

    static let keptStartTimes = 8

    /// Returns once every running pool of the current runtime holds its full count of spares and
    /// nothing is on its way (or it has stopped), so that the descriptors and children this
    /// process holds are stable. For tests and benchmarks.
    package static func settleAll() async {
        for pool in runningPools() { await pool.settled() }
    }

    /// The pid of the idle launcher of the shared pool of `executable`, if it has one: for tests
    /// that end a launcher mid-launch.
    package static func idleLauncherProcessIdentifier(executable: String) -> Int32? {
        running(executable: executable, forks: .one)?.state.withLock { $0.idle?.process.processIdentifier }
    }

    /// Returns once the launcher `pid` of the shared pool of `executable` holds a request it has
    /// not answered (at once if it does already, or if there is no such pool): for tests that end
    /// a launcher mid-launch.
    package static func awaitRequest(executable: String, toLauncher pid: Int32) async {
        guard let pool = running(executable: executable, forks: .one) else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = pool.state.withLock { state -> Bool in
                if state.stopped || state.busy.values.contains(where: { $0.process.processIdentifier == pid }) { return true }
                state.requestWaiters.append((pid, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Stops the shared pools of `executable`, for tests that started one of their own.
    package static func stopPools(executable: String) {
        for forks in [Forks.one, .many] { running(executable: executable, forks: forks)?.stop() }
    }

    func settled() async {
        // A change of mounts made before this call is handled first. Jobs run after the events of
        // their pass, but a job queued while the loop is in a pass runs after events collected
        // before the mount: so the mount table is asked on the loop thread as well. (Asking
        // consumes the change, which the loop would then not see: whoever asks handles it.)
        _ = try? await loop.run { if self.mountTableChanged() { self.mountsChanged() } }
        replenish(options: WorkerLauncher.isolatingOptions())
        // A settled pool has its idle launcher: one that ended while idle (killed from outside)
        // is otherwise made again only by the next launch, and a launch a primed worker served
        // takes none.
        makeIdleLauncherLater()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.isSettled { return true }
                state.settleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func resumeSettledWaiters() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.isSettled else { return [] }
            defer { state.settleWaiters.removeAll() }
            return state.settleWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The loop gave up: stop here and now, on its dying thread (no job runs there any more).
    func loopFailed(_ error: SystemError) {
        stop(onLoop: false)
    }

    /// Stops the pool: pending forks fail, its launchers, spares and primed worker are killed and
    /// reaped on the loop thread.
    func stop() {
        stop(onLoop: true)
    }

    private struct Stopped: ~Copyable {
        var pending: [CheckedContinuation<SpawnedProcess, any Error>]
        var requestWaiters: [CheckedContinuation<Void, Never>]
        var spares: SpareSlots
        /// Launchers whose sockets are open, and those let go already (only to be reaped).
        var launchers: [LauncherProcess]
        var retired: [LauncherProcess]
        var primed: PrimedWorker?
        /// The sealed copies of a plan that was to be primed.
        var primeWaiting: [FileDescriptor]
    }

    private func stop(onLoop: Bool) {
        let taken = state.withLock { state -> Stopped? in
            guard !state.stopped else { return nil }
            state.stopped = true
            // A launcher that forks many children is idle and busy at once.
            var launchers = state.idle.map { [$0] } ?? []
            for launcher in state.busy.values where !launchers.contains(launcher) {
                launchers.append(launcher)
            }
            var spares = SpareSlots()
            swap(&spares, &state.spares)
            let stopped = Stopped(
                pending: Array(state.pending.values), requestWaiters: state.requestWaiters.map(\.continuation), spares: spares,
                launchers: launchers, retired: Array(state.retired.values),
                primed: state.primed.take(), primeWaiting: state.primeWaiting.take()?.sealed ?? [])
            state.pending.removeAll()
            state.requestWaiters.removeAll()
            state.idle = nil
            state.busy.removeAll()
            state.retired.removeAll()
            state.ready.removeAll()
            for launcher in launchers { state.open.remove(launcher.serial) }
            return stopped
        }
        guard var stopped = taken else { return }
        resumeSettledWaiters()
        for continuation in stopped.pending { continuation.resume(throwing: SystemError("launcher", .noSuchProcess)) }
        for waiter in stopped.requestWaiters { waiter.resume() }
        let primed = stopped.primed
        primed?.closeHostSide()
        for descriptor in stopped.primeWaiting { descriptor.close() }
        let (launchers, retired) = (stopped.launchers, stopped.retired)
        // Held in a box the loop's job can take them from.
        var spares = SpareSlots()
        swap(&spares, &stopped.spares)
        let unused = Locked(spares)
        let (loop, mountTable) = (loop, mountTable)
        let end: @Sendable () -> Void = {
            for launcher in launchers {
                loop.deregister(launcher.socket)
                launcher.socket.close()
            }
            if let mountTable {
                loop.deregister(mountTable)
                mountTable.close()
            }
            unused.withLock { $0.removeAll { $0.end(loop: loop) } }
            if let primed {
                // Watched while it waited (its host side is closed above).
                loop.deregister(primed.worker.process.processDescriptor)
                primed.worker.end(loop: loop)
            }
            for launcher in launchers + retired {
                loop.deregister(launcher.process.processDescriptor)
                launcher.process.processDescriptor.killAndReap()
            }
        }
        if onLoop { loop.execute(end) } else { end() }
    }
}
