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
        replenish(options: options, retryingAfterFailure: true)
    }

    private func replenish(options: SpawnRequest.Options, retryingAfterFailure: Bool) {
        let id = state.withLock { state -> UInt32? in
            if retryingAfterFailure { state.spareFailed = false }
            guard !state.stopped, !state.spareFailed, !state.spares.isFull, state.spareRequest == nil else { return nil }
            let id = state.takeRequestID()
            state.spareRequest = id
            state.spareRequestGeneration = state.mountGeneration
            return id
        }
        // Whatever the launch that asks: a spare serves launches with every layer on and
        // without the network.
        let spareOptions = options.union(.newNetworkNamespace).subtracting(.noAdvanceRestrictions)
        if let id { loop.execute { self.askForSpare(id, options: spareOptions) } }
    }

    /// Sends request `id` for a spare to a launcher, on the loop thread; when that fails, no more
    /// spares are asked for until the next launch.
    private func askForSpare(_ id: UInt32, options: SpawnRequest.Options) {
        var failed = true
        if let launcher = try? takeLauncher() {
            let current = state.withLock { $0.spareRequest == id }
            if current && ask(launcher, request: id, options: options, descriptors: [], cgroupFiles: []) == nil {
                failed = false
            } else {
                finished(with: launcher)
            }
        }
        guard failed else { return }
        state.withLock { state in
            guard state.spareRequest == id else { return }
            state.spareRequest = nil
            state.spareFailed = true
        }
        resumeSettledWaiters()
    }

    /// The answer to a request for a spare: the spare's pid (or minus an errno) and socket.
    func receivedSpare(pid: Int32, socket spareSocket: FileDescriptor?, outdated: Bool) {
        if outdated {
            // Asked for before the mounts changed: its copy of the host's tree may miss them.
            spareSocket?.close()
            if pid > 0, let processDescriptor = try? FileDescriptor.processDescriptor(for: pid) {
                StartedWorker(process: SpawnedProcess(processIdentifier: pid, processDescriptor: processDescriptor), hostTree: nil)
                    .end(loop: loop)
            }
            replenish(options: WorkerLauncher.isolatingOptions(), retryingAfterFailure: false)
        } else if adoptSpare(pid: pid, socket: spareSocket) {
            replenish(options: WorkerLauncher.isolatingOptions(), retryingAfterFailure: false)
        } else {
            state.withLock { $0.spareFailed = true }
        }
        resumeSettledWaiters()
    }

    /// Keeps a spare the launcher forked; false when it reported a failure instead.
    private func adoptSpare(pid: Int32, socket spareSocket: FileDescriptor?) -> Bool {
        guard pid > 0, let spareSocket else {
            spareSocket?.close()
            return false
        }
        // Never blocking: the ready byte is read at a launch that may come before it.
        guard (try? spareSocket.setNonBlocking()) != nil, let processDescriptor = try? FileDescriptor.processDescriptor(for: pid) else {
            spareSocket.close()
            return false
        }
        // Watched so that a spare that dies unused is reaped.
        guard (try? loop.register(processDescriptor, events: Epoll.readable, handler: self)) != nil else {
            spareSocket.close()
            processDescriptor.killAndReap()
            return false
        }
        // Watched until the spare says it is ready; a spare that cannot be watched is used anyway.
        let watched = (try? loop.register(spareSocket, events: Epoll.readable, handler: self)) != nil
        let process = SpawnedProcess(processIdentifier: pid, processDescriptor: processDescriptor)
        keep(Spare(process: process, socket: spareSocket, readiness: watched ? .preparing : .prepared(hostTree: nil)), arriving: true)
        return true
    }

    /// Puts `spare` in a slot (with the next arrival number, when it is new); ends it when the
    /// pool stopped or every slot is taken.
    private func keep(_ spare: consuming Spare, arriving: Bool) {
        var kept: Spare? = spare
        let refused = state.withLock { state -> Spare? in
            guard !state.stopped, var spare = kept.take() else { return kept.take() }
            if arriving {
                state.nextArrival += 1
                spare.arrival = state.nextArrival
            }
            return state.spares.insert(spare)
        }
        refused?.end(loop: loop)
    }

    /// The spare whose socket is `descriptor` said it has finished getting ready (or died, which
    /// its pidfd reports). It is taken out of its slot while what it sent is received, so that no
    /// launch hands it out meanwhile. False when `descriptor` is no waiting spare's socket.
    func sparePrepared(socket descriptor: Int32) -> Bool {
        let taken = state.withLock { state -> Spare? in
            let spare = state.spares.take { !$0.isPrepared && $0.socket.rawValue == descriptor }
            if spare != nil { state.sparesReceiving += 1 }
            return spare
        }
        guard var spare = taken else { return false }
        loop.deregister(spare.socket)
        spare.readiness = .prepared(hostTree: Spare.receiveReadiness(spare.socket))
        keep(spare, arriving: false)
        state.withLock { $0.sparesReceiving -= 1 }
        resumeSettledWaiters()
        return true
    }

    /// A spare's pidfd became readable: it died before it was handed out, and is reaped.
    func spareExited(processDescriptor descriptor: Int32) {
        let exited = state.withLock { $0.spares.take { $0.process.processDescriptor.rawValue == descriptor } }
        exited?.end(loop: loop)
    }

    /// Starts a worker on a ready spare, without waiting: nil when there is none (or it failed).
    private func startOnReadySpare(descriptors: [FileDescriptor]) -> StartedWorker? {
        guard let spare = state.withLock({ $0.stopped ? nil : $0.spares.takePrepared() }) else { return nil }
        let started = spare.hand(descriptors.map(\.rawValue), loop: loop)
        replenish(options: WorkerLauncher.isolatingOptions())
        return started
    }

    // MARK: Reservations

    /// Takes a ready spare for a launch that will hand it its work in a moment, and wakes it now
    /// (`SpareMessage.wake`). Nil when no spare is ready. Until `start` takes it (or the
    /// reservation is released) nothing watches it: a spare that dies meanwhile is found out
    /// when its work is sent.
    func reserveSpare() -> SpareReservation? {
        guard let spare = state.withLock({ $0.stopped ? nil : $0.spares.takePrepared() }) else { return nil }
        loop.deregister(spare.process.processDescriptor)
        spare.socket.sendWithoutWaiting(SpareMessage.wake)
        return SpareReservation(spare, pool: self)
    }

    /// Gives back a spare that was reserved and not used.
    fileprivate func putBack(_ spare: consuming Spare) {
        // Watched again, so that its death is noticed and reaped.
        guard (try? loop.register(spare.process.processDescriptor, events: Epoll.readable, handler: self)) != nil else {
            spare.end(loop: loop)
            return
        }
        keep(spare, arriving: false)
        resumeSettledWaiters()
    }

    // MARK: The primed worker

    /// The worker primed for `plan` (started from this pool's executable), taken; one primed for
    /// anything else ends.
    func takePrimed(for plan: LaunchPlan) -> PrimedWorker? {
        // This launch primes again after itself: a plan still waiting to be primed gives way.
        cancelWaitingPrime()
        guard let primed = state.withLock({ $0.primed.take() }) else { return nil }
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
        let (serial, replaced, moment) = state.withLock { state -> (UInt64?, [FileDescriptor], QuietMoment) in
            let moment = QuietMoment.afterLaunch(
                now: now, previousLaunch: state.lastLaunch, traffic: traffic, quiet: Self.primeQuiet, atMost: Self.primeDeferral,
                backToBack: Self.backToBackLaunches)
            state.lastLaunch = now
            guard !state.stopped else { return (nil, sealed, moment) }
            state.nextPrimeSerial += 1
            let replaced = state.primeWaiting.take()?.sealed ?? []
            state.primeWaiting = PrimeWaiting(plan: plan, sealed: sealed, moment: moment, serial: state.nextPrimeSerial)
            return (state.nextPrimeSerial, replaced, moment)
        }
        for descriptor in replaced { descriptor.close() }
        if let serial { loop.schedule(at: moment.firstCheck) { [weak self] in self?.checkQuietMoment(serial) } }
    }

    /// How long the host's channels must have been quiet before a plan is primed, and how long
    /// priming waits at most.
    static let primeQuiet: Duration = .microseconds(200)
    static let primeDeferral: Duration = .milliseconds(5)
    /// Launches of one pool closer together than this are back to back: each primes at once.
    static let backToBackLaunches: Duration = .milliseconds(5)

    /// On the loop's thread: primes the waiting plan `serial` if the moment came, else checks
    /// again later.
    private func checkQuietMoment(_ serial: UInt64) {
        let traffic = loop.traffic.load(ordering: .relaxed)
        let (awaited, now) = (loop.awaitedAnswers.load(ordering: .relaxed), ContinuousClock.now)
        let (due, checkAgain) = state.withLock { state -> (PrimeWaiting?, ContinuousClock.Instant?) in
            guard var waiting = state.primeWaiting, waiting.serial == serial else { return (nil, nil) }
            switch waiting.moment.check(traffic: traffic, awaitedAnswers: awaited, now: now) {
            case .start:
                state.primeWaiting = nil
                return (waiting, nil)
            case .checkAgain(let instant):
                state.primeWaiting = waiting
                return (nil, instant)
            }
        }
        if let checkAgain { loop.schedule(at: checkAgain) { [weak self] in self?.checkQuietMoment(serial) } }
        if let due {
            prime(due.plan, sealed: due.sealed)
            resumeSettledWaiters()
        }
    }

    /// Forgets the plan waiting to be primed, if any.
    func cancelWaitingPrime() {
        guard let waiting = state.withLock({ $0.primeWaiting.take() }) else { return }
        for descriptor in waiting.sealed { descriptor.close() }
        resumeSettledWaiters()
    }

    /// Primes a worker for `plan` on a ready spare. On the loop's thread, after a launch of
    /// `plan`; takes `sealed`, copies of its sealed files.
    func prime(_ plan: LaunchPlan, sealed: [FileDescriptor]) {
        var load = plan.load
        load.mode = .primed
        guard PrimedWorker.isEligible(plan), let resources = try? WorkerResources(load: load) else {
            for descriptor in sealed { descriptor.close() }
            return
        }
        // The whole hello must be in the pipe: nobody is there to write the rest.
        guard resources.pending.isEmpty, let worker = startOnReadySpare(descriptors: resources.childDescriptors + sealed) else {
            resources.closeAll()
            for descriptor in sealed { descriptor.close() }
            return
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
            return
        }
        let replaced = state.withLock { state -> PrimedWorker? in
            guard !state.stopped else { return primed }
            defer { state.primed = primed }
            return state.primed
        }
        if let replaced { end(replaced) }
    }

    /// The primed worker's pidfd became readable: it died while it waited. It is taken out and
    /// reaped. False when `descriptor` is not the primed worker's.
    func primedExited(processDescriptor descriptor: Int32) -> Bool {
        let dead = state.withLock { state -> PrimedWorker? in
            guard state.primed?.worker.process.processDescriptor.rawValue == descriptor else { return nil }
            return state.primed.take()
        }
        guard let dead else { return false }
        end(dead)
        resumeSettledWaiters()
        return true
    }

    /// Ends a primed worker before it loaded anything, and closes what this side holds of it.
    func end(_ primed: PrimedWorker) {
        loop.deregister(primed.worker.process.processDescriptor)
        primed.closeHostSide()
        primed.worker.end(loop: loop)
    }

    /// Ends the primed worker, if any (the host's mounts changed since it built its view).
    func discardPrimed() {
        if let primed = state.withLock({ $0.primed.take() }) { end(primed) }
    }

    /// The pids of this pool's spares and its primed worker.
    var spareProcessIdentifiers: [Int32] {
        state.withLock { $0.spares.processIdentifiers + [$0.primed?.worker.process.processIdentifier].compactMap { $0 } }
    }

    /// The pids of this pool's launchers, idle and busy.
    var launcherProcessIdentifiers: [Int32] {
        state.withLock { [$0.idle?.process.processIdentifier].compactMap { $0 } + $0.busy.values.map(\.process.processIdentifier) }
    }

    /// The pids of the spares the shared pool of `executable` holds: for tests that kill one.
    package static func spareProcessIdentifiers(executable: String) -> [Int32] {
        running(executable: executable, forks: .one)?.state.withLock { $0.spares.processIdentifiers } ?? []
    }

    /// The pid of the worker primed in the shared pool of `executable`, if it has one.
    package static func primedProcessIdentifier(executable: String) -> Int32? {
        running(executable: executable, forks: .one)?.state.withLock { $0.primed?.worker.process.processIdentifier }
    }

    /// The pid of a worker primed in any running pool, if there is one.
    package static var primedProcessIdentifier: Int32? {
        runningPools().lazy.compactMap { pool in pool.state.withLock { $0.primed?.worker.process.processIdentifier } }.first
    }

    /// Ends every pool's primed worker and waits until each is reaped: for tests that count this
    /// process's descriptors and children, and benchmarks of a first launch.
    package static func discardPrimedAndWait() {
        for pool in runningPools() {
            pool.cancelWaitingPrime()
            guard let primed = pool.state.withLock({ $0.primed.take() }) else { continue }
            primed.closeHostSide()
            primed.worker.endNow(loop: pool.loop)
        }
    }
}

/// A plan launched last, to be primed once the host is quiet (`LaunchPool.primeWhenQuiet`).
struct PrimeWaiting: Sendable {
    let plan: LaunchPlan
    let sealed: [FileDescriptor]
    var moment: QuietMoment
    /// Which call asked: a check scheduled for a plan that has given way does nothing.
    let serial: UInt64
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
    private let spare: Locked<Spare?>

    fileprivate init(_ spare: consuming Spare, pool: LaunchPool) {
        self.spare = Locked(spare)
        self.pool = pool
    }

    func take() -> Spare? {
        spare.withLock { $0.take() }
    }

    /// Gives the spare back unless `start` took it.
    func release() {
        if let spare = take() { pool.putBack(spare) }
    }
}
