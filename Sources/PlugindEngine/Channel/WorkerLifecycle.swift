import PlugindWire

extension ChannelProtocol {
    /// Where the worker is in its life, as the host sees it: the one record of it, which the
    /// protocol's inputs move forward and `WorkerChannel` reads.
    enum Lifecycle {
        /// Launched; its answer to the handshake not read yet.
        case launching
        /// It answered the handshake.
        case ready(Ready)
        /// The host ends it: asked it to (`invalidate`), killed it for a cause (`stop`), or both;
        /// its exit is not reaped yet.
        case ending(Ending)
        /// Reaped; its end is told once the stack of its crash is named. Nothing can stop it any
        /// more.
        case reaped(Ending)
        /// Its end was told and everything waiting failed: how it ended, kept for as long as the
        /// channel is.
        case ended(WorkerTermination, Ending)

        /// The worker's answer to the handshake, kept after it ends: a worker that only inspects
        /// or probes may exit before anyone asked for its answer.
        var ready: Ready? {
            switch self {
            case .launching: nil
            case .ready(let ready): ready
            case .ending(let ending), .reaped(let ending), .ended(_, let ending): ending.ready
            }
        }

        /// Whether the worker answered the handshake: `ready != nil` without copying the answer,
        /// for every request asks.
        var hasAnsweredHandshake: Bool {
            switch self {
            case .launching: false
            case .ready: true
            case .ending(let ending), .reaped(let ending), .ended(_, let ending): ending.ready != nil
            }
        }

        /// The host asked the worker to end (`invalidate`), before or after it did.
        var isInvalidated: Bool { ending?.invalidated ?? false }

        /// Why the host killed the worker, if it did.
        var stopCause: WorkerChannel.StopCause? { ending?.stopCause }

        var termination: WorkerTermination? {
            if case .ended(let termination, _) = self { return termination }
            return nil
        }

        var isEnded: Bool { termination != nil }

        /// Neither stopped nor reaped: what the worker sends is believed, and a stop kills it.
        /// (After a stop nothing more from it is believed, not even a later answer.)
        var isRunning: Bool {
            switch self {
            case .launching, .ready: true
            case .ending(let ending): ending.stopCause == nil
            case .reaped, .ended: false
            }
        }

        /// What is known of a worker that is ending or ended.
        var ending: Ending? {
            switch self {
            case .launching, .ready: nil
            case .ending(let ending), .reaped(let ending), .ended(_, let ending): ending
            }
        }

        /// The same life, past the point where it ends: the answer it gave kept.
        var asEnding: Ending { ending ?? Ending(ready: ready) }
    }

    /// What is known of a worker the host is ending, or that ended.
    struct Ending {
        var ready: Ready?
        var invalidated = false
        var stopCause: WorkerChannel.StopCause?
    }

    /// One step of ending a worker, as data: the protocol returns the list
    /// (`Effect.tearDown`), and `WorkerChannel.tearDown` carries it out in order.
    package enum TeardownStep: Equatable, Sendable {
        /// Writes `shutdown`, after every frame queued before it: the worker ends its plugin and
        /// exits.
        case sendShutdown
        /// Closes the pipe to the worker once everything queued for it is written, so that it
        /// reads end-of-file after the last frame.
        case closeInputWhenWritten
        /// Gives the worker this long to exit: the steps after it run when the protocol's timer
        /// (`Timer.exitGrace`) fires before the worker is reaped, and not at all otherwise.
        case wait(Duration)
        /// Reads how long the worker's threads waited for a processor, while they are still
        /// there: whether the machine's load explains the timeout it is stopped for.
        case readProcessorWait
        /// Sends SIGKILL.
        case kill
        /// The worker is reaped: the pipes, its pidfd and its control group are let go.
        case release
    }

    /// How the host ends a worker it asks to end (`invalidate`, for its owner or the host
    /// shutting down): `shutdown`, end-of-file after it, and SIGKILL if it has not exited after
    /// `grace`.
    static func teardown(invalidatedWith grace: Duration) -> [TeardownStep] {
        [.sendShutdown, .closeInputWhenWritten, .wait(grace), .kill]
    }

    /// How the host ends a worker it stops for `cause`: SIGKILL at once, after reading its waits
    /// for a processor when the cause is a timeout.
    static func teardown(stoppedFor cause: WorkerChannel.StopCause) -> [TeardownStep] {
        cause.timeoutWindow == nil ? [.kill] : [.readProcessorWait, .kill]
    }

    /// What is left once the worker is reaped, however it ended.
    static let teardownOnceReaped: [TeardownStep] = [.release]
}
