import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

/// The launch pool's state machine driven directly, as `LaunchPool` drives it: the cases the
/// soak found (a launcher killed mid-request, a mount change while a spare prepares, priming,
/// settling), the stop, and that no spare is handed out twice.
@Suite("Launch pool state machine", .tags(.unit))
struct LaunchPoolStateTests {
    typealias Effect = LaunchPoolState.Effect

    /// A pool with its idle launcher 1 (pid 101), ready.
    func poolWithIdleLauncher(forks: LaunchPoolState.Forks = .one) -> LaunchPoolState {
        var pool = LaunchPoolState(forks: forks)
        pool.launcherStarted(1, pid: 101)
        #expect(pool.offerIdle(1) == (1, []))
        #expect(pool.launcherSaidReady(1, startTime: .milliseconds(20)).isEmpty)
        return pool
    }

    /// Sends a launch to the launcher `takeLauncher` gives: its request.
    func launch(_ pool: inout LaunchPoolState, on launcher: LaunchPoolState.LauncherID) throws -> UInt32 {
        let registered = pool.registerLaunch()
        let request = try #require(registered)
        #expect(pool.asking(launcher, request: request) == true)
        #expect(pool.requestSent(toLauncher: 100 + Int32(launcher)).isEmpty)
        return request
    }

    /// Asks for a spare, sends the request to a launcher made for it, and adopts what it forked:
    /// the spare's id. `launcher` is made for it unless the pool knows it.
    func spare(_ pool: inout LaunchPoolState, launcher: LaunchPoolState.LauncherID, pid: Int32, watched: Bool = true) throws
        -> LaunchPoolState.SpareID
    {
        let request = try #require(pool.spareRequestInFlight)
        if pool.role(of: launcher) == nil { pool.launcherStarted(launcher, pid: 100 + Int32(launcher)) }
        #expect(pool.askingForSpare(launcher, request: request) == true)
        let answer = pool.launcherAnswered(launcher, request: request, value: pid)
        let answered = try #require(answer)
        #expect(answered.contains(.adoptSpare(pid: pid)))
        let (id, _) = pool.spareAdopted(watched: watched)
        return id
    }

    @Test("a launcher killed mid-request: the launch fails saying so, the child it forked is reaped, and the retry finds another launcher")
    func launcherKilledMidRequest() throws {
        var pool = poolWithIdleLauncher()
        let (taken, effects) = pool.takeLauncher()
        #expect(taken == 1)
        #expect(effects == [.scheduleIdleLauncher], "the next launcher is made ahead, off the launch's path")
        let request = try launch(&pool, on: 1)
        #expect(pool.role(of: 1) == .asked([request]))
        #expect(!pool.isSettled, "a launcher asked is something on its way")

        #expect(pool.launcherProcessExited(1) == .running)
        #expect(
            pool.launcherEnded(1, killed: true) == [
                .reapLostChild(1, request: request), .closeLauncherSocket(1),
                .completeLaunch(request, .launcherEnded(1, wasReady: true, killed: true)),
            ])
        #expect(pool.role(of: 1) == .letGo)
        #expect(pool.waitingLaunches.isEmpty)

        // The launch learns whether the worker existed from the launcher's fork record: none
        // recorded, so no plugin code ran and another launcher of the same pool is tried.
        let lost = LauncherLost.ended(launcher: 101, forkRecord: nil, request: request, wasReady: false, killed: true)
        var retries = LaunchRetries(deadline: ContinuousClock.now + .seconds(10))
        #expect(retries.decide(after: LaunchRetries.Failure(lost), on: .shared, now: ContinuousClock.now) == .tryAgain(.shared))

        // The retry: the idle launcher is being made; the launch makes its own meanwhile.
        #expect(pool.takeLauncher() == (nil, []))
        pool.launcherStarted(2, pid: 102)
        let retry = try launch(&pool, on: 2)
        #expect(
            pool.launcherAnswered(2, request: retry, value: 4242) == [.closeLauncherSocket(2), .completeLaunch(retry, .forked(pid: 4242))])
        // An answer after the end (or twice) is no one's.
        #expect(pool.launcherAnswered(2, request: retry, value: 4242) == nil)
        #expect(pool.launcherProcessExited(1) == .reaped([.reapLauncher(1)]))
        #expect(pool.launcherProcessExited(1) == .notWatched, "reaped once")
    }

    @Test("a launcher that ends before it said it is ready read no request: the launch may try another")
    func launcherEndedBeforeReady() throws {
        var pool = LaunchPoolState(forks: .one)
        pool.launcherStarted(1, pid: 101)
        _ = pool.offerIdle(1)
        _ = pool.takeLauncher()
        let request = try launch(&pool, on: 1)
        let effects = pool.launcherEnded(1, killed: false)
        #expect(effects.contains(.completeLaunch(request, .launcherEnded(1, wasReady: false, killed: false))))
    }

    @Test("a request that could not be sent completes its launch once, even when the launcher's end was handled first")
    func requestNotSent() throws {
        var pool = poolWithIdleLauncher()
        _ = pool.takeLauncher()
        let registered = pool.registerLaunch()
        let request = try #require(registered)
        #expect(pool.asking(1, request: request) == true)
        #expect(pool.requestNotSent(request) == [.completeLaunch(request, .notSent)])
        #expect(pool.finished(with: 1) == [.closeLauncherSocket(1)])
        #expect(pool.finished(with: 1).isEmpty, "a launcher is let go once")

        var racing = poolWithIdleLauncher()
        _ = racing.takeLauncher()
        let racingLaunch = racing.registerLaunch()
        let second = try #require(racingLaunch)
        #expect(racing.asking(1, request: second) == true)
        #expect(racing.launcherEnded(1, killed: true).contains(.completeLaunch(second, .launcherEnded(1, wasReady: true, killed: true))))
        #expect(racing.requestNotSent(second).isEmpty)
    }

    @Test(
        "a mount change while a spare is preparing: that spare ends and never serves a launch; one asked for before the change is discarded"
    )
    func mountChangeMidSpare() throws {
        var pool = poolWithIdleLauncher()
        #expect(pool.replenish(retryingAfterFailure: true) == [.askForSpare(1)])
        let preparing = try spare(&pool, launcher: 2, pid: 500)
        #expect(pool.phase(ofSpare: preparing) == .preparing)
        let second = try #require(pool.spareRequestInFlight, "each spare that arrives asks for the next")

        #expect(pool.mountsChanged() == [.endSpare(preparing)])
        #expect(pool.phase(ofSpare: preparing) == nil)
        #expect(pool.spareSocketReadable(preparing) == false, "its ready byte is no one's")
        #expect(pool.spareForLaunch().spare == nil, "no spare made before the change serves a launch")

        // The spare asked for before the change arrives: discarded, and the next asked for.
        pool.launcherStarted(3, pid: 103)
        #expect(pool.askingForSpare(3, request: second) == true)
        let answer = pool.launcherAnswered(3, request: second, value: 501)
        let effects = try #require(answer)
        #expect(effects.contains(.discardSpare(pid: 501)))
        #expect(!effects.contains(.adoptSpare(pid: 501)))
        let third = try #require(pool.spareRequestInFlight)
        #expect(effects.contains(.askForSpare(third)))
        #expect(pool.slotSpares.isEmpty)

        // One asked for after the change serves launches.
        let fresh = try spare(&pool, launcher: 4, pid: 502)
        #expect(pool.spareSocketReadable(fresh) == true)
        #expect(pool.phase(ofSpare: fresh) == .receiving)
        #expect(pool.spareForLaunch().spare == nil, "a spare being read is no launch's")
        _ = pool.spareReadinessRead(fresh)
        #expect(pool.spareForLaunch().spare == fresh)
    }

    @Test("priming: a plan waits for the quiet moment, then takes a ready spare; another plan or a mount change ends the primed worker")
    func priming() throws {
        var pool = poolWithIdleLauncher()
        _ = pool.replenish(retryingAfterFailure: true)
        let ready = try spare(&pool, launcher: 2, pid: 500, watched: false)
        #expect(pool.phase(ofSpare: ready) == .prepared)
        let start = ContinuousClock.now
        let waiting = pool.primeAsked(
            now: start, traffic: 7, quiet: .microseconds(200), atMost: .milliseconds(5), backToBack: .milliseconds(5))
        let (serial, effects) = try #require(waiting)
        #expect(effects == [.checkQuietMoment(serial: serial, at: start + .microseconds(200))])
        #expect(pool.primeWaitingSerial == serial)

        // Traffic moved: not yet.
        let busy = pool.checkQuietMoment(serial, traffic: 9, awaitedAnswers: 0, now: start + .microseconds(200))
        #expect(busy == [.checkQuietMoment(serial: serial, at: start + .microseconds(400))])
        // Quiet: primed now; the pool is not settled until the worker is.
        #expect(pool.checkQuietMoment(serial, traffic: 9, awaitedAnswers: 0, now: start + .microseconds(400)) == [.prime(serial)])
        #expect(pool.checkQuietMoment(serial, traffic: 9, awaitedAnswers: 0, now: start + .microseconds(600)).isEmpty, "primed once")
        let priming = pool.takeSpareForPriming()
        let (taken, _) = try #require(priming)
        #expect(taken == ready)
        let (primed, replaced) = pool.primedWorkerReady()
        #expect(replaced.isEmpty)
        #expect(pool.primed == primed)
        #expect(pool.phase(ofSpare: ready) == nil)

        // A later launch's plan gives way to the next; a launch takes the primed worker once.
        let later = start + .milliseconds(10)
        let firstPlan = pool.primeAsked(now: later, traffic: 9, quiet: .zero, atMost: .zero, backToBack: .zero)
        let (first, _) = try #require(firstPlan)
        let secondPlan = pool.primeAsked(now: later, traffic: 9, quiet: .zero, atMost: .zero, backToBack: .zero)
        let (second, gaveWay) = try #require(secondPlan)
        #expect(gaveWay.first == .dropPrimeWaiting(first))
        #expect(pool.cancelPrimeWaiting().first == .dropPrimeWaiting(second))
        #expect(pool.takePrimed() == primed)
        #expect(pool.takePrimed() == nil)

        // No spare ready: priming fails, and says so (the pool may settle).
        let thirdPlan = pool.primeAsked(now: later, traffic: 9, quiet: .zero, atMost: .zero, backToBack: .zero)
        let (third, _) = try #require(thirdPlan)
        #expect(pool.checkQuietMoment(third, traffic: 9, awaitedAnswers: 0, now: later) == [.prime(third)])
        #expect(pool.takeSpareForPriming() == nil)
        _ = pool.primingFailed()

        // A primed worker ends at a mount change, and when it dies.
        _ = pool.primedWorkerReady()
        let current = try #require(pool.primed)
        #expect(pool.mountsChanged().first == .endPrimed(current))
        let (dying, _) = pool.primedWorkerReady()
        #expect(pool.primedDied(dying + 1) == nil)
        #expect(pool.primedDied(dying)?.first == .endPrimed(dying))
    }

    @Test(
        "settled only once every spare is ready in its slot, no launcher is asked or unreaped, the idle launcher is ready, nothing is primed"
    )
    func settling() throws {
        var pool = LaunchPoolState(forks: .one)
        pool.launcherStarted(1, pid: 101)
        _ = pool.offerIdle(1)
        let (waiter, asked) = pool.settle()
        #expect(asked == [.askForSpare(1)])
        #expect(!pool.isSettled)

        func resumes(_ effects: [Effect]) -> Bool { effects.contains(.resumeSettleWaiters([waiter])) }
        // Two spares: the second is asked for when the first arrives.
        let first = try spare(&pool, launcher: 2, pid: 500)
        #expect(pool.role(of: 2) == .letGo)
        let second = try spare(&pool, launcher: 3, pid: 501)
        #expect(pool.spareRequestInFlight == nil, "the slots are full")
        #expect(pool.spareSocketReadable(first) == true)
        #expect(!resumes(pool.spareReadinessRead(first)))
        #expect(pool.spareSocketReadable(second) == true)
        #expect(!resumes(pool.spareReadinessRead(second)))
        // The let-go launchers are reaped.
        guard case .reaped(let reaped) = pool.launcherProcessExited(2) else {
            Issue.record("launcher 2 was not let go")
            return
        }
        #expect(!resumes(reaped))
        guard case .reaped(let last) = pool.launcherProcessExited(3) else {
            Issue.record("launcher 3 was not let go")
            return
        }
        #expect(!resumes(last), "the idle launcher has not said it is ready")
        #expect(!pool.isSettled)
        #expect(resumes(pool.launcherSaidReady(1, startTime: .milliseconds(30))))
        #expect(pool.isSettled)

        // Settled at once now; a spare taken unsettles it until the next is ready.
        let (again, effects) = pool.settle()
        #expect(effects == [.resumeSettleWaiters([again])])
        #expect(pool.spareForLaunch().spare == first)
        #expect(!pool.isSettled)

        // A spare that cannot be forked: settled without it until the next launch retries.
        let (later, retry) = pool.settle()
        let request = try #require(retry.first.flatMap { if case .askForSpare(let id) = $0 { id } else { nil } })
        #expect(!pool.isSettled)
        _ = pool.takeLauncher()
        #expect(pool.askingForSpare(1, request: request) == true)
        let answer = pool.launcherAnswered(1, request: request, value: -11)
        let failed = try #require(answer)
        #expect(pool.spareFailed)
        #expect(!failed.contains(.resumeSettleWaiters([later])), "the idle launcher is being made")
        #expect(pool.startingIdleLauncher() == true)
        pool.launcherStarted(4, pid: 104)
        _ = pool.idleLauncherMade(4)
        #expect(pool.launcherSaidReady(4, startTime: .milliseconds(1)).isEmpty, "launcher 1 is still to be reaped")
        guard case .reaped(let done) = pool.launcherProcessExited(1) else {
            Issue.record("launcher 1 was not let go")
            return
        }
        #expect(done.contains(.resumeSettleWaiters([later])))
    }

    @Test("a launch that takes the spare still preparing, when no more spares are asked for, settles the pool: its waiters resume")
    func settledByLaunch() throws {
        var pool = poolWithIdleLauncher()
        let (waiter, _) = pool.settle()
        let preparing = try spare(&pool, launcher: 2, pid: 500)
        // The next spare cannot be forked: no more are asked for until the next launch.
        let request = try #require(pool.spareRequestInFlight)
        pool.launcherStarted(3, pid: 103)
        #expect(pool.askingForSpare(3, request: request) == true)
        _ = pool.launcherAnswered(3, request: request, value: -11)
        for launcher: LaunchPoolState.LauncherID in [2, 3] {
            let exit = pool.launcherProcessExited(launcher)
            #expect(exit == .reaped([.reapLauncher(launcher)]), "nothing settled while a spare prepares")
        }
        let (taken, effects) = pool.spareForLaunch()
        #expect(taken == preparing)
        #expect(effects == [.resumeSettleWaiters([waiter])])
    }

    @Test("shutdown ends everything: launches fail, waiters resume, every launcher, spare and primed worker ends once")
    func shutdown() throws {
        var pool = poolWithIdleLauncher(forks: .many)
        // Launcher 1 is idle and asked at once; launcher 2 is let go; launcher 3 is held by a
        // launch that has not sent its request yet.
        let (taken, _) = pool.takeLauncher()
        #expect(taken == 1)
        let request = try launch(&pool, on: 1)
        pool.launcherStarted(2, pid: 102)
        #expect(pool.offerIdle(2).effects == [.closeLauncherSocket(2)], "one idle launcher is enough")
        pool.launcherStarted(3, pid: 103)
        let awaiting = pool.awaitRequest(toLauncher: 103)
        let waiter = try #require(awaiting)
        _ = pool.replenish(retryingAfterFailure: true)
        let slotted = try spare(&pool, launcher: 1, pid: 500, watched: false)
        let reserved = try spare(&pool, launcher: 1, pid: 501, watched: false)
        #expect(pool.reserveSpare() == slotted)
        let inSlot = try #require(pool.slotSpares.first)
        #expect(inSlot == reserved)
        let (primed, _) = pool.primedWorkerReady()
        let waiting = pool.primeAsked(now: .now, traffic: 0, quiet: .zero, atMost: .zero, backToBack: .zero)
        let (serial, _) = try #require(waiting)
        let (settleWaiter, _) = pool.settle()

        let effects = pool.stop()
        #expect(effects.contains(.completeLaunch(request, .poolStopped)))
        #expect(effects.contains(.resumeRequestWaiters([waiter])))
        #expect(effects.contains(.resumeSettleWaiters([settleWaiter])))
        #expect(effects.contains(.dropPrimeWaiting(serial)))
        #expect(effects.contains(.endPrimed(primed)))
        #expect(effects.contains(.endSpare(inSlot)))
        #expect(effects.contains(.closeMountTable))
        #expect(effects.filter { if case .closeLauncherSocket = $0 { true } else { false } } == [.closeLauncherSocket(1)])
        let reaped = effects.compactMap { if case .reapLauncher(let id) = $0 { id } else { nil } }
        #expect(reaped == [1, 2], "the idle and asked one, and the one let go")
        #expect(pool.stop().isEmpty, "stopped once")
        #expect(pool.isSettled)
        #expect(pool.registerLaunch() == nil)
        #expect(pool.spareForLaunch().spare == nil)
        #expect(pool.replenish(retryingAfterFailure: true).isEmpty)
        #expect(pool.makeIdleLauncherLater().isEmpty)

        // What was held elsewhere ends as it comes back.
        #expect(pool.retire(3) == [.closeLauncherSocket(3), .reapLauncher(3)])
        #expect(pool.putBack(slotted, watched: true) == [.endSpare(slotted)])
        #expect(pool.knownLaunchers.isEmpty)
        #expect(pool.knownSpares.isEmpty)
    }

    @Test("no spare is handed out twice: a launch, a reservation and priming each take a spare the others no longer see")
    func noSpareHandedTwice() throws {
        var pool = poolWithIdleLauncher()
        _ = pool.replenish(retryingAfterFailure: true)
        let first = try spare(&pool, launcher: 2, pid: 500, watched: false)
        let second = try spare(&pool, launcher: 3, pid: 501)
        #expect(pool.slotSpares == [first, second])

        // A launch takes a ready one first, else the oldest.
        #expect(pool.reserveSpare() == first)
        #expect(pool.reserveSpare() == nil, "the other is not ready")
        #expect(pool.takeSpareForPriming() == nil)
        #expect(pool.spareForLaunch().spare == second)
        #expect(pool.spareForLaunch().spare == nil)
        #expect(pool.spareDied(second) == nil, "a spare handed out is the launch's to end")
        #expect(pool.spareSocketReadable(second) == false)

        // The reservation comes back unused, then serves one launch.
        #expect(pool.spareDied(first) == nil, "a reserved spare is not watched")
        _ = pool.putBack(first, watched: true)
        #expect(pool.phase(ofSpare: first) == .prepared)
        #expect(pool.spareForLaunch().spare == first)
        #expect(pool.putBack(first, watched: true) == [.endSpare(first)], "a spare the pool no longer holds comes back only to end")

        // A reserved spare taken by its launch is gone.
        _ = pool.replenish(retryingAfterFailure: true)
        let third = try spare(&pool, launcher: 4, pid: 502, watched: false)
        #expect(pool.reserveSpare() == third)
        pool.reservedSpareTaken(third)
        #expect(pool.knownSpares.isEmpty)
    }
}
