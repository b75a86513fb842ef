import CPlugindShims
import Glibc
import PlugindSystem
import PlugindTypes
import PlugindWire
import Synchronization

/// The host's side of a LADSPA instance's `ForeignBlockDoorbell`: runs a block on the calling
/// thread without the request path — it writes the frame count, rings, and waits for the answer
/// word, polling it for `BusyPolling.window` (where polling pays) and then sleeping on it. A real-
/// time audio thread calls this; it never waits on the event loop or a task.
///
/// The worker writes the answer word, so nothing there is trusted beyond "this block ran": the
/// deadline bounds every wait, a worker that misses it is stopped (a LADSPA run cannot be
/// cancelled), and a worker that ended is seen within `endCheckInterval` of being reaped.
package final class BlockDoorbell: Sendable {
    /// How long one sleep on the answer word lasts before the caller looks whether the worker
    /// ended (a crash rings nothing).
    static let endCheckInterval: Duration = .milliseconds(1)

    private let channel: WorkerChannel
    /// Keeps the data area mapped, and with it the three words below.
    private let memory: SharedMemory
    // Shared memory, touched only through the shims' atomic loads and stores.
    nonisolated(unsafe) private let ringWord: UnsafeMutableRawPointer
    nonisolated(unsafe) private let framesWord: UnsafeMutableRawPointer
    nonisolated(unsafe) private let answerWord: UnsafeMutableRawPointer
    /// The last number rung; held while a block runs, so that a second thread is refused.
    private let lastRung = Mutex<UInt32>(0)

    /// The doorbell at `offset` in the channel's data area; nil when the worker named a place
    /// that is not one (`ForeignBlockDoorbell.isPlace`).
    package init?(channel: WorkerChannel, offset: UInt64) {
        guard let area = channel.sharedData, ForeignBlockDoorbell.isPlace(offset, inAreaOf: area.count),
            let doorbell = area.memory.bytes(at: area.offset + Int(offset), count: Int(ForeignBlockDoorbell.bytes))?.baseAddress
        else { return nil }
        self.channel = channel
        memory = area.memory
        ringWord = doorbell + ForeignBlockDoorbell.ringOffset
        framesWord = doorbell + ForeignBlockDoorbell.framesOffset
        answerWord = doorbell + ForeignBlockDoorbell.answerOffset
    }

    /// Runs one block of `frames` and returns when the worker has run it.
    ///
    /// - Throws: `AppExtensionError`: `timedOut` when `timeout` passed first (the worker is
    ///   stopped); the worker's end (`workerCrashed`, …) when it ended; `pluginError` when the
    ///   worker refused the block; `invalidArguments` while another thread runs a block of it.
    package func run(frames: UInt32, timeout: Duration) throws(AppExtensionError) {
        let result: Result<Void, AppExtensionError>? = lastRung.withLockIfAvailable { lastRung in
            let sequence = ForeignBlockDoorbell.sequence(after: lastRung)
            lastRung = sequence
            return ring(sequence, frames: frames, timeout: timeout)
        }
        guard let result else {
            throw AppExtensionError(.invalidArguments, plugin: channel.pluginIdentifier, "runs a block on another thread already")
        }
        try result.get()
    }

    private func ring(_ sequence: UInt32, frames: UInt32, timeout: Duration) -> Result<Void, AppExtensionError> {
        plugind_shim_shared_word_store(framesWord, frames)
        plugind_shim_shared_word_store(ringWord, sequence)
        plugind_shim_shared_word_wake(ringWord)
        let started = MonotonicInstant.now
        let deadline = started + timeout
        let pollUntil = BusyPolling.isWorthwhile || BusyPolling.yieldsToPeer ? started + BusyPolling.window : started
        while true {
            let seen = plugind_shim_shared_word_load(answerWord)
            switch ForeignBlockDoorbell.answer(seen, to: sequence) {
            case .ran: return .success(())
            case .refused:
                return .failure(
                    AppExtensionError(
                        .pluginError, plugin: channel.pluginIdentifier,
                        "refused a block of \(frames) frames (its instance is gone or its ports hold fewer)"))
            case .pending: break
            }
            let now = MonotonicInstant.now
            if now >= deadline {
                channel.stop(.missedBlockDeadline(timeout))
                return .failure(
                    AppExtensionError(
                        .timedOut, plugin: channel.pluginIdentifier,
                        "did not finish a block of \(frames) frames within \(DurationText(timeout)); its worker was stopped"))
            }
            // Looking on through a contended yield, unlike a request's poll: the block's
            // effects run one after another, so the processor the yield gave away went to the
            // worker this thread waits for, or to work that does not hold the block up.
            if now < pollUntil {
                _ = BusyPolling.yieldAndKeepLooking()
                continue
            }
            let sleep = min(now.duration(to: deadline), Self.endCheckInterval)
            _ = plugind_shim_shared_word_wait(answerWord, seen, UInt32(max(sleep / .microseconds(1), 1)))
            if plugind_shim_shared_word_load(answerWord) == seen, let ended = channel.endedError { return .failure(ended) }
        }
    }
}
