import PlugindSystem
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("Whether a launch tries another launcher", .tags(.unit))
struct LaunchRetriesTests {
    let start = ContinuousClock.now
    let timeout = Duration.seconds(10)

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start.advanced(by: .milliseconds(milliseconds)) }

    var fresh: LaunchRetries { LaunchRetries(deadline: start.advanced(by: timeout)) }

    @Test("a launcher that ended on its own before the worker existed: another launcher of the same pool, three times at most")
    func launcherLostBeforeWorker() {
        for path in [LaunchRetries.Path.shared, .own] {
            var retries = fresh
            for attempt in 1...LaunchRetries.maximumRetries {
                #expect(retries.decide(after: .launcherLostBeforeWorker, on: path, now: at(attempt)) == .tryAgain(path))
                #expect(retries.retries == attempt)
            }
            #expect(retries.decide(after: .launcherLostBeforeWorker, on: path, now: at(10)) == .giveUp)
            #expect(retries.tries == 1 + LaunchRetries.maximumRetries)
        }
    }

    @Test(
        "a launcher killed from outside (or gone when asked) before the worker existed: another of the same pool, up to a bound of its own"
    )
    func launcherKilledBeforeWorker() {
        for path in [LaunchRetries.Path.shared, .own] {
            var retries = fresh
            for attempt in 1...LaunchRetries.maximumLaunchersKilled {
                #expect(retries.decide(after: .launcherKilledBeforeWorker, on: path, now: at(attempt)) == .tryAgain(path))
            }
            #expect(retries.retries == 0 && retries.launchersKilled == LaunchRetries.maximumLaunchersKilled)
            #expect(retries.decide(after: .launcherKilledBeforeWorker, on: path, now: at(100)) == .giveUp)
            // The other tries are all still there.
            #expect(retries.decide(after: .launcherLostBeforeWorker, on: path, now: at(101)) == .tryAgain(path))
            #expect(retries.tries == 2 + LaunchRetries.maximumLaunchersKilled)
        }
    }

    @Test("no try starts once the launch's deadline has passed, with retries left or not")
    func deadline() {
        var retries = fresh
        #expect(retries.decide(after: .launcherLostBeforeWorker, on: .shared, now: at(9_999)) == .tryAgain(.shared))
        #expect(retries.decide(after: .launcherLostBeforeWorker, on: .shared, now: at(10_000)) == .giveUp)
        for failure in [LaunchRetries.Failure.launcherKilledBeforeWorker, .launcherLostAfterFork, .workerKilled, .poolFailed] {
            var late = fresh
            #expect(late.decide(after: failure, on: .shared, now: at(10_001)) == .giveUp)
            #expect(late.tries == 1)
        }
    }

    @Test("a worker that died or failed on its own is never tried again: its death may be the plugin's crash")
    func workerFailed() {
        for path in [LaunchRetries.Path.shared, .own] {
            var retries = fresh
            #expect(retries.decide(after: .workerFailed, on: path, now: start) == .giveUp)
            #expect(retries.retries == 0)
        }
    }

    @Test(
        "a launcher lost after its fork, a worker killed from outside, a pool that failed: the shared pool's falls back to a launcher of its own once; a private pool's ends the launch",
        arguments: [LaunchRetries.Failure.launcherLostAfterFork, .workerKilled, .poolFailed])
    func fallBackOnce(failure: LaunchRetries.Failure) {
        var retries = fresh
        #expect(retries.decide(after: failure, on: .shared, now: at(1)) == .tryAgain(.own))
        #expect(retries.decide(after: failure, on: .own, now: at(2)) == .giveUp)
        #expect(retries.retries == 1)
    }

    @Test("every try counts, whatever its path: at most four in all")
    func bounded() {
        var retries = fresh
        #expect(retries.decide(after: .launcherLostBeforeWorker, on: .shared, now: at(1)) == .tryAgain(.shared))
        #expect(retries.decide(after: .launcherLostAfterFork, on: .shared, now: at(2)) == .tryAgain(.own))
        #expect(retries.decide(after: .launcherLostBeforeWorker, on: .own, now: at(3)) == .tryAgain(.own))
        #expect(retries.decide(after: .launcherLostBeforeWorker, on: .own, now: at(4)) == .giveUp)
        // Used up on the shared pool's launchers: no fallback beyond the bound either.
        var shared = fresh
        for attempt in 1...LaunchRetries.maximumRetries {
            #expect(shared.decide(after: .launcherLostBeforeWorker, on: .shared, now: at(attempt)) == .tryAgain(.shared))
        }
        #expect(shared.decide(after: .poolFailed, on: .shared, now: at(5)) == .giveUp)
    }

    @Test("a launcher's loss is told from a worker's failure by what was thrown")
    func classification() {
        let killedBefore = LauncherLost(launcher: 10, forkedWorker: false, fromOutside: true, what: "ended before it answered")
        let exitedBefore = LauncherLost(launcher: 10, forkedWorker: false, what: "ended before it answered")
        let killedAfter = LauncherLost(launcher: 10, forkedWorker: true, fromOutside: true, what: "ended before it answered")
        let unknown = LauncherLost(launcher: 10, forkedWorker: nil, fromOutside: true, what: "ended before it answered")
        #expect(LaunchRetries.Failure(killedBefore) == .launcherKilledBeforeWorker)
        #expect(LaunchRetries.Failure(exitedBefore) == .launcherLostBeforeWorker)
        #expect(LaunchRetries.Failure(killedAfter) == .launcherLostAfterFork)
        #expect(LaunchRetries.Failure(unknown) == .launcherLostAfterFork)
        #expect([killedBefore, exitedBefore, killedAfter, unknown].allSatisfy { LaunchRetries.Failure($0).isLauncherLost })
        #expect(killedBefore.description == "the launcher (pid 10) ended before it answered")
        let killed = AppExtensionError(.workerKilled, plugin: "org.example", "killed from outside")
        let crashed = AppExtensionError(.workerCrashed, plugin: "org.example", "crashed with SIGSEGV")
        let timedOut = AppExtensionError(.timedOut, plugin: "org.example", "no answer to the handshake")
        #expect(LaunchRetries.Failure(killed) == .workerKilled)
        #expect(LaunchRetries.Failure(crashed) == .workerFailed)
        #expect(LaunchRetries.Failure(timedOut) == .workerFailed)
        #expect(!LaunchRetries.Failure(crashed).isLauncherLost)
        #expect(LaunchRetries.Failure(SystemError("fork (pre-forked launcher)", Errno(rawValue: 11))) == .poolFailed)
    }

    @Test(
        "whether the launcher had forked the worker: its fork record says, once it said it was ready; before, it read no request"
    )
    func forkRecord() throws {
        let (record, descriptor) = try ForkRecord.create()
        descriptor.close()
        record.expect(request: 7)
        #expect(LauncherLost.ended(launcher: 10, forkRecord: record, request: 7).forkedWorker == false)
        // What the kernel stores in the launcher's fork (CLONE_PARENT_SETTID).
        let slot = try #require(UnsafeMutablePointer<Int32>(bitPattern: record.childPIDAddress(for: 7)))
        slot.pointee = 4242
        let forked = LauncherLost.ended(launcher: 10, forkRecord: record, request: 7, killed: true)
        #expect(forked.forkedWorker == true && LaunchRetries.Failure(forked) == .launcherLostAfterFork)
        // No record: nobody can say, so the launch is not tried on another launcher of its pool.
        #expect(LauncherLost.ended(launcher: 10, forkRecord: nil, request: 7).forkedWorker == nil)
        // Not ready yet, it had read no request: whatever a record holds.
        let unready = LauncherLost.ended(launcher: 10, forkRecord: nil, request: 7, wasReady: false, killed: true)
        #expect(unready.forkedWorker == false && LaunchRetries.Failure(unready) == .launcherKilledBeforeWorker)
        #expect(unready.description == "the launcher (pid 10) was killed before it was ready")
        let exited = LauncherLost.ended(launcher: 10, forkRecord: nil, request: 7, wasReady: false, killed: false)
        #expect(LaunchRetries.Failure(exited) == .launcherLostBeforeWorker)
    }
}
