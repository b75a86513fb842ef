import PlugindSystem
import PlugindWire
import Synchronization

/// What the host reads from one worker: frames from its pipe, decoded, and its output (stdout and
/// stderr share a pipe). Reads are system calls, so they hold this type's lock, never the lock
/// that callers sending requests need. `WorkerChannel` dispatches what is read.
///
/// Once the worker's `ready` listed `ProtocolFeature.ring` (`useRing`), its frames come from the
/// worker → host ring, and the pipe brings only wake-ups and what the worker's signal handlers
/// write (`fatalSignal`, `stackReport`); a wake-up says to read the ring.
final class WorkerInput: Sendable {
    /// The worker's end of the protocol, toward the host.
    let frames: FileDescriptor
    /// The worker's stdout and stderr.
    let output: FileDescriptor

    private struct Reading {
        /// The worker's frames: its pipe, then its ring.
        var source: FrameSource
        /// End of file was read (or the pipe failed).
        var closed = false
    }

    private let reading: Locked<Reading>
    /// The ring's memory, for pollers that must not wait for `reading` (it is held across reads
    /// of the pipe): nil until the worker switched.
    private let ringView = Locked<SharedRingConsumer?>(nil)

    /// What one read brought.
    struct Batch {
        var frames: [Frame] = []
        /// The stream broke the protocol; nothing after it is believed.
        var violation: WireError?
        /// End of file (or the pipe failed): nothing more will come.
        var endOfStream = false
        /// Bytes were read.
        var received = false
        /// The worker waits for room in the ring: wake it (after the lock).
        var wakeWorker: SharedRingConsumer?
        /// A wake-up came: the worker wrote to its ring, or read from the host's after the host
        /// found it full.
        var woken = false
    }

    init(frames: FileDescriptor, output: FileDescriptor, maximumPayload: Int) {
        self.frames = frames
        self.output = output
        reading = Locked(Reading(source: FrameSource(from: .worker, maximumPayload: maximumPayload)))
    }

    var isClosed: Bool { reading.withLock { $0.closed } }

    /// From now on the worker's frames come from `ring`. Any wake-up read before is taken: read
    /// again after this.
    func useRing(_ ring: SharedRingConsumer) {
        reading.withLock { $0.source.switchToRing(ring) }
        ringView.withLock { $0 = ring }
    }

    /// The ring, once the worker switched to it (for its flags and a look at its positions).
    var ring: SharedRingConsumer? { ringView.withLock { $0 } }

    /// Whether the ring holds bytes not read yet: the worker's published position against the
    /// host's own count of what it read (`ringReadPosition`).
    var ringHasInput: Bool {
        guard let ring else { return false }
        return ring.hasInput(past: ringReadPosition.load(ordering: .acquiring))
    }

    /// The host's own count of the bytes it read from the ring, kept after each read for
    /// `ringHasInput`, which looks without the reading lock.
    private let ringReadPosition = Atomic<UInt64>(0)

    /// Reads what the pipe holds, at most `budget` bytes (so that what the frames make the host
    /// send is weighed before more is read; the loop calls again while data waits), then what the
    /// ring holds. Never waits. Without `pipe`, the ring alone: for a caller polling for its
    /// answer, which makes no system call under the lock the loop needs. Without `ring`, the pipe
    /// alone: while the host holds too much for the worker, it reads only the worker's word that
    /// it read.
    func read(budget: Int, pipe: Bool = true, ring readsRing: Bool = true) -> Batch {
        var batch = Batch()
        reading.withLock { state in
            guard !state.closed else { return }
            var left = budget
            while pipe, left > 0 {
                var transfer = NonBlockingTransfer.wouldBlock
                _ = state.source.receiveFromPipe { buffer in
                    transfer = frames.readAvailable(into: buffer)
                    return transfer.count
                }
                switch transfer {
                case .transferred(let count):
                    left -= count
                    batch.received = true
                case .wouldBlock: break
                case .endOfFile, .failed: batch.endOfStream = true
                }
                guard case .transferred = transfer else { break }
                do throws(WireError) {
                    if try state.source.takePipeFrames(into: &batch.frames) { batch.woken = true }
                } catch {
                    batch.violation = error
                    break
                }
            }
            // At most a pipe's worth a turn, as from a pipe, so that what the frames make the host
            // send is weighed as often; at the end, all of it: what the worker wrote before it
            // exited.
            if batch.violation == nil, state.source.ring != nil, readsRing || batch.endOfStream {
                readRing(&state, budget: batch.endOfStream ? .max : min(left, Self.ringReadPerTurn), into: &batch)
            }
            if batch.endOfStream {
                state.closed = true
                do throws(WireError) {
                    try state.source.finish()
                } catch {
                    batch.violation = batch.violation ?? error
                }
            }
        }
        if let ring = batch.wakeWorker { ring.wakeProducer() }
        return batch
    }

    /// The most a turn of the loop reads from the ring: a pipe's default capacity.
    static let ringReadPerTurn = 64 << 10

    /// Reads what the ring holds, up to `budget` bytes, and decodes its frames.
    private func readRing(_ state: inout Reading, budget: Int, into batch: inout Batch) {
        defer { state.source.ring.map { ringReadPosition.store($0.readPosition, ordering: .releasing) } }
        var left = budget
        do throws(WireError) {
            while left > 0 {
                let count = try state.source.receiveFromRing(atMost: left)
                guard count > 0 else { break }
                left -= count
                batch.received = true
                while let frame = try state.source.nextRingFrame() { batch.frames.append(frame) }
            }
        } catch {
            batch.violation = error
            return
        }
        if let ring = state.source.ring, ring.producerNeedsWake() { batch.wakeWorker = ring }
    }

    /// One read of whatever is there, for a caller waiting for the handshake on its own thread.
    /// End of file stays in the pipe for the event loop, which reports the exit.
    func readOnce() -> Batch {
        var batch = Batch()
        reading.withLock { state in
            guard !state.closed else { return }
            let count = state.source.receiveFromPipe { buffer in frames.readAvailable(into: buffer).count }
            guard count > 0 else { return }
            batch.received = true
            do throws(WireError) {
                _ = try state.source.takePipeFrames(into: &batch.frames)
            } catch {
                batch.violation = error
            }
        }
        return batch
    }

    /// Reads the worker's output, handing each chunk to `append`; returns whether the pipe ended.
    /// Never waits.
    func readOutput(_ append: (UnsafeRawBufferPointer) -> Void) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            switch chunk.withUnsafeMutableBytes({ output.readAvailable(into: $0) }) {
            case .transferred(let count): chunk.withUnsafeBytes { append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            case .wouldBlock: return false
            case .endOfFile, .failed: return true
            }
        }
    }
}
