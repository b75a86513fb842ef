import CPlugindShims
import Glibc
import PlugindWire

/// The worker's side of a `ForeignBlockDoorbell`: a thread that sleeps on the ring word and runs
/// each block rung, then answers with its number. It lives as long as the worker; between blocks
/// it sleeps in the kernel, so a worker whose host never rings pays a stack and nothing else.
enum BlockDoorbellThread {
    /// How long one sleep on the ring word lasts before the thread looks again (a ring wakes it
    /// at once; the bound only keeps the wait finite).
    static let sleepMicroseconds: UInt32 = 60_000_000

    /// Serves the doorbell at `doorbell` (128 bytes inside the data area, zeroed: nothing rung
    /// yet) from a thread of its own; `runBlock` runs one block of the frames rung and says
    /// whether it ran.
    static func start(at doorbell: UnsafeMutableRawPointer, runBlock: @escaping (UInt32) -> Bool) throws(ForeignAdapterFailure) {
        guard
            let thread = WorkerThread.start({
                serve(
                    ring: doorbell + ForeignBlockDoorbell.ringOffset, frames: doorbell + ForeignBlockDoorbell.framesOffset,
                    answer: doorbell + ForeignBlockDoorbell.answerOffset, runBlock: runBlock)
            })
        else {
            throw ForeignAdapterFailure(message: "the worker could not start the doorbell's thread (the limit on threads, or memory)")
        }
        pthread_detach(thread)
    }

    private static func serve(
        ring: UnsafeMutableRawPointer, frames: UnsafeMutableRawPointer, answer: UnsafeMutableRawPointer, runBlock: (UInt32) -> Bool
    ) {
        // 0, not the word as the thread first finds it: the host may have rung before this thread
        // first ran.
        var handled: UInt32 = 0
        while true {
            let rung = plugind_shim_shared_word_load(ring)
            guard rung != handled else {
                _ = plugind_shim_shared_word_wait(ring, handled, sleepMicroseconds)
                continue
            }
            handled = rung
            let ran = runBlock(plugind_shim_shared_word_load(frames))
            plugind_shim_shared_word_store(answer, ran ? rung : rung | ForeignBlockDoorbell.refusedBit)
            plugind_shim_shared_word_wake(answer)
        }
    }
}
