import PlugindEngine

/// The body of the launch-pool-state fuzz target and of the test that replays it: any order of
/// what happens to a launch pool (launches, launchers that get ready, answer, die or are killed
/// mid-request, spares that get ready, die, are reserved, handed or given back, changes of the
/// host's mounts, priming, settling, the stop), driven through the pool's state machine
/// (`LaunchPoolState`) as `LaunchPool` drives it, carrying out its effects over fake processes.
///
/// Checked on every step: no spare is handed out twice (or handed and ended), no effect names a
/// launcher, spare or primed worker that has ended, no launch or waiter completes twice, a
/// settled pool has no settle waiter left. After the stop and what it leaves to the shell (held
/// launchers let go, spares being read or reserved coming back, jobs run): every launcher is
/// reaped, every spare ended or handed, every primed worker ended or taken, every launch and
/// waiter completed.
package enum LaunchPoolStateFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    /// What one input reached: for the tests, which check that the seeds reach what they mean to.
    package struct Reached: Equatable, Sendable {
        package var forked = 0
        package var launchersLost = 0
        package var sparesHanded = 0
        package var sparesEnded = 0
        package var primed = 0
        package var settled = 0

        package init() {}
    }

    typealias Machine = LaunchPoolState
    typealias Effect = LaunchPoolState.Effect

    private struct Input {
        var bytes: ArraySlice<UInt8>
        mutating func next() -> UInt8 { bytes.popFirst() ?? 0 }
        var isEmpty: Bool { bytes.isEmpty }
    }

    /// A loop job the shell scheduled, run when the input says.
    private enum Job: Equatable {
        case askForSpare(UInt32)
        case makeIdleLauncher
        case checkQuietMoment(UInt64)
    }

    /// The shell, over fake processes: what lives, what ended, what waits.
    private struct Shell {
        var machine: Machine
        var now = ContinuousClock.Instant.now
        var traffic: UInt64 = 0
        var reached = Reached()

        var nextLauncher: UInt64 = 0
        var launchersStarted: Set<UInt64> = []
        var socketsClosed: Set<UInt64> = []
        var launchersReaped: Set<UInt64> = []
        /// Launchers taken for a launch whose request is not sent yet.
        var held: [UInt64] = []

        var nextPid: Int32 = 1000
        var sparesAdopted: Set<UInt64> = []
        var sparesGone: Set<UInt64> = []
        var receiving: [UInt64] = []
        var reserved: [UInt64] = []

        var launchesRegistered: Set<UInt32> = []
        var launchesCompleted: Set<UInt32> = []
        var waiters: Set<UInt64> = []
        var waitersResumed: Set<UInt64> = []
        var settleWaiters: Set<UInt64> = []

        var primedMade: Set<UInt64> = []
        var primedGone: Set<UInt64> = []
        var primeSerials: Set<UInt64> = []
        var primeSerialsGone: Set<UInt64> = []
        var mountTableClosed = false
        var jobs: [Job] = []

        init(forks: Machine.Forks) {
            machine = Machine(forks: forks)
        }

        func violation(_ what: String) -> InvariantViolation { InvariantViolation(description: what) }

        // MARK: Effects

        mutating func apply(_ effects: [Effect]) throws {
            for effect in effects { try apply(effect) }
            try check()
        }

        mutating func apply(_ effect: Effect) throws {
            switch effect {
            case .scheduleIdleLauncher:
                guard !jobs.contains(.makeIdleLauncher) else { throw violation("the idle launcher's making scheduled twice") }
                jobs.append(.makeIdleLauncher)
            case .closeLauncherSocket(let id):
                guard launchersStarted.contains(id), !launchersReaped.contains(id) else {
                    throw violation("socket of launcher \(id) closed, which is not alive")
                }
                guard socketsClosed.insert(id).inserted else { throw violation("socket of launcher \(id) closed twice") }
            case .reapLauncher(let id):
                guard launchersStarted.contains(id) else { throw violation("launcher \(id) reaped, never started") }
                guard socketsClosed.contains(id) else { throw violation("launcher \(id) reaped with its socket open") }
                guard launchersReaped.insert(id).inserted else { throw violation("launcher \(id) reaped twice") }
            case .reapLostChild(let id, _):
                guard launchersStarted.contains(id), !launchersReaped.contains(id) else {
                    throw violation("the lost child of launcher \(id) looked for after it was reaped")
                }
            case .completeLaunch(let request, let outcome):
                guard launchesRegistered.contains(request) else { throw violation("launch \(request) completed, never registered") }
                guard launchesCompleted.insert(request).inserted else { throw violation("launch \(request) completed twice") }
                switch outcome {
                case .forked: reached.forked += 1
                case .launcherEnded(let id, _, _):
                    guard launchersStarted.contains(id) else { throw violation("launch \(request) lost to unknown launcher \(id)") }
                    reached.launchersLost += 1
                default: break
                }
            case .resumeRequestWaiters(let ids), .resumeSettleWaiters(let ids):
                for id in ids {
                    guard waiters.contains(id) else { throw violation("waiter \(id) resumed, never waiting") }
                    guard waitersResumed.insert(id).inserted else { throw violation("waiter \(id) resumed twice") }
                    settleWaiters.remove(id)
                }
                if case .resumeSettleWaiters = effect { reached.settled += 1 }
            case .askForSpare(let request):
                jobs.append(.askForSpare(request))
            case .adoptSpare:
                // Carried out by `answer`, which chooses whether the adoption works.
                break
            case .discardSpare:
                break
            case .endSpare(let id):
                guard sparesAdopted.contains(id) else { throw violation("spare \(id) ended, never adopted") }
                guard sparesGone.insert(id).inserted else { throw violation("spare \(id) ended after it was ended or handed") }
                reached.sparesEnded += 1
            case .checkQuietMoment(let serial, _):
                jobs.append(.checkQuietMoment(serial))
            case .dropPrimeWaiting(let serial):
                try primeGone(serial)
            case .prime(let serial):
                try primeGone(serial)
            case .endPrimed(let id):
                guard primedMade.contains(id) else { throw violation("primed worker \(id) ended, never made") }
                guard primedGone.insert(id).inserted else { throw violation("primed worker \(id) ended twice") }
            case .closeMountTable:
                guard !mountTableClosed else { throw violation("mount table closed twice") }
                mountTableClosed = true
            }
        }

        mutating func primeGone(_ serial: UInt64) throws {
            guard primeSerials.contains(serial) else { throw violation("plan \(serial) primed or dropped, never waiting") }
            guard primeSerialsGone.insert(serial).inserted else { throw violation("plan \(serial) primed or dropped twice") }
        }

        /// A spare leaves the pool for a launch or a primed worker.
        mutating func handed(_ id: UInt64) throws {
            guard sparesAdopted.contains(id) else { throw violation("spare \(id) handed, never adopted") }
            guard sparesGone.insert(id).inserted else { throw violation("spare \(id) handed twice (or after it ended)") }
            reached.sparesHanded += 1
        }

        /// What holds after every step.
        func check() throws {
            let slots = machine.slotSpares
            guard slots.count <= Machine.spareCapacity, Set(slots).count == slots.count else {
                throw violation("slots \(slots) hold too many, or one twice")
            }
            for id in machine.knownSpares where !sparesAdopted.contains(id) || sparesGone.contains(id) {
                throw violation("the pool holds spare \(id), which is not alive")
            }
            for id in machine.knownLaunchers where launchersReaped.contains(id) || !launchersStarted.contains(id) {
                throw violation("the pool knows launcher \(id), which is not alive")
            }
            if let primed = machine.primed, !primedMade.contains(primed) || primedGone.contains(primed) {
                throw violation("the pool's primed worker \(primed) is not alive")
            }
            if machine.isSettled && !settleWaiters.isEmpty {
                throw violation("settled with settle waiters \(settleWaiters.sorted()) left")
            }
        }

        // MARK: What the shell does

        mutating func startLauncher() -> UInt64 {
            nextLauncher += 1
            launchersStarted.insert(nextLauncher)
            machine.launcherStarted(nextLauncher, pid: Int32(nextLauncher))
            return nextLauncher
        }

        /// `LaunchPool.takeLauncher`: nil when starting one failed, or the pool stopped meanwhile.
        mutating func takeLauncher(startFails: Bool) throws -> UInt64? {
            let (taken, effects) = machine.takeLauncher()
            try apply(effects)
            if let taken { return taken }
            guard !startFails else { return nil }
            let made = startLauncher()
            guard machine.forks == .many else { return made }
            let (kept, offered) = machine.offerIdle(made)
            try apply(offered)
            return kept
        }

        mutating func finished(with id: UInt64) throws {
            try apply(machine.finished(with: id))
        }

        mutating func run(_ job: Job, _ input: inout Input) throws {
            switch job {
            case .askForSpare(let request):
                // Rarely, the launcher cannot be made, or the request not sent.
                let choice = input.next()
                if let launcher = try takeLauncher(startFails: choice & 7 == 7) {
                    let recorded = machine.askingForSpare(launcher, request: request)
                    if recorded && choice & 0x18 != 0x18 {
                        try apply(machine.requestSent(toLauncher: Int32(launcher)))
                        return
                    }
                    if recorded { try apply(machine.requestNotSent(request)) }
                    try finished(with: launcher)
                }
                try apply(machine.spareRequestFailed(request))
            case .makeIdleLauncher:
                guard machine.startingIdleLauncher() else { return }
                let made = input.next() & 7 == 7 ? nil : startLauncher()
                try apply(machine.idleLauncherMade(made))
            case .checkQuietMoment(let serial):
                traffic += UInt64(input.next() & 1)
                let effects = machine.checkQuietMoment(serial, traffic: traffic, awaitedAnswers: 0, now: now)
                try apply(effects)
                if effects.contains(.prime(serial)) { try prime(input.next()) }
            }
        }

        /// `LaunchPool.prime`: on a ready spare, if there is one.
        mutating func prime(_ choice: UInt8) throws {
            guard let (spare, next) = machine.takeSpareForPriming() else {
                try apply(machine.primingFailed())
                return
            }
            try handed(spare)
            try apply(next)
            if choice & 7 == 7 {
                // The worker could not be started or watched.
                try apply(machine.primingFailed())
                return
            }
            let (id, effects) = machine.primedWorkerReady()
            primedMade.insert(id)
            reached.primed += 1
            try apply(effects)
        }

        /// A launcher answers one of its requests (a pid, or a fork that failed).
        mutating func answer(_ input: inout Input) throws {
            let asked = machine.askedLaunchers
            guard !asked.isEmpty else { return }
            let launcher = asked[Int(input.next()) % asked.count]
            let sorted = machine.requests(of: launcher).sorted()
            let request = sorted[Int(input.next()) % sorted.count]
            let choice = input.next()
            nextPid += 1
            // Rarely a fork that failed, or a spare that cannot be adopted.
            let value: Int32 = choice & 7 == 7 ? -11 : nextPid
            guard let effects = machine.launcherAnswered(launcher, request: request, value: value) else {
                throw violation("launcher \(launcher) asked \(request) could not answer it")
            }
            try apply(effects)
            guard effects.contains(.adoptSpare(pid: value)) else { return }
            if choice & 0x38 == 0x38 {
                try apply(machine.spareNotAdopted())
                return
            }
            let (id, adopted) = machine.spareAdopted(watched: choice & 0x40 == 0)
            guard sparesAdopted.insert(id).inserted else { throw violation("spare id \(id) given twice") }
            try apply(adopted)
        }

        func pick<T>(_ values: [T], _ byte: UInt8) -> T? {
            values.isEmpty ? nil : values[Int(byte) % values.count]
        }

        mutating func step(_ operation: UInt8, _ input: inout Input) throws {
            switch operation % 20 {
            case 0:
                // A launch takes a launcher.
                if let launcher = try takeLauncher(startFails: input.next() & 7 == 7) { held.append(launcher) }
            case 1:
                // A launch sends its request to the launcher it took, or cannot.
                guard !held.isEmpty else { return }
                let launcher = held.remove(at: Int(input.next()) % held.count)
                guard let request = machine.registerLaunch() else {
                    try finished(with: launcher)
                    return
                }
                launchesRegistered.insert(request)
                if machine.asking(launcher, request: request) && input.next() & 3 != 3 {
                    try apply(machine.requestSent(toLauncher: Int32(launcher)))
                } else {
                    try apply(machine.requestNotSent(request))
                    try finished(with: launcher)
                }
            case 2:
                try answer(&input)
            case 3:
                // A launcher says it is ready (one let go may still have its message in flight).
                guard let launcher = pick(machine.knownLaunchers.sorted(), input.next()) else { return }
                try apply(machine.launcherSaidReady(launcher, startTime: .milliseconds(Int(input.next()))))
            case 4:
                // A launcher's process ends: killed from outside, or on its own.
                guard let launcher = pick(machine.knownLaunchers.sorted(), input.next()) else { return }
                switch machine.launcherProcessExited(launcher) {
                case .notWatched: break
                case .reaped(let effects): try apply(effects)
                case .running: try apply(machine.launcherEnded(launcher, killed: input.next() & 1 == 0))
                }
            case 5:
                try apply(machine.replenish(retryingAfterFailure: input.next() & 1 == 0))
            case 6, 7:
                // The loop runs a job.
                guard !jobs.isEmpty else { return }
                let job = jobs.remove(at: Int(input.next()) % jobs.count)
                try run(job, &input)
            case 8:
                guard let spare = pick(machine.knownSpares.sorted(), input.next()) else { return }
                if machine.spareSocketReadable(spare) { receiving.append(spare) }
                try check()
            case 9:
                guard !receiving.isEmpty else { return }
                try apply(machine.spareReadinessRead(receiving.removeFirst()))
            case 10:
                guard let spare = pick(machine.knownSpares.sorted(), input.next()) else { return }
                if let effects = machine.spareDied(spare) { try apply(effects) }
            case 11:
                let (spare, effects) = machine.spareForLaunch()
                if let spare { try handed(spare) }
                try apply(effects)
            case 12:
                if let spare = machine.reserveSpare() { reserved.append(spare) }
                try check()
            case 13:
                guard !reserved.isEmpty else { return }
                let spare = reserved.remove(at: Int(input.next()) % reserved.count)
                switch input.next() % 3 {
                case 0:
                    machine.reservedSpareTaken(spare)
                    try handed(spare)
                    try check()
                case 1: try apply(machine.putBack(spare, watched: true))
                default: try apply(machine.putBack(spare, watched: false))
                }
            case 14:
                try apply(machine.mountsChanged())
            case 15:
                now = now.advanced(by: .microseconds(100 * Int(input.next())))
                traffic += UInt64(input.next() & 3)
                if let (serial, effects) = machine.primeAsked(
                    now: now, traffic: traffic, quiet: .microseconds(200), atMost: .milliseconds(5), backToBack: .milliseconds(5))
                {
                    primeSerials.insert(serial)
                    try apply(effects)
                }
            case 16:
                switch input.next() % 4 {
                case 0:
                    try apply(machine.cancelPrimeWaiting())
                case 1:
                    if let primed = machine.takePrimed() {
                        guard primedGone.insert(primed).inserted else { throw violation("primed worker \(primed) taken twice") }
                    }
                    try check()
                case 2:
                    guard let primed = machine.primed else { return }
                    try apply(machine.primedDied(primed) ?? [])
                default:
                    now = now.advanced(by: .milliseconds(Int(input.next() & 7)))
                }
            case 17:
                let (waiter, effects) = machine.settle()
                waiters.insert(waiter)
                settleWaiters.insert(waiter)
                try apply(effects)
            case 18:
                guard let launcher = pick(machine.knownLaunchers.sorted(), input.next()) else { return }
                if let waiter = machine.awaitRequest(toLauncher: Int32(launcher)) { waiters.insert(waiter) }
                try check()
            default:
                // The pool stops (rarely: most of the input runs on a live pool).
                if input.next() == 0 { try apply(machine.stop()) }
            }
        }

        /// Stops the pool and carries out what the shell still holds, then checks that everything
        /// ended.
        mutating func finish() throws {
            try apply(machine.stop())
            for launcher in held { try finished(with: launcher) }
            held.removeAll()
            for spare in receiving { try apply(machine.spareReadinessRead(spare)) }
            receiving.removeAll()
            for spare in reserved { try apply(machine.putBack(spare, watched: true)) }
            reserved.removeAll()
            var drain = Input(bytes: [])
            while !jobs.isEmpty { try run(jobs.removeFirst(), &drain) }
            // Launchers let go meanwhile are reaped when they exit.
            for launcher in machine.knownLaunchers.sorted() {
                if case .reaped(let effects) = machine.launcherProcessExited(launcher) { try apply(effects) }
            }
            guard machine.knownLaunchers.isEmpty, launchersReaped == launchersStarted else {
                throw violation(
                    "after the stop, launchers \(launchersStarted.subtracting(launchersReaped).sorted()) were never reaped")
            }
            guard machine.knownSpares.isEmpty, sparesGone == sparesAdopted else {
                throw violation("after the stop, spares \(sparesAdopted.subtracting(sparesGone).sorted()) never ended")
            }
            guard primedGone == primedMade else {
                throw violation("after the stop, primed workers \(primedMade.subtracting(primedGone).sorted()) never ended")
            }
            guard launchesCompleted == launchesRegistered else {
                throw violation("launches \(launchesRegistered.subtracting(launchesCompleted).sorted()) never completed")
            }
            guard waitersResumed == waiters else {
                throw violation("waiters \(waiters.subtracting(waitersResumed).sorted()) never resumed")
            }
            guard primeSerialsGone == primeSerials else {
                throw violation("plans \(primeSerials.subtracting(primeSerialsGone).sorted()) were never primed or dropped")
            }
            guard mountTableClosed else { throw violation("the mount table was never closed") }
        }
    }

    /// Runs `input`: its first byte chooses how many children a launcher forks (and whether the
    /// pool starts with its idle launcher, as a shared pool does), each following operation byte
    /// an event, with its arguments.
    @discardableResult
    package static func run(_ bytes: [UInt8]) throws -> Reached {
        var input = Input(bytes: bytes[...])
        let first = input.next()
        var shell = Shell(forks: first & 1 == 0 ? .one : .many)
        if first & 2 == 0 {
            let launcher = shell.startLauncher()
            try shell.apply(shell.machine.offerIdle(launcher).effects)
        }
        var steps = 0
        while !input.isEmpty {
            let operation = input.next()
            steps += 1
            do {
                try shell.step(operation, &input)
            } catch let violation as InvariantViolation {
                throw InvariantViolation(description: "step \(steps) (operation \(operation % 20)): \(violation)")
            }
        }
        try shell.finish()
        return shell.reached
    }

    /// Seeds for the corpus: histories that reach the cases the soak found (a launcher killed
    /// mid-request, a mount change while a spare prepares, priming, settling), encoded as the
    /// fuzz input format.
    package static func seeds() -> [[UInt8]] {
        // Operations: 0 take a launcher, 1 send its request, 2 answer, 3 ready, 4 exit, 5
        // replenish, 6 run a job, 8 spare socket readable, 9 readiness read, 10 spare dies,
        // 11 spare for a launch, 12 reserve, 13 reservation, 14 mounts changed, 15 prime asked,
        // 16 priming, 17 settle, 19 stop.
        let ready: [UInt8] = [3, 0, 20]
        return [
            // A launch answered by the idle launcher (.one).
            [0] + ready + [0, 0, 1, 0, 0, 2, 0, 0, 0],
            // The launcher killed mid-request; the retry's launcher answers.
            [0] + ready + [0, 0, 1, 0, 0, 4, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0],
            // A spare asked for, adopted and preparing, then the mounts change; then ready.
            [0] + ready + [5, 0, 6, 0, 0, 2, 0, 0, 0, 14, 8, 0, 11],
            // A spare adopted ready; a launch's plan is primed on it at the quiet moment.
            [0] + ready + [5, 0, 6, 0, 0, 2, 0, 0, 64, 15, 0, 0, 6, 2, 0, 0],
            // Settling: two spares asked, adopted, ready; the launchers that forked them reaped;
            // the idle one made, then ready.
            [0, 17, 6, 0, 0, 2, 0, 0, 0, 6, 1, 0, 2, 0, 0, 0, 6, 0, 0, 8, 0, 9, 8, 1, 9, 4, 0, 4, 0] + ready,
            // With `Forks.many`: launches and a spare from one launcher, a reservation, a stop.
            [1] + ready + [0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 5, 0, 6, 0, 0, 2, 0, 0, 4, 12, 19, 0],
        ]
    }
}
