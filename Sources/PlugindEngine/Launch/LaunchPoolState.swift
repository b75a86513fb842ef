/// The launch pool's bookkeeping, as a state machine with no system calls: its launchers and what
/// each is asked, the spares and their slots, the request for the next spare, the worker primed
/// and the plan waiting to be, the launches waiting for an answer, and the pool's stop. Each input
/// returns the effects to carry out, in order; `LaunchPool` holds it under its lock beside the
/// resources (sockets, pidfds, continuations) the effects name by id, and carries them out after
/// releasing the lock, on the thread the input came from. Tests and the fuzz target drive it
/// directly.
///
/// Every launcher, spare and primed worker ends in exactly one effect that names it
/// (`reapLauncher`, `endSpare`, `endPrimed`), or leaves the pool in exactly one input that hands
/// it out (`spareForLaunch`, `takeSpareForPriming`, `reservedSpareTaken`, `takePrimed`); every
/// launch registered completes exactly once (`completeLaunch`).
///
/// Longer than a file should be, as `ChannelProtocol` is: its inputs share private bookkeeping
/// (the slots, the request for a spare, the settle check) that files of their own would have to
/// expose to the whole module.
///
/// Its inputs and effects are `package` for the fuzz target (`PlugindHostFuzzing`, which no
/// shipped library links).
package struct LaunchPoolState {
    /// How many children each launcher forks (see `LaunchPool.Forks`).
    package enum Forks: Sendable {
        /// One: every worker has an address-space layout, stack canary and hash seed of its own,
        /// and more unique memory than with `many` (Documentation/Performance.md has both); each
        /// costs the exec of a launcher, ahead.
        case one
        /// Any number: the workers of one host share the launcher's layout, canary and hash seed
        /// and most of its memory, and launches in quick succession do not wait for launchers to
        /// start.
        case many
    }

    package typealias LauncherID = UInt64
    package typealias SpareID = UInt64

    /// How far a launcher is in its life.
    package enum LauncherPhase: Sendable, Equatable {
        /// Exec'd, its socket open and watched; it has not said it is ready, so it has read no
        /// request yet (one sent now waits in its socket).
        case starting
        /// Said it is ready (loaded and warmed up).
        case ready
        /// Let go: its socket closed, which ends it; its pidfd is watched until it is reaped.
        case letGo
    }

    /// What a launcher is for, now.
    package enum LauncherRole: Sendable, Equatable {
        /// The launcher the next request goes to (with `Forks.many`, it may be asked already).
        case idle
        /// Asked for these requests, not answered yet.
        case asked(Set<UInt32>)
        /// Taken for a request not sent yet, by whoever took it: events on it wait until then.
        case held
        case letGo
    }

    private struct Launcher {
        var phase: LauncherPhase
        let pid: Int32
        /// The requests it was sent and has not answered.
        var requests: Set<UInt32> = []
    }

    /// How far a spare is in its life in the pool. A spare handed to a launch, used for priming,
    /// or ended is no longer here.
    package enum SparePhase: Sendable, Equatable {
        /// In a slot, still setting itself up: its socket is watched for the ready byte.
        case preparing
        /// In a slot, ready.
        case prepared
        /// Taken out of its slot while what it sent when ready is read, so that no launch takes
        /// it meanwhile.
        case receiving
        /// Set aside for one launch (`SpareReservation`), woken ahead of its work; no longer
        /// watched by the pool.
        case reserved
    }

    /// How a launch ended, for its waiter.
    package enum LaunchOutcome: Sendable, Equatable {
        /// The launcher forked the worker, `pid`.
        case forked(pid: Int32)
        /// The launcher could not fork it.
        case forkFailed(errno: Int32)
        /// The launcher ended before it answered (`LauncherLost.ended`).
        case launcherEnded(LauncherID, wasReady: Bool, killed: Bool)
        /// The pool stopped first.
        case poolStopped
        /// The request could not be sent: the error is the sender's.
        case notSent
    }

    /// What the shell carries out, after the lock.
    package enum Effect: Sendable, Equatable {
        /// Schedules the job that makes the idle launcher (`LaunchPool.replenishDelay` from now),
        /// which says `startingIdleLauncher` and then `idleLauncherMade`.
        case scheduleIdleLauncher
        /// Lets a launcher go: its socket no longer watched, and closed.
        case closeLauncherSocket(LauncherID)
        /// A launcher's pidfd no longer watched; the launcher killed (if it has not ended) and
        /// reaped. It is forgotten.
        case reapLauncher(LauncherID)
        /// Kills and reaps the child the launcher may have forked for `request` before it ended
        /// without answering (its fork record says).
        case reapLostChild(LauncherID, request: UInt32)
        /// Completes launch `request`'s waiter.
        case completeLaunch(UInt32, LaunchOutcome)
        /// Resumes those waiting for a request to a launcher (`awaitRequest`), by waiter.
        case resumeRequestWaiters([UInt64])
        /// Resumes those waiting until the pool is settled, by waiter.
        case resumeSettleWaiters([UInt64])
        /// Sends request `id` for a spare to a launcher, in a job on the loop thread
        /// (`takeLauncherForSpare`, then `spareRequestFailed` when it cannot be sent).
        case askForSpare(UInt32)
        /// Adopts the spare `pid` a launcher forked, with the socket it passed: then
        /// `spareAdopted`, or `spareNotAdopted`.
        case adoptSpare(pid: Int32)
        /// Ends the spare `pid` asked for before the host's mounts changed, unused.
        case discardSpare(pid: Int32)
        /// Ends a spare: killed, reaped once it exited. It is forgotten.
        case endSpare(SpareID)
        /// Checks, at `at`, whether the host is quiet enough to prime the waiting plan `serial`
        /// (`checkQuietMoment`).
        case checkQuietMoment(serial: UInt64, at: ContinuousClock.Instant)
        /// Forgets the plan `serial` that was waiting to be primed (closes its sealed copies).
        case dropPrimeWaiting(UInt64)
        /// Primes a worker for the waiting plan `serial` now.
        case prime(UInt64)
        /// Ends the primed worker `id` (its pidfd no longer watched, its host side closed).
        case endPrimed(UInt64)
        /// The pool stopped: the mount table is no longer watched, and closed.
        case closeMountTable
    }

    /// What a launcher's pidfd becoming readable means.
    package enum LauncherExit: Sendable, Equatable {
        /// No launcher the pool watches (unknown, or held for a request not sent yet).
        case notWatched
        /// A let-go launcher ended: it is reaped.
        case reaped([Effect])
        /// A launcher in use ended: what it sent is read, and how it ended is told with
        /// `launcherEnded`.
        case running
    }

    /// How many spares the pool keeps: two, so that back-to-back launches find one that has
    /// finished warming up while the next one is still being made.
    package static let spareCapacity = 2
    /// How many of its launchers' start times the pool keeps.
    package static let keptStartTimes = 8

    package let forks: Forks
    /// A private pool for a single launch (`LaunchStrategy.spawn`, a fallback, a one-shot
    /// command): the launcher it takes is not replaced, since no later launch will need one.
    package let forOneLaunch: Bool

    package private(set) var isStopped = false
    private var launchers: [LauncherID: Launcher] = [:]
    /// The launcher the next request goes to, exec'd ahead (nil while one is being made, or when
    /// making one failed: the next request makes one then).
    package private(set) var idle: LauncherID?
    /// A job that makes the idle launcher is scheduled.
    package private(set) var makingIdle = false
    /// How long its most recent launchers took from their spawn to saying they are ready, oldest
    /// first (at most `keptStartTimes`).
    package private(set) var startTimes: [Duration] = []
    /// Never 0, which a launcher's readiness uses.
    private var nextRequestID: UInt32 = 1
    /// Launches waiting for a launcher's answer, by request.
    private var launches: Set<UInt32> = []

    private var spares: [SpareID: SparePhase] = [:]
    /// The spares waiting in the pool, in slot order (a launch takes the first ready one).
    private var slots: [SpareID?] = Array(repeating: nil, count: spareCapacity)
    /// Spares are numbered in the order they arrived: the oldest is the likeliest to be ready
    /// soonest.
    private var lastSpare: SpareID = 0
    /// The request for a spare in flight, and how many changes of the host's mounts had been seen
    /// when it was asked for: one asked for before a change may copy the tree before it.
    private var spareRequest: (id: UInt32, mountGeneration: Int)?
    /// The last spare could not be forked: no more are asked for until the next launch, so that a
    /// launcher that cannot fork is not asked again and again.
    package private(set) var spareFailed = false
    /// Changes of the host's mounts seen.
    private var mountGeneration = 0
    /// A spare a launcher forked is being adopted (`adoptSpare`).
    private var adopting = false

    /// The worker primed for the next launch of the plan launched last.
    package private(set) var primed: UInt64?
    private var lastPrimed: UInt64 = 0
    /// The plan launched last, waiting to be primed once the host is quiet.
    private var primeWaiting: (serial: UInt64, moment: QuietMoment)?
    /// The waiting plan's moment came: a worker is being primed for it.
    private var priming = false
    private var lastPrimeSerial: UInt64 = 0
    /// When the last launch asked for a worker to be primed after it.
    private var lastLaunch: ContinuousClock.Instant?

    private var settleWaiters: [UInt64] = []
    private var requestWaiters: [(waiter: UInt64, launcher: Int32)] = []
    private var lastWaiter: UInt64 = 0

    package init(forks: Forks, forOneLaunch: Bool = false) {
        self.forks = forks
        self.forOneLaunch = forOneLaunch
    }

    // MARK: Reading the state

    /// Nothing on its way: the slots full of ready spares (or the last spare could not be forked),
    /// none asked for, being adopted or read; no launcher asked or unreaped; the idle launcher
    /// ready (or none, when making it failed, and none being made); no plan waiting to be primed
    /// or being primed. Or the pool stopped.
    package var isSettled: Bool {
        isStopped
            || (spareRequest == nil && (sparesInSlots == Self.spareCapacity || spareFailed)
                && spares.values.allSatisfy { $0 == .prepared || $0 == .reserved }
                && launchers.values.allSatisfy { $0.requests.isEmpty && $0.phase != .letGo } && !makingIdle
                && (idle.map { launchers[$0]?.phase == .ready } ?? true) && primeWaiting == nil && !priming && !adopting)
    }

    private var sparesInSlots: Int { slots.count { $0 != nil } }

    /// What launcher `id` is for; nil when the pool does not know it (never started, or reaped).
    package func role(of id: LauncherID) -> LauncherRole? {
        guard let launcher = launchers[id] else { return nil }
        if launcher.phase == .letGo { return .letGo }
        if idle == id { return .idle }
        return launcher.requests.isEmpty ? .held : .asked(launcher.requests)
    }

    package func phase(of id: LauncherID) -> LauncherPhase? { launchers[id]?.phase }

    /// The requests launcher `id` was sent and has not answered (with `Forks.many`, the idle
    /// launcher's too).
    package func requests(of id: LauncherID) -> Set<UInt32> { launchers[id]?.requests ?? [] }

    /// The launchers the pool knows, let go ones included, until they are reaped.
    package var knownLaunchers: Set<LauncherID> { Set(launchers.keys) }

    /// Whether events on launcher `id`'s socket and pidfd are handled now: it is idle or asked.
    package func isWatched(_ id: LauncherID) -> Bool {
        guard let launcher = launchers[id], launcher.phase != .letGo else { return false }
        return idle == id || !launcher.requests.isEmpty
    }

    /// The launcher of each request in flight (one launcher per request it was asked).
    package var askedLaunchers: [LauncherID] {
        launchers.sorted { $0.key < $1.key }.flatMap { id, launcher in Array(repeating: id, count: launcher.requests.count) }
    }

    package func phase(ofSpare id: SpareID) -> SparePhase? { spares[id] }

    /// The spares waiting in slots, in slot order.
    package var slotSpares: [SpareID] { slots.compactMap { $0 } }

    /// Every spare the pool knows: in slots, being read, reserved.
    package var knownSpares: Set<SpareID> { Set(spares.keys) }

    /// The request for a spare in flight, if any.
    package var spareRequestInFlight: UInt32? { spareRequest?.id }

    /// The plan waiting to be primed, if any.
    package var primeWaitingSerial: UInt64? { primeWaiting?.serial }

    /// The launches waiting for an answer.
    package var waitingLaunches: Set<UInt32> { launches }

    // MARK: Launchers

    private mutating func takeRequestID() -> UInt32 {
        defer { nextRequestID = nextRequestID == .max ? 1 : nextRequestID + 1 }
        return nextRequestID
    }

    /// A launcher was exec'd, its socket open and watched: whoever started it offers it as the
    /// idle one (`offerIdle`), asks it (`takeLauncher` made none), or lets it go.
    package mutating func launcherStarted(_ id: LauncherID, pid: Int32) {
        launchers[id] = Launcher(phase: .starting, pid: pid)
    }

    /// Offers a launcher just made as the idle one; the idle launcher it is then (nil once the
    /// pool stopped). One not kept (another is idle already, or the pool stopped) is let go.
    package mutating func offerIdle(_ id: LauncherID) -> (idle: LauncherID?, effects: [Effect]) {
        guard !isStopped else { return (nil, retire(id)) }
        if idle == nil { idle = id }
        let effects = idle == id ? [] : retire(id)
        return (idle, effects + settleCheck())
    }

    /// The launcher for the next request, on the loop thread: the idle one, or nil when the shell
    /// must start one (`launcherStarted`; with `Forks.many` then `offerIdle`). With `Forks.one`
    /// the idle launcher is taken, and the next is made a moment later, off the launch's path
    /// (not in a pool for one launch).
    package mutating func takeLauncher() -> (launcher: LauncherID?, effects: [Effect]) {
        guard forks == .one else { return (idle, []) }
        let taken = idle
        idle = nil
        return (taken, forOneLaunch ? [] : makeIdleLauncherLater())
    }

    /// Schedules the making of the idle launcher unless there is one, or its making is scheduled.
    package mutating func makeIdleLauncherLater() -> [Effect] {
        guard !isStopped, idle == nil, !makingIdle else { return [] }
        makingIdle = true
        return [.scheduleIdleLauncher]
    }

    /// The job that makes the idle launcher begins: false when the pool stopped meanwhile (a
    /// private one, after its one launch), which needs none.
    package mutating func startingIdleLauncher() -> Bool {
        guard isStopped else { return true }
        makingIdle = false
        return false
    }

    /// The job that makes the idle launcher made `id` (nil: making it failed).
    package mutating func idleLauncherMade(_ id: LauncherID?) -> [Effect] {
        makingIdle = false
        guard let id else { return settleCheck() }
        return offerIdle(id).effects + settleCheck()
    }

    /// After a launcher's request, answered or not: one that forks a single child is let go.
    package mutating func finished(with id: LauncherID) -> [Effect] {
        (forks == .one ? retire(id) : []) + settleCheck()
    }

    /// Lets launcher `id` go, unless it was already: its socket closed, it ends; it is reaped
    /// when its pidfd says it ended, or now when the pool stopped.
    package mutating func retire(_ id: LauncherID) -> [Effect] {
        guard var launcher = launchers[id], launcher.phase != .letGo else { return [] }
        guard !isStopped else {
            launchers[id] = nil
            return [.closeLauncherSocket(id), .reapLauncher(id)]
        }
        launcher.phase = .letGo
        launchers[id] = launcher
        return [.closeLauncherSocket(id)]
    }

    /// Launcher `id` said it is ready, `startTime` after its spawn.
    package mutating func launcherSaidReady(_ id: LauncherID, startTime: Duration) -> [Effect] {
        if launchers[id]?.phase == .starting { launchers[id]?.phase = .ready }
        startTimes.append(startTime)
        if startTimes.count > Self.keptStartTimes { startTimes.removeFirst() }
        return settleCheck()
    }

    /// Launcher `id` answered `request` with `value` (a pid, or minus an errno). Nil when no
    /// launcher was asked `request` (an answer to nothing asked, or after the pool stopped): the
    /// shell closes what came with it. The shell adopts a spare's socket only on `adoptSpare`,
    /// and closes it otherwise.
    package mutating func launcherAnswered(_ id: LauncherID, request: UInt32, value: Int32) -> [Effect]? {
        guard let asked = launchers.first(where: { $0.value.requests.contains(request) })?.key else { return nil }
        launchers[asked]?.requests.remove(request)
        var effects = forks == .one ? retire(id) : []
        if let spare = spareRequest, spare.id == request {
            spareRequest = nil
            if spare.mountGeneration != mountGeneration {
                // Asked for before the mounts changed: its copy of the host's tree may miss them.
                if value > 0 { effects.append(.discardSpare(pid: value)) }
                effects += replenish(retryingAfterFailure: false)
            } else if value > 0 {
                adopting = true
                effects.append(.adoptSpare(pid: value))
            } else {
                spareFailed = true
            }
        } else if launches.remove(request) != nil {
            effects.append(.completeLaunch(request, value > 0 ? .forked(pid: value) : .forkFailed(errno: -value)))
        }
        return effects + settleCheck()
    }

    /// Launcher `id`'s pidfd became readable.
    package mutating func launcherProcessExited(_ id: LauncherID) -> LauncherExit {
        guard let launcher = launchers[id] else { return .notWatched }
        if launcher.phase == .letGo {
            launchers[id] = nil
            return .reaped([.reapLauncher(id)] + settleCheck())
        }
        return isWatched(id) ? .running : .notWatched
    }

    /// Launcher `id`, idle or asked, ended (`killed`: by SIGKILL, from outside), after what it
    /// sent was read: what it did not answer fails, saying whether it had said it was ready; the
    /// children it may have forked for those requests are reaped; it is let go, to be reaped.
    package mutating func launcherEnded(_ id: LauncherID, killed: Bool) -> [Effect] {
        guard let launcher = launchers[id] else { return settleCheck() }
        let wasReady = launcher.phase == .ready
        if idle == id { idle = nil }
        let requests = launcher.requests.sorted()
        launchers[id]?.requests = []
        var completions: [Effect] = []
        for request in requests {
            if spareRequest?.id == request {
                spareRequest = nil
                spareFailed = true
            }
            if launches.remove(request) != nil {
                completions.append(.completeLaunch(request, .launcherEnded(id, wasReady: wasReady, killed: killed)))
            }
        }
        let reaps = requests.map { Effect.reapLostChild(id, request: $0) }
        return reaps + retire(id) + completions + settleCheck()
    }

    // MARK: Launches

    /// A launch asks a launcher for a worker: its request, or nil when the pool stopped.
    package mutating func registerLaunch() -> UInt32? {
        guard !isStopped else { return nil }
        let id = takeRequestID()
        launches.insert(id)
        return id
    }

    /// Request `request` is about to be sent to launcher `id`: recorded, so that its answer (or
    /// the launcher's end) is matched to it. False when the pool stopped, or the launcher was let
    /// go meanwhile (with `Forks.many`, the idle launcher a launch took may end before it is
    /// asked): its socket is closed, and its number may be another's already.
    package mutating func asking(_ id: LauncherID, request: UInt32) -> Bool {
        guard !isStopped, let launcher = launchers[id], launcher.phase != .letGo else { return false }
        launchers[id]?.requests.insert(request)
        return true
    }

    /// A request was sent to the launcher `pid`: whoever waits for that hears of it.
    package mutating func requestSent(toLauncher pid: Int32) -> [Effect] {
        let resumed = requestWaiters.filter { $0.launcher == pid }.map(\.waiter)
        requestWaiters.removeAll { $0.launcher == pid }
        return resumed.isEmpty ? [] : [.resumeRequestWaiters(resumed)]
    }

    /// Request `request` could not be sent: no launcher holds it any more; a launch waiting for
    /// it completes (`notSent`) unless it did already.
    package mutating func requestNotSent(_ request: UInt32) -> [Effect] {
        for (id, launcher) in launchers where launcher.requests.contains(request) { launchers[id]?.requests.remove(request) }
        let effects: [Effect] = launches.remove(request) != nil ? [.completeLaunch(request, .notSent)] : []
        return effects + settleCheck()
    }

    /// Waits until the launcher `pid` holds a request it has not answered: nil when it does
    /// already (or the pool stopped), else the waiter, resumed by `requestSent`.
    package mutating func awaitRequest(toLauncher pid: Int32) -> UInt64? {
        if isStopped || launchers.values.contains(where: { $0.pid == pid && !$0.requests.isEmpty }) { return nil }
        lastWaiter += 1
        requestWaiters.append((lastWaiter, pid))
        return lastWaiter
    }

    // MARK: Spares

    /// Asks for a spare unless enough are there or one is on its way. `retryingAfterFailure`
    /// (once per launch) tries again after a spare could not be forked.
    package mutating func replenish(retryingAfterFailure: Bool) -> [Effect] {
        if retryingAfterFailure { spareFailed = false }
        guard !isStopped, !spareFailed, sparesInSlots < Self.spareCapacity, spareRequest == nil else { return settleCheck() }
        let id = takeRequestID()
        spareRequest = (id, mountGeneration)
        return [.askForSpare(id)]
    }

    /// Request `request` for a spare is about to be sent to launcher `id` (taken with
    /// `takeLauncher`): false when it is no longer the request in flight, or the pool stopped.
    package mutating func askingForSpare(_ id: LauncherID, request: UInt32) -> Bool {
        guard spareRequest?.id == request else { return false }
        return asking(id, request: request)
    }

    /// Request `request` for a spare could not be sent (or no launcher could be had): no more
    /// spares are asked for until the next launch.
    package mutating func spareRequestFailed(_ request: UInt32) -> [Effect] {
        if spareRequest?.id == request {
            spareRequest = nil
            spareFailed = true
        }
        return settleCheck()
    }

    /// The spare of `adoptSpare` is the pool's, `watched` until it says it is ready (a spare that
    /// cannot be watched is taken as ready). Ended when the pool stopped or every slot is taken.
    package mutating func spareAdopted(watched: Bool) -> (SpareID, [Effect]) {
        adopting = false
        lastSpare += 1
        let id = lastSpare
        spares[id] = watched ? .preparing : .prepared
        return (id, keep(id) + replenish(retryingAfterFailure: false) + settleCheck())
    }

    /// The spare of `adoptSpare` could not be kept (the shell ended it).
    package mutating func spareNotAdopted() -> [Effect] {
        adopting = false
        spareFailed = true
        return settleCheck()
    }

    /// Puts spare `id` in a free slot; ends it when the pool stopped or every slot is taken.
    private mutating func keep(_ id: SpareID) -> [Effect] {
        guard !isStopped, let free = slots.firstIndex(of: nil) else {
            spares[id] = nil
            return [.endSpare(id)]
        }
        slots[free] = id
        return []
    }

    private mutating func removeFromSlot(_ id: SpareID) {
        if let index = slots.firstIndex(of: id) { slots[index] = nil }
    }

    /// Spare `id`'s socket became readable: false unless it is preparing in a slot. It is taken
    /// out while what it sent is read (`spareReadinessRead`).
    package mutating func spareSocketReadable(_ id: SpareID) -> Bool {
        guard spares[id] == .preparing, slots.contains(id) else { return false }
        removeFromSlot(id)
        spares[id] = .receiving
        return true
    }

    /// What spare `id` sent when ready was read: it is ready, back in a slot.
    package mutating func spareReadinessRead(_ id: SpareID) -> [Effect] {
        guard spares[id] == .receiving else { return settleCheck() }
        spares[id] = .prepared
        return keep(id) + settleCheck()
    }

    /// Spare `id`'s pidfd became readable: it died before it was handed out. False unless it is
    /// in a slot.
    package mutating func spareDied(_ id: SpareID) -> [Effect]? {
        guard slots.contains(id) else { return nil }
        removeFromSlot(id)
        spares[id] = nil
        return [.endSpare(id)] + settleCheck()
    }

    /// The spare for a launch, taken out of the pool (nil when the pool stopped or has none): the
    /// first that is ready, else the oldest (the likeliest to be ready by the time it reads).
    /// Taking one still preparing may settle a pool that asks for no more spares (the last could
    /// not be forked): its settle waiters are resumed then.
    package mutating func spareForLaunch() -> (spare: SpareID?, effects: [Effect]) {
        guard !isStopped, let taken = firstPrepared ?? slotSpares.min() else { return (nil, []) }
        removeFromSlot(taken)
        spares[taken] = nil
        return (taken, settleCheck())
    }

    /// The first ready spare, in slot order.
    private var firstPrepared: SpareID? { slotSpares.first { spares[$0] == .prepared } }

    private mutating func takePrepared() -> SpareID? {
        guard !isStopped, let taken = firstPrepared else { return nil }
        removeFromSlot(taken)
        return taken
    }

    /// Takes a ready spare for a launch that will hand it its work in a moment: nil when none is
    /// ready. Until the launch takes it (`reservedSpareTaken`) or gives it back (`putBack`) the
    /// pool does not watch it.
    package mutating func reserveSpare() -> SpareID? {
        guard let id = takePrepared() else { return nil }
        spares[id] = .reserved
        return id
    }

    /// The launch took its reserved spare `id`: no longer the pool's.
    package mutating func reservedSpareTaken(_ id: SpareID) {
        if spares[id] == .reserved { spares[id] = nil }
    }

    /// A reserved spare `id` comes back unused, `watched` again (else it is ended). One the pool
    /// did not set aside is ended.
    package mutating func putBack(_ id: SpareID, watched: Bool) -> [Effect] {
        guard spares[id] == .reserved, watched else {
            if spares[id] == .reserved { spares[id] = nil }
            return [.endSpare(id)] + settleCheck()
        }
        spares[id] = .prepared
        return keep(id) + settleCheck()
    }

    /// A ready spare to prime a worker on, taken out of the pool, and the next spare asked for;
    /// nil (and nothing asked) when none is ready.
    package mutating func takeSpareForPriming() -> (SpareID, [Effect])? {
        guard let id = takePrepared() else { return nil }
        spares[id] = nil
        return (id, replenish(retryingAfterFailure: true))
    }

    /// The host's mounts changed: the spares' copies of its tree are out of date, so those in
    /// slots end and are replaced, and so does the primed worker, which built its view then. A
    /// spare asked for before now is ended when it arrives.
    package mutating func mountsChanged() -> [Effect] {
        mountGeneration += 1
        let outdated = slotSpares
        for id in outdated {
            removeFromSlot(id)
            spares[id] = nil
        }
        var effects = discardPrimed()
        effects += outdated.map { .endSpare($0) }
        if !outdated.isEmpty { effects += replenish(retryingAfterFailure: true) }
        return effects + settleCheck()
    }

    // MARK: The primed worker

    /// A launch of a plan that may be primed, at `now` with the loop's `traffic` count: the plan
    /// waits to be primed once the host is quiet (`checkQuietMoment`); a plan waiting already
    /// gives way. Nil when the pool stopped (the shell drops the plan).
    package mutating func primeAsked(
        now: ContinuousClock.Instant, traffic: UInt64, quiet: Duration, atMost: Duration, backToBack: Duration
    ) -> (serial: UInt64, effects: [Effect])? {
        let moment = QuietMoment.afterLaunch(
            now: now, previousLaunch: lastLaunch, traffic: traffic, quiet: quiet, atMost: atMost, backToBack: backToBack)
        lastLaunch = now
        guard !isStopped else { return nil }
        lastPrimeSerial += 1
        let replaced: [Effect] = primeWaiting.map { [.dropPrimeWaiting($0.serial)] } ?? []
        primeWaiting = (lastPrimeSerial, moment)
        return (lastPrimeSerial, replaced + [.checkQuietMoment(serial: lastPrimeSerial, at: moment.firstCheck)])
    }

    /// The check of the quiet moment for the waiting plan `serial`: primes it if the moment came,
    /// else checks again later. Nothing when that plan gave way.
    package mutating func checkQuietMoment(_ serial: UInt64, traffic: UInt64, awaitedAnswers: Int, now: ContinuousClock.Instant)
        -> [Effect]
    {
        guard var waiting = primeWaiting, waiting.serial == serial else { return [] }
        switch waiting.moment.check(traffic: traffic, awaitedAnswers: awaitedAnswers, now: now) {
        case .start:
            primeWaiting = nil
            priming = true
            return [.prime(serial)]
        case .checkAgain(let instant):
            primeWaiting = waiting
            return [.checkQuietMoment(serial: serial, at: instant)]
        }
    }

    /// Forgets the plan waiting to be primed, if any.
    package mutating func cancelPrimeWaiting() -> [Effect] {
        guard let waiting = primeWaiting else { return [] }
        primeWaiting = nil
        return [.dropPrimeWaiting(waiting.serial)] + settleCheck()
    }

    /// A worker was primed (on a spare from `takeSpareForPriming`) and is watched: its id. It
    /// replaces the one primed before, which ends; it ends itself when the pool stopped.
    package mutating func primedWorkerReady() -> (UInt64, [Effect]) {
        priming = false
        lastPrimed += 1
        guard !isStopped else { return (lastPrimed, [.endPrimed(lastPrimed)]) }
        let replaced: [Effect] = primed.map { [.endPrimed($0)] } ?? []
        primed = lastPrimed
        return (lastPrimed, replaced + settleCheck())
    }

    /// No worker could be primed for the plan of `prime` (not eligible, no spare ready, or it
    /// could not be started or watched).
    package mutating func primingFailed() -> [Effect] {
        priming = false
        return settleCheck()
    }

    /// The primed worker, taken for a launch (which checks it was primed for its plan): no longer
    /// the pool's.
    package mutating func takePrimed() -> UInt64? {
        defer { primed = nil }
        return primed
    }

    /// The primed worker `id`'s pidfd became readable: it died while it waited. Nil when it is
    /// not the primed worker.
    package mutating func primedDied(_ id: UInt64) -> [Effect]? {
        guard primed == id else { return nil }
        primed = nil
        return [.endPrimed(id)] + settleCheck()
    }

    /// Ends the primed worker, if any.
    package mutating func discardPrimed() -> [Effect] {
        guard let id = primed else { return [] }
        primed = nil
        return [.endPrimed(id)]
    }

    // MARK: Settling and stopping

    /// Resumes the settle waiters once the pool is settled: the tail of every input.
    private mutating func settleCheck() -> [Effect] {
        guard isSettled, !settleWaiters.isEmpty else { return [] }
        defer { settleWaiters.removeAll() }
        return [.resumeSettleWaiters(settleWaiters)]
    }

    /// Waits until the pool is settled: asks for the spares it lacks (trying again after a
    /// failure) and for its idle launcher (one that ended while idle is otherwise made again only
    /// by the next launch, and a launch a primed worker served takes none). The waiter, resumed
    /// by `resumeSettleWaiters` (among these effects when the pool is settled already).
    package mutating func settle() -> (waiter: UInt64, effects: [Effect]) {
        var effects = replenish(retryingAfterFailure: true)
        effects += makeIdleLauncherLater()
        lastWaiter += 1
        settleWaiters.append(lastWaiter)
        return (lastWaiter, effects + settleCheck())
    }

    /// Stops the pool: launches waiting fail, every waiter is resumed, and its launchers (idle,
    /// asked, let go), the spares in its slots and its primed worker end. A launcher held for a
    /// request not sent yet is let go by its holder (`finished(with:)`, `retire`), a spare being
    /// read or reserved when it comes back (`spareReadinessRead`, `putBack`): each ends then.
    package mutating func stop() -> [Effect] {
        guard !isStopped else { return [] }
        isStopped = true
        var effects: [Effect] = launches.sorted().map { .completeLaunch($0, .poolStopped) }
        launches.removeAll()
        if !requestWaiters.isEmpty { effects.append(.resumeRequestWaiters(requestWaiters.map(\.waiter))) }
        requestWaiters.removeAll()
        effects += settleCheck()
        if let waiting = primeWaiting { effects.append(.dropPrimeWaiting(waiting.serial)) }
        primeWaiting = nil
        // A launcher that forks many children is idle and asked at once.
        let open = launchers.filter { $0.value.phase != .letGo && ($0.key == idle || !$0.value.requests.isEmpty) }.keys.sorted()
        let letGo = launchers.filter { $0.value.phase == .letGo }.keys.sorted()
        idle = nil
        effects += open.map { .closeLauncherSocket($0) }
        effects.append(.closeMountTable)
        let ended = slotSpares
        for id in ended {
            removeFromSlot(id)
            spares[id] = nil
        }
        effects += ended.map { .endSpare($0) }
        effects += discardPrimed()
        for id in open + letGo { launchers[id] = nil }
        effects += (open + letGo).map { .reapLauncher($0) }
        return effects
    }
}
