import PlugindSystem

/// plugind's launcher ended, or could not be asked, before it answered a request for a worker.
/// Never the plugin's doing: the launcher is plugind's own process and runs no plugin code.
struct LauncherLost: Error, Sendable, CustomStringConvertible {
    /// The launcher's pid.
    let launcher: Int32
    /// Whether it had forked the worker before it ended: false when the request never reached
    /// it, when it ended before it said it was ready (it reads no request before), or when its
    /// fork record holds no child for the request (the kernel writes the record before the
    /// child can run, see `ForkRecord`); nil when it has no record to say.
    let forkedWorker: Bool?
    /// Killed from outside (SIGKILL, which it never sends itself: another process, the kernel's
    /// out-of-memory killer), or gone before it could be asked; false when it exited or crashed
    /// on its own, or how it ended is not known.
    var fromOutside = false
    /// What became of it, after "the launcher (pid N)".
    let what: String

    var description: String { "the launcher (pid \(launcher)) \(what)" }

    /// Ended before it answered `request`: whether it forked the worker is what its fork record
    /// says, unless it never said it was ready.
    static func ended(_ launcher: LauncherProcess, request: UInt32, wasReady: Bool, killed: Bool) -> LauncherLost {
        ended(
            launcher: launcher.process.processIdentifier, forkRecord: launcher.forkRecord, request: request, wasReady: wasReady,
            killed: killed)
    }

    static func ended(launcher: Int32, forkRecord: ForkRecord?, request: UInt32, wasReady: Bool = true, killed: Bool = false)
        -> LauncherLost
    {
        guard wasReady else {
            return LauncherLost(
                launcher: launcher, forkedWorker: false, fromOutside: killed,
                what: killed ? "was killed before it was ready" : "ended before it was ready")
        }
        return LauncherLost(
            launcher: launcher, forkedWorker: forkRecord.map { $0.recordedChild(of: request) != nil }, fromOutside: killed,
            what: "ended before it answered")
    }
}

/// Whether a launch whose try failed to start its worker tries again, and through which pool: a
/// decision without system calls, which `WorkerLauncher.launch` carries out.
///
/// - plugind's launcher died before the worker existed: no plugin code ran, so another launcher
///   is tried, of the same pool (the shared pool's next, exec'd ahead or made on demand; or a
///   private pool's new one). Every worker still comes from a launcher of its own, so it keeps
///   an address-space layout of its own. A launcher killed from outside (or gone before it was
///   asked) costs up to `maximumLaunchersKilled` such tries: kills from outside come in storms
///   (the out-of-memory killer, a supervisor that kills what it does not know), which end every
///   launcher still starting. One that exited or crashed on its own costs one of
///   `maximumRetries`, so a broken installation fails after a few.
/// - The launcher died after forking the worker (or with no record to tell), the worker was
///   killed from outside before it was ready, or the shared pool failed otherwise: a private
///   pool is tried, once; a private pool's such failure ends the launch.
/// - The worker died or failed on its own (a crash, an exit, a refusal, its deadline): never
///   tried again, since its death may be the plugin's crash, which the crash log must see once.
///
/// No try of any kind starts once the launch's deadline (`launchTimeout` from its start) has
/// passed.
struct LaunchRetries: Sendable {
    /// How a try failed.
    enum Failure: Sendable, Equatable {
        /// plugind's launcher was killed from outside, or was gone when asked, before the worker
        /// existed.
        case launcherKilledBeforeWorker
        /// plugind's launcher exited or crashed on its own before the worker existed.
        case launcherLostBeforeWorker
        /// plugind's launcher died after it forked the worker (which the host kills), or with no
        /// fork record to say whether it had.
        case launcherLostAfterFork
        /// The worker, or the spare it was to become, was killed from outside before it was
        /// ready (`workerKilled`: never sent by anything inside it).
        case workerKilled
        /// The pool could not start the worker otherwise (a fork or exec refused, the pool
        /// stopped).
        case poolFailed
        /// The worker died or failed on its own.
        case workerFailed

        /// The failure `error`, thrown by a try or returned as its cause, is.
        init(_ error: any Error) {
            if let lost = error as? LauncherLost {
                switch (lost.forkedWorker, lost.fromOutside) {
                case (false, true): self = .launcherKilledBeforeWorker
                case (false, false): self = .launcherLostBeforeWorker
                default: self = .launcherLostAfterFork
                }
            } else if let error = error as? AppExtensionError {
                self = error.code == .workerKilled ? .workerKilled : .workerFailed
            } else {
                self = .poolFailed
            }
        }

        /// Whether it was the death of plugind's launcher.
        var isLauncherLost: Bool {
            self == .launcherKilledBeforeWorker || self == .launcherLostBeforeWorker || self == .launcherLostAfterFork
        }
    }

    /// Where a try starts its worker.
    enum Path: Sendable, Equatable {
        /// The host's shared pool.
        case shared
        /// A private pool, whose one launcher forks this worker.
        case own
    }

    enum Decision: Sendable, Equatable {
        case tryAgain(Path)
        case giveUp
    }

    /// How many tries may follow the first for launchers that ended on their own, and for the
    /// fallback to a private pool.
    static let maximumRetries = 3
    /// How many tries may follow the first for launchers killed from outside before the worker
    /// existed.
    static let maximumLaunchersKilled = 32

    let deadline: ContinuousClock.Instant
    /// Tries after the first that count toward `maximumRetries`.
    private(set) var retries = 0
    /// Tries after the first made because a launcher was killed from outside.
    private(set) var launchersKilled = 0

    init(deadline: ContinuousClock.Instant) {
        self.deadline = deadline
    }

    /// Every try so far, the first included.
    var tries: Int { 1 + retries + launchersKilled }

    /// What follows a try on `path` that failed with `failure`, at `now`.
    mutating func decide(after failure: Failure, on path: Path, now: ContinuousClock.Instant) -> Decision {
        guard now < deadline else { return .giveUp }
        switch failure {
        case .launcherKilledBeforeWorker:
            guard launchersKilled < Self.maximumLaunchersKilled else { return .giveUp }
            launchersKilled += 1
            return .tryAgain(path)
        case .launcherLostBeforeWorker:
            guard retries < Self.maximumRetries else { return .giveUp }
            retries += 1
            return .tryAgain(path)
        case .launcherLostAfterFork, .workerKilled, .poolFailed:
            guard path == .shared, retries < Self.maximumRetries else { return .giveUp }
            retries += 1
            return .tryAgain(.own)
        case .workerFailed:
            return .giveUp
        }
    }
}
