import CPlugindShims
import Glibc

/// Bounded busy polling: a thread that expects a message within microseconds polls for it, for
/// at most `window`, before it sleeps. On a small virtual machine a sleeping thread woken from
/// another processor takes tens of microseconds to run again, several times what a small
/// request costs; a thread that is still polling takes it at once (Documentation/Performance.md,
/// "Why the code is built this way", has the round trip with and without). Polling yields the
/// processor on every turn and stops when a yield gave it away, and it is used only where it
/// pays: where the process may run on more than one processor, and only while the host awaits
/// at most `awaitedLimit` answers on its event loop — the host polls then, and marks the
/// requests it sends (`FrameFlags.pollForNext`) so that the worker's reading thread polls
/// too. Under load, polling threads would take processors from the busy ones and cost
/// throughput.
/// On a process confined to one processor, a caller that awaits its answer alone yields the
/// processor between looks instead (`yieldsToPeer`).
package enum BusyPolling {
    /// How long a side polls after its last message before it sleeps.
    package static let window: Duration = .microseconds(50)

    /// The most answers a host's event loop may await and still poll.
    package static let awaitedLimit = 2

    /// Yields the processor between two polls; false when another thread took it meanwhile (the
    /// yield returned after `contendedYield`): the processors are busy, and polling would take
    /// them from work that needs them, so the caller stops polling and sleeps. Yielding alone
    /// is not enough: with many more workers than processors, polling that only yields still
    /// takes processor time the busy workers need.
    package static func yieldUncontended() -> Bool {
        let before = MonotonicInstant.now
        sched_yield()
        return before.duration(to: .now) < contendedYield
    }

    /// Yields the processor between two looks for an answer on a process confined to one
    /// processor, and keeps looking whatever the yield did (`yieldsToPeer`): there a yield gives
    /// the processor to whichever thread is ready to run — the worker, when it shares the
    /// processor, which then answers before the caller looks again — so looking takes it from
    /// nobody; and a worker kept on another processor (a host pinned apart from its workers) is
    /// caught answering as when polling.
    package static func yieldAndKeepLooking() -> Bool {
        sched_yield()
        return true
    }

    /// A yield that took longer gave the processor to another thread.
    static let contendedYield: Duration = .microseconds(5)

    /// Whether a caller on a process confined to one processor looks for its answer, yielding
    /// the processor between looks, before it sleeps (`yieldAndKeepLooking`). There, sleeping
    /// costs a third switch: the worker, then the host's event loop that reads the answer, then
    /// the caller; yielding lets the worker run at once and the caller read the answer itself when
    /// the worker sleeps again — the two switches a raw pipe costs (Performance.md has the
    /// round trip on one processor with and without). Off with `PLUGIND_BUSY_POLLING=0`, as
    /// polling is.
    package static let yieldsToPeer = plugind_shim_allowed_processor_count() == 1 && isAllowed

    /// Whether polling is on: where this process may run on more than one processor (on one, a
    /// thread polling as here, until a yield gives the processor away, only delays the process
    /// it waits for), unless the environment turns it off.
    package static let isWorthwhile = plugind_shim_allowed_processor_count() > 1 && isAllowed

    /// Unless the environment says `PLUGIND_BUSY_POLLING=0` (which a host passes on to its
    /// workers): on a machine where every processor-microsecond counts more than latency.
    private static let isAllowed = getenv(switchName).map { String(cString: $0) != "0" } ?? true

    /// The environment variable that turns polling off with "0".
    package static let switchName = "PLUGIND_BUSY_POLLING"
}
