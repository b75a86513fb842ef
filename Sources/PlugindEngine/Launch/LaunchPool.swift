import CPlugindShims
import FoundationEssentials
import Glibc
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
/// This class is the shell around `LaunchPoolState`, the state machine that decides: how each
/// launcher, spare and primed worker is doing, what is asked, when the pool is settled. The shell
/// feeds it what happened and carries out the effects it returns (spawns, sends, kills, reaps,
/// resumes) after releasing `state`'s lock, which guards data only: no system call runs under
/// it. The launchers and the events the loop thread handles are in `LaunchPool+Launchers.swift`,
/// the spares (asking for them, adopting, readiness, reservations, priming) in
/// `LaunchPool+Spares.swift`.
package final class LaunchPool: EventLoopHandler {
    /// How many children each launcher forks.
    typealias Forks = LaunchPoolState.Forks
    typealias Effect = LaunchPoolState.Effect

    /// The pool's bookkeeping (`machine`, which decides) beside the resources its effects name by
    /// id: the launchers' sockets and pidfds, the spares, the primed worker, the plan waiting to
    /// be primed, and the continuations of launches and waiters. Each resource leaves its table in
    /// the one effect that ends it or the input that hands it out.
    struct State: ~Copyable {
        var machine: LaunchPoolState
        /// Every launcher the machine knows, until it is reaped.
        var launchers: [UInt64: LauncherProcess] = [:]
        /// The spares in the machine's slots (and one on its way to `endSpare` for a moment).
        var spares = SpareSlots()
        /// Launches waiting for a launcher's answer, by request.
        var launches: [UInt32: CheckedContinuation<SpawnedProcess, any Error>] = [:]
        /// Primed workers by id: the machine's `primed`, and one on its way to `endPrimed`.
        var primed: [UInt64: PrimedWorker] = [:]
        /// Plans waiting to be primed, by serial: the machine's, and one that gave way, on its way
        /// to `dropPrimeWaiting`.
        var primeWaiting: [UInt64: PrimeWaiting] = [:]
        /// Callers of `settled()` waiting until nothing is on its way.
        var settleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Callers of `awaitRequest` waiting until a launcher has been sent a request.
        var requestWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]

        init(forks: Forks, forOneLaunch: Bool) {
            machine = LaunchPoolState(forks: forks, forOneLaunch: forOneLaunch)
        }

        /// The launcher whose socket is `descriptor`, if events on it are handled now (a let-go
        /// launcher's socket number is reused by the next one made).
        func launcher(socket descriptor: CInt) -> LauncherProcess? {
            launchers.values.first { $0.socket.rawValue == descriptor && machine.isWatched($0.serial) }
        }

        /// The launcher whose pidfd is `descriptor` (open until it is reaped).
        func launcher(processDescriptor descriptor: CInt) -> LauncherProcess? {
            launchers.values.first { $0.process.processDescriptor.rawValue == descriptor }
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
    let state: Locked<State>

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
        let started = try await startPrivate(executable: executable, forks: forks, loop: loop, forOneLaunch: false)
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
    /// and the caller stops it. `forOneLaunch`: the launcher its launch takes is not replaced.
    static func startPrivate(
        executable: String, forks: Forks = .one, loop: WorkerEventLoop, forOneLaunch: Bool = true
    ) async throws -> LaunchPool {
        let mountTable = try? FileDescriptor.open("/proc/self/mountinfo", .readOnly)
        let started = LaunchPool(
            executable: executable, forks: forks, forOneLaunch: forOneLaunch, image: LauncherImages.image(of: executable), loop: loop,
            mountTable: mountTable)
        do {
            if let mountTable { try loop.register(mountTable, events: Epoll.priority, handler: started) }
            // The first launcher now, so that a launcher that cannot start fails here.
            let first: Result<LauncherProcess, SystemError> = try await loop.run {
                do throws(SystemError) { return .success(try started.startLauncher()) } catch { return .failure(error) }
            }
            let launcher = try first.get()
            let effects = started.state.withLock { $0.machine.offerIdle(launcher.serial).effects }
            // Let go on the loop thread, which watches its socket.
            if !effects.isEmpty { loop.execute { started.perform(effects) } }
        } catch {
            started.stop()
            throw error
        }
        return started
    }

    private init(
        executable: String, forks: Forks, forOneLaunch: Bool, image: FileDescriptor?, loop: WorkerEventLoop, mountTable: FileDescriptor?
    ) {
        self.executable = executable
        self.forks = forks
        self.image = image
        self.loop = loop
        self.mountTable = mountTable
        state = Locked(State(forks: forks, forOneLaunch: forOneLaunch))
    }

    var isStopped: Bool {
        state.withLock { $0.machine.isStopped }
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
        while spareUsable, let spare = reserved.take() ?? takeSpareForLaunch() {
            // A spare runs only plugind's code until it has its descriptors.
            if let cgroup, (try? cgroup.add(spare.process.processIdentifier)) == nil {
                spare.end(loop: loop)
                continue
            }
            if let started = spare.hand(raw, loop: loop) {
                LaunchTrace.note("worker started from a spare, pid \(started.process.processIdentifier)")
                return started
            }
        }
        let taken: Result<LauncherProcess, SystemError> = try await loop.run {
            do throws(SystemError) { return .success(try self.takeLauncher()) } catch { return .failure(error) }
        }
        let launcher = try taken.get()
        let process = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SpawnedProcess, any Error>) in
            // Known before it is sent: the answer is read on the loop thread.
            let id = state.withLock { state -> UInt32? in
                guard let id = state.machine.registerLaunch() else { return nil }
                state.launches[id] = continuation
                return id
            }
            guard let id else {
                loop.execute { self.finished(with: launcher) }
                continuation.resume(throwing: SystemError("launcher", .noSuchProcess))
                return
            }
            if let error = ask(launcher, request: id, options: options, descriptors: raw, cgroupFiles: cgroup?.processFiles ?? []) {
                let effects = state.withLock { $0.machine.requestNotSent(id) }
                loop.execute { self.finished(with: launcher) }
                perform(effects, notSent: error)
            }
        }
        LaunchTrace.note("worker forked by a launcher, pid \(process.processIdentifier)")
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
        runningPools().flatMap { pool in pool.state.withLock { $0.machine.startTimes } }
    }

    /// Returns once every running pool of the current runtime holds its full count of spares and
    /// nothing is on its way (or it has stopped), so that the descriptors and children this
    /// process holds are stable. For tests and benchmarks.
    package static func settleAll() async {
        for pool in runningPools() { await pool.settled() }
    }

    /// The pid of the idle launcher of the shared pool of `executable`, if it has one: for tests
    /// that end a launcher mid-launch.
    package static func idleLauncherProcessIdentifier(executable: String) -> Int32? {
        running(executable: executable, forks: .one)?.state.withLock { state in
            state.machine.idle.flatMap { state.launchers[$0]?.process.processIdentifier }
        }
    }

    /// Returns once the launcher `pid` of the shared pool of `executable` holds a request it has
    /// not answered (at once if it does already, or if there is no such pool): for tests that end
    /// a launcher mid-launch.
    package static func awaitRequest(executable: String, toLauncher pid: Int32) async {
        guard let pool = running(executable: executable, forks: .one) else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = pool.state.withLock { state -> Bool in
                guard let waiter = state.machine.awaitRequest(toLauncher: pid) else { return true }
                state.requestWaiters[waiter] = continuation
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
        // Asks for the spares the pool lacks and for its idle launcher, and waits, at once.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let effects = state.withLock { state in
                let (waiter, effects) = state.machine.settle()
                state.settleWaiters[waiter] = continuation
                return effects
            }
            perform(effects, spareOptions: WorkerLauncher.isolatingOptions())
        }
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

    private func stop(onLoop: Bool) {
        let effects = state.withLock { $0.machine.stop() }
        // Launches and waiters hear of it now; processes end on the loop thread, which watches
        // them.
        let now = effects.filter(\.isImmediate)
        perform(now)
        let later = effects.filter { !$0.isImmediate }
        if onLoop { loop.execute { self.perform(later) } } else { perform(later) }
    }

    // MARK: Effects

    /// Carries out `effects`, in order, outside the lock, on the calling thread. `spareOptions`
    /// are how a spare asked for is forked; `notSent`, the error of a request that could not be
    /// sent; `spareSocket`, the socket a launcher passed with its answer, adopted by `adoptSpare`
    /// (and closed otherwise).
    func perform(
        _ effects: [Effect], spareOptions: SpawnRequest.Options = WorkerLauncher.isolatingOptions(), notSent: (any Error)? = nil,
        spareSocket: FileDescriptor? = nil
    ) {
        var spareSocket = spareSocket
        defer { spareSocket?.close() }
        guard !effects.isEmpty else { return }
        let launchers = state.withLock { $0.launchers }
        for effect in effects {
            switch effect {
            case .scheduleIdleLauncher:
                _ = loop.schedule(after: Self.replenishDelay) { [weak self] in self?.makeIdleLauncher() }
            case .closeLauncherSocket(let id):
                guard let launcher = launchers[id] else { continue }
                loop.deregister(launcher.socket)
                launcher.socket.close()
            case .reapLauncher(let id):
                guard let launcher = state.withLock({ $0.launchers.removeValue(forKey: id) }) else { continue }
                loop.deregister(launcher.process.processDescriptor)
                launcher.process.processDescriptor.killAndReap()
            case .reapLostChild(let id, let request):
                if let launcher = launchers[id] { reapLostChild(of: launcher, request: request) }
            case .completeLaunch(let request, let outcome):
                guard let continuation = state.withLock({ $0.launches.removeValue(forKey: request) }) else { continue }
                complete(continuation, request: request, outcome, launchers: launchers, notSent: notSent)
            case .resumeRequestWaiters(let ids):
                let waiters = state.withLock { state in ids.compactMap { state.requestWaiters.removeValue(forKey: $0) } }
                for waiter in waiters { waiter.resume() }
            case .resumeSettleWaiters(let ids):
                let waiters = state.withLock { state in ids.compactMap { state.settleWaiters.removeValue(forKey: $0) } }
                for waiter in waiters { waiter.resume() }
            case .askForSpare(let request):
                // Whatever the launch that asks: a spare serves launches with every layer on and
                // without the network.
                let options = spareOptions.union(.newNetworkNamespace).subtracting(.noAdvanceRestrictions)
                loop.execute { self.askForSpare(request, options: options) }
            case .adoptSpare(let pid):
                adoptSpare(pid: pid, socket: spareSocket.take())
            case .discardSpare(let pid):
                spareSocket.take()?.close()
                if let processDescriptor = try? FileDescriptor.processDescriptor(for: pid) {
                    StartedWorker(process: SpawnedProcess(processIdentifier: pid, processDescriptor: processDescriptor), hostTree: nil)
                        .end(loop: loop)
                }
            case .endSpare(let id):
                state.withLock { $0.spares.take(id) }?.end(loop: loop)
            case .checkQuietMoment(let serial, let instant):
                loop.schedule(at: instant) { [weak self] in self?.checkQuietMoment(serial) }
            case .dropPrimeWaiting(let serial):
                let dropped = state.withLock { $0.primeWaiting.removeValue(forKey: serial) }
                for descriptor in dropped?.sealed ?? [] { descriptor.close() }
            case .prime(let serial):
                let due = state.withLock { $0.primeWaiting.removeValue(forKey: serial) }
                if let due { prime(due.plan, sealed: due.sealed) } else { perform(state.withLock { $0.machine.primingFailed() }) }
            case .endPrimed(let id):
                let ended = state.withLock { $0.primed.removeValue(forKey: id) }
                if let ended { end(ended) }
            case .closeMountTable:
                if let mountTable {
                    loop.deregister(mountTable)
                    mountTable.close()
                }
            }
        }
    }

    /// Completes launch `request` with `outcome`.
    private func complete(
        _ continuation: CheckedContinuation<SpawnedProcess, any Error>, request: UInt32, _ outcome: LaunchPoolState.LaunchOutcome,
        launchers: [UInt64: LauncherProcess], notSent: (any Error)?
    ) {
        switch outcome {
        case .forked(let pid):
            // The pid cannot be reused before this process, its parent, reaps it.
            do {
                let processDescriptor = try FileDescriptor.processDescriptor(for: pid)
                continuation.resume(returning: SpawnedProcess(processIdentifier: pid, processDescriptor: processDescriptor))
            } catch {
                continuation.resume(throwing: error)
            }
        case .forkFailed(let errno):
            continuation.resume(throwing: SystemError("fork (pre-forked launcher)", Errno(rawValue: errno)))
        case .launcherEnded(let id, let wasReady, let killed):
            // Whether the launcher had forked its worker (so whether the launch may try another
            // launcher) is in the fork record, final now that the launcher has ended.
            if let launcher = launchers[id] {
                continuation.resume(throwing: LauncherLost.ended(launcher, request: request, wasReady: wasReady, killed: killed))
            } else {
                continuation.resume(throwing: LauncherLost(launcher: 0, forkedWorker: nil, what: "ended before it answered"))
            }
        case .poolStopped:
            continuation.resume(throwing: SystemError("launcher", .noSuchProcess))
        case .notSent:
            continuation.resume(throwing: notSent ?? SystemError("launcher", .noSuchProcess))
        }
    }
}

extension LaunchPoolState.Effect {
    /// Carried out at once when the pool stops (what waits hears of it); the rest ends processes,
    /// on the loop thread.
    fileprivate var isImmediate: Bool {
        switch self {
        case .completeLaunch, .resumeRequestWaiters, .resumeSettleWaiters, .dropPrimeWaiting: true
        default: false
        }
    }
}
