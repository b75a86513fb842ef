import CPlugindShims
import PlugindSystem
import PlugindWire
import Synchronization

/// The pool's spares: asking launchers for them, adopting them, their readiness, reservations,
/// and the worker primed on one for the next launch.
extension LaunchPool {
    /// Asks a launcher for a spare unless enough are ready or one is on its way. Call it after a
    /// launch, so that the fork does not compete with the worker that just started; each spare
    /// that arrives asks for the next until the slots are full. After a spare could not be
    /// forked, only this call (one per launch) tries again.
    func replenish(options: SpawnRequest.Options) {
        perform(state.withLock { $0.machine.replenish(retryingAfterFailure: true) }, spareOptions: options)
    }

    /// Sends request `id` for a spare to a launcher, on the loop thread; when that fails, no more
    /// spares are asked for until the next launch.
    func askForSpare(_ id: UInt32, options: SpawnRequest.Options) {
        if let launcher = try? takeLauncher() {
            let recorded = state.withLock { $0.machine.askingForSpare(launcher.serial, request: id) }
            if recorded && ask(launcher, request: id, options: options, descriptors: [], cgroupFiles: [], recorded: true) == nil {
                return
            }
            if recorded { perform(state.withLock { $0.machine.requestNotSent(id) }) }
            finished(with: launcher)
        }
        perform(state.withLock { $0.machine.spareRequestFailed(id) })
    }

    /// Keeps the spare `pid` a launcher forked, with the socket it passed (`Effect.adoptSpare`).
    func adoptSpare(pid: Int32, socket spareSocket: FileDescriptor?) {
        guard let process = watchedSpareProcess(pid: pid, socket: spareSocket), let spareSocket else {
            perform(state.withLock { $0.machine.spareNotAdopted() })
            return
        }
        // Watched until the spare says it is ready; a spare that cannot be watched is used anyway.
        let watched = (try? loop.register(spareSocket, events: Epoll.readable, handler: self)) != nil
        var effects: [Effect] = []
        let refused = state.withLock { state -> Spare? in
            let (id, adopted) = state.machine.spareAdopted(watched: watched)
            effects = adopted
            return state.spares.insert(
                Spare(process: process, socket: spareSocket, readiness: watched ? .preparing : .prepared(hostTree: nil), id: id))
        }
        refused?.end(loop: loop)
        perform(effects)
    }

    /// The spare `pid`, its pidfd watched (so that a spare that dies unused is reaped) and its
    /// socket never blocking (the ready byte is read at a launch that may come before it); nil,
    /// and what was made of it closed, when any of that fails or the launcher reported a failure.
    private func watchedSpareProcess(pid: Int32, socket spareSocket: FileDescriptor?) -> SpawnedProcess? {
        guard pid > 0, let spareSocket else {
            spareSocket?.close()
            return nil
        }
        guard (try? spareSocket.setNonBlocking()) != nil, let processDescriptor = try? FileDescriptor.processDescriptor(for: pid) else {
            spareSocket.close()
            return nil
        }
        guard (try? loop.register(processDescriptor, events: Epoll.readable, handler: self)) != nil else {
            spareSocket.close()
            processDescriptor.killAndReap()
            return nil
        }
        return SpawnedProcess(processIdentifier: pid, processDescriptor: processDescriptor)
    }

    /// The spare whose socket is `descriptor` said it has finished getting ready (or died, which
    /// its pidfd reports). It is taken out of its slot while what it sent is received, so that no
    /// launch hands it out meanwhile. False when `descriptor` is no preparing spare's socket.
    func sparePrepared(socket descriptor: Int32) -> Bool {
        let taken = state.withLock { state -> Spare? in
            guard let id = state.spares.id(where: { !$0.isPrepared && $0.socket.rawValue == descriptor }),
                state.machine.spareSocketReadable(id)
            else { return nil }
            return state.spares.take(id)
        }
        guard var spare = taken else { return false }
        loop.deregister(spare.socket)
        spare.readiness = .prepared(hostTree: Spare.receiveReadiness(spare.socket))
        let id = spare.id
        var effects: [Effect] = []
        var received: Spare? = spare
        let refused = state.withLock { state -> Spare? in
            effects = state.machine.spareReadinessRead(id)
            guard let spare = received.take() else { return nil }
            return state.spares.insert(spare)
        }
        refused?.end(loop: loop)
        perform(effects)
        return true
    }

    /// A spare's pidfd became readable: it died before it was handed out, and is reaped.
    func spareExited(processDescriptor descriptor: Int32) {
        let effects = state.withLock { state -> [Effect] in
            guard let id = state.spares.id(where: { $0.process.processDescriptor.rawValue == descriptor }) else { return [] }
            return state.machine.spareDied(id) ?? []
        }
        perform(effects)
    }

    /// The spare for a launch (the first ready, else the oldest), taken out of the pool.
    func takeSpareForLaunch() -> Spare? {
        var effects: [Effect] = []
        let spare = state.withLock { state -> Spare? in
            let (id, settled) = state.machine.spareForLaunch()
            effects = settled
            return id.flatMap { state.spares.take($0) }
        }
        perform(effects)
        return spare
    }

    /// Starts a worker on a ready spare, without waiting: nil when there is none (or it failed).
    private func startOnReadySpare(descriptors: [FileDescriptor]) -> StartedWorker? {
        var effects: [Effect] = []
        let spare = state.withLock { state -> Spare? in
            guard let (id, next) = state.machine.takeSpareForPriming() else { return nil }
            effects = next
            return state.spares.take(id)
        }
        let started = spare?.hand(descriptors.map(\.rawValue), loop: loop)
        perform(effects)
        return started
    }

    // MARK: Reservations

    /// Takes a ready spare for a launch that will hand it its work in a moment, and wakes it now
    /// (`SpareMessage.wake`). Nil when no spare is ready. Until `start` takes it (or the
    /// reservation is released) nothing watches it: a spare that dies meanwhile is found out
    /// when its work is sent.
    func reserveSpare() -> SpareReservation? {
        guard let spare = state.withLock({ state in state.machine.reserveSpare().flatMap { state.spares.take($0) } }) else {
            return nil
        }
        loop.deregister(spare.process.processDescriptor)
        spare.socket.sendWithoutWaiting(SpareMessage.wake)
        return SpareReservation(spare, pool: self)
    }

    /// Gives back a spare that was reserved and not used.
    fileprivate func putBack(_ spare: consuming Spare) {
        // Watched again, so that its death is noticed and reaped.
        let watched = (try? loop.register(spare.process.processDescriptor, events: Epoll.readable, handler: self)) != nil
        let id = spare.id
        var effects: [Effect] = []
        var kept: Spare? = spare
        let refused = state.withLock { state -> Spare? in
            effects = state.machine.putBack(id, watched: watched)
            guard let spare = kept.take() else { return nil }
            return state.spares.insert(spare)
        }
        refused?.end(loop: loop)
        perform(effects)
    }

    /// The launch took its reserved spare.
    fileprivate func reservedSpareTaken(_ id: UInt64) {
        state.withLock { $0.machine.reservedSpareTaken(id) }
    }

    // MARK: The primed worker

    /// The worker primed for `plan` (started from this pool's executable), taken; one primed for
    /// anything else ends.
    func takePrimed(for plan: LaunchPlan) -> PrimedWorker? {
        // This launch primes again after itself: a plan still waiting to be primed gives way.
        cancelWaitingPrime()
        guard let primed = state.withLock({ state in state.machine.takePrimed().flatMap { state.primed.removeValue(forKey: $0) } })
        else { return nil }
        // Its launch, or its end, watches it from now on.
        loop.deregister(primed.worker.process.processDescriptor)
        if primed.load == plan.load && primed.sealedFiles == plan.sealedFiles { return primed }
        end(primed)
        return nil
    }

    /// Primes a worker for `plan` (taking `sealed`, copies of its sealed files) once the host's
    /// channels are quiet, at most `primeDeferral` from now: after a launch, so that priming
    /// does not compete with the first requests to the worker just launched (`QuietMoment`). A
    /// plan waiting already gives way to this one.
    func primeWhenQuiet(_ plan: LaunchPlan, sealed: [FileDescriptor]) {
        let (now, traffic) = (ContinuousClock.now, loop.traffic.load(ordering: .relaxed))
        let effects = state.withLock { state -> [Effect]? in
            guard
                let (serial, effects) = state.machine.primeAsked(
                    now: now, traffic: traffic, quiet: Self.primeQuiet, atMost: Self.primeDeferral, backToBack: Self.backToBackLaunches)
            else { return nil }
            state.primeWaiting[serial] = PrimeWaiting(plan: plan, sealed: sealed)
            return effects
        }
        guard let effects else {
            for descriptor in sealed { descriptor.close() }
            return
        }
        perform(effects)
    }

    /// How long the host's channels must have been quiet before a plan is primed, and how long
    /// priming waits at most.
    static let primeQuiet: Duration = .microseconds(200)
    static let primeDeferral: Duration = .milliseconds(5)
    /// Launches of one pool closer together than this are back to back: each primes at once.
    static let backToBackLaunches: Duration = .milliseconds(5)

    /// On the loop's thread: primes the waiting plan `serial` if the moment came, else checks
    /// again later.
    func checkQuietMoment(_ serial: UInt64) {
        let traffic = loop.traffic.load(ordering: .relaxed)
        let (awaited, now) = (loop.awaitedAnswers.load(ordering: .relaxed), ContinuousClock.now)
        perform(state.withLock { $0.machine.checkQuietMoment(serial, traffic: traffic, awaitedAnswers: awaited, now: now) })
    }

    /// Forgets the plan waiting to be primed, if any.
    func cancelWaitingPrime() {
        perform(state.withLock { $0.machine.cancelPrimeWaiting() })
    }

    /// Primes a worker for `plan` on a ready spare. On the loop's thread, after a launch of
    /// `plan`; takes `sealed`, copies of its sealed files.
    func prime(_ plan: LaunchPlan, sealed: [FileDescriptor]) {
        guard let primed = makePrimedWorker(plan, sealed: sealed) else {
            perform(state.withLock { $0.machine.primingFailed() })
            return
        }
        var effects: [Effect] = []
        state.withLock { state in
            let (id, ready) = state.machine.primedWorkerReady()
            state.primed[id] = primed
            effects = ready
        }
        perform(effects)
    }

    /// A worker primed for `plan` on a ready spare, watched; nil (and what was made closed) when
    /// the plan may not be primed, no spare is ready, or it could not be started or watched.
    private func makePrimedWorker(_ plan: LaunchPlan, sealed: [FileDescriptor]) -> PrimedWorker? {
        var load = plan.load
        load.mode = .primed
        guard PrimedWorker.isEligible(plan), let resources = try? WorkerResources(load: load) else {
            for descriptor in sealed { descriptor.close() }
            return nil
        }
        // The whole hello must be in the pipe: nobody is there to write the rest.
        guard resources.pending.isEmpty, let worker = startOnReadySpare(descriptors: resources.childDescriptors + sealed) else {
            resources.closeAll()
            for descriptor in sealed { descriptor.close() }
            return nil
        }
        resources.closeChildEnds()
        let primed = PrimedWorker(load: plan.load, sealedFiles: plan.sealedFiles, worker: worker, ends: resources.hostEnds, sealed: sealed)
        // Watched while it waits: one killed meanwhile is reaped at once, not at the next launch
        // of its plugin, which may never come (the chaos soak found such zombies). Watched
        // before it is published: once published, a launch may take it and watch the same pidfd
        // itself, and a second registration of it would fail that launch (epoll_ctl: EEXIST).
        // Its death reported meanwhile waits for this job to end (it is on the loop's thread),
        // and the pidfd stays readable until then.
        guard (try? loop.register(primed.worker.process.processDescriptor, events: Epoll.readable, handler: self)) != nil else {
            end(primed)
            return nil
        }
        return primed
    }

    /// The primed worker's pidfd became readable: it died while it waited. It is taken out and
    /// reaped. False when `descriptor` is not the primed worker's.
    func primedExited(processDescriptor descriptor: Int32) -> Bool {
        let effects = state.withLock { state -> [Effect]? in
            guard let id = state.machine.primed, state.primed[id]?.worker.process.processDescriptor.rawValue == descriptor else {
                return nil
            }
            return state.machine.primedDied(id)
        }
        guard let effects else { return false }
        perform(effects)
        return true
    }

    /// Ends a primed worker before it loaded anything, and closes what this side holds of it.
    func end(_ primed: PrimedWorker) {
        loop.deregister(primed.worker.process.processDescriptor)
        primed.closeHostSide()
        primed.worker.end(loop: loop)
    }

    /// The pids of this pool's spares and its primed worker.
    var spareProcessIdentifiers: [Int32] {
        state.withLock { state in
            state.spares.processIdentifiers(of: state.machine.slotSpares)
                + [state.machine.primed.flatMap { state.primed[$0]?.worker.process.processIdentifier }].compactMap { $0 }
        }
    }

    /// The pids of this pool's launchers, idle and asked.
    var launcherProcessIdentifiers: [Int32] {
        state.withLock { state in
            ([state.machine.idle].compactMap { $0 } + state.machine.askedLaunchers).compactMap {
                state.launchers[$0]?.process.processIdentifier
            }
        }
    }

    /// The pids of the spares the shared pool of `executable` holds: for tests that kill one.
    package static func spareProcessIdentifiers(executable: String) -> [Int32] {
        running(executable: executable, forks: .one)?.state.withLock { $0.spares.processIdentifiers(of: $0.machine.slotSpares) } ?? []
    }

    /// The pid of the worker primed in the shared pool of `executable`, if it has one.
    package static func primedProcessIdentifier(executable: String) -> Int32? {
        running(executable: executable, forks: .one)?.primedProcessIdentifier
    }

    /// The pid of a worker primed in any running pool, if there is one.
    package static var primedProcessIdentifier: Int32? {
        runningPools().lazy.compactMap(\.primedProcessIdentifier).first
    }

    private var primedProcessIdentifier: Int32? {
        state.withLock { state in state.machine.primed.flatMap { state.primed[$0]?.worker.process.processIdentifier } }
    }

    /// Ends every pool's primed worker and waits until each is reaped: for tests that count this
    /// process's descriptors and children, and benchmarks of a first launch.
    package static func discardPrimedAndWait() {
        for pool in runningPools() {
            pool.cancelWaitingPrime()
            guard
                let primed = pool.state.withLock({ state in state.machine.takePrimed().flatMap { state.primed.removeValue(forKey: $0) } })
            else { continue }
            primed.closeHostSide()
            primed.worker.endNow(loop: pool.loop)
        }
    }
}

/// A plan launched last, to be primed once the host is quiet (`LaunchPool.primeWhenQuiet`).
struct PrimeWaiting: Sendable {
    let plan: LaunchPlan
    let sealed: [FileDescriptor]
}

/// A worker made ahead for the plugin launched last, confined exactly as that launch was, waiting
/// for the next launch of the same plan to load the plugin (`LoadMode.primed`). Such a launch is
/// the policy check, one `hello` and the plugin's `dlopen`: the view, the ids, the limits, the
/// system-call filter and Landlock are in place already. No plugin code runs before that launch,
/// which checks the policy like any other; a launch of another plan, or a change of the host's
/// mounts, ends the primed worker.
struct PrimedWorker: Sendable {
    /// What the worker was confined for (in mode `serve`, as a launch asks).
    let load: LoadConfiguration
    let sealedFiles: [SealedSource]
    let worker: StartedWorker
    let ends: WorkerHostEnds
    /// Copies of the sealed files, for the worker primed after this one is launched.
    let sealed: [FileDescriptor]

    /// Whether a launch of `plan` may be primed: a worker from a spare, with every layer on, and
    /// no control group of its own (which the worker would join at its launch).
    static func isEligible(_ plan: LaunchPlan) -> Bool {
        plan.primesWorkers && plan.launchStrategy.forks != nil && plan.load.mode == .serve
            && plan.load.confinement.permitsSpare
            && !plan.load.confinement.allowsProcesses
    }

    func closeHostSide() {
        ends.close()
        for descriptor in sealed { descriptor.close() }
    }
}

/// A ready spare set aside for one launch and woken ahead of its work. `start` takes it; a launch
/// that ends before then gives it back with `release()`.
final class SpareReservation: Sendable {
    let pool: LaunchPool
    private let id: UInt64
    private let spare: Locked<Spare?>

    fileprivate init(_ spare: consuming Spare, pool: LaunchPool) {
        id = spare.id
        self.spare = Locked(spare)
        self.pool = pool
    }

    /// The spare, for `start` of its pool: no longer the pool's.
    func take() -> Spare? {
        guard let taken = spare.withLock({ $0.take() }) else { return nil }
        pool.reservedSpareTaken(id)
        return taken
    }

    /// Gives the spare back unless `start` took it.
    func release() {
        if let taken = spare.withLock({ $0.take() }) { pool.putBack(taken) }
    }
}
