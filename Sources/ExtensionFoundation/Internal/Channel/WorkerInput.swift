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
        var decoder: FrameDecoder
        /// End of file was read (or the pipe failed).
        var closed = false
        /// The worker → host ring and the frames of its stream, once the worker switched.
        var ring: SharedRingConsumer?
        var ringDecoder: FrameDecoder?
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
        reading = Locked(Reading(decoder: FrameDecoder(direction: .workerToHost, maximumPayload: maximumPayload)))
    }

    var isClosed: Bool { reading.withLock { $0.closed } }

    /// From now on the worker's frames come from `ring`. Any wake-up read before is taken: read
    /// again after this.
    func useRing(_ ring: SharedRingConsumer) {
        reading.withLock { state in
            guard state.ring == nil else { return }
            state.ring = ring
            state.ringDecoder =
                state.decoder.handOver(keeping: FrameHeader.size * 4)
                ?? FrameDecoder(direction: .workerToHost, maximumPayload: state.decoder.maximumPayload)
            ring.wakeTaken()
        }
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
                _ = state.decoder.receive { buffer in
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
                    if try Self.takePipeFrames(&state.decoder, into: &batch, afterSwitch: state.ring != nil) { batch.woken = true }
                } catch {
                    batch.violation = error
                    break
                }
            }
            if batch.violation == nil, let ring = state.ring {
                if batch.woken { ring.wakeTaken() }
                // At most a pipe's worth a turn, as from a pipe, so that what the frames make the
                // host send is weighed as often; at the end, all of it: what the worker wrote
                // before it exited.
                if readsRing || batch.endOfStream {
                    readRing(&state, budget: batch.endOfStream ? .max : min(left, Self.ringReadPerTurn), into: &batch)
                }
            }
            if batch.endOfStream {
                state.closed = true
                do throws(WireError) {
                    try state.decoder.finish()
                    try state.ringDecoder?.finish()
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

    /// Decodes the pipe's frames into `batch`; true when a wake-up was among them. A wake-up only
    /// says to read the ring (one that comes before the switch is taken by `useRing`). After the
    /// switch the pipe carries only wake-ups and what the worker's signal handlers write.
    private static func takePipeFrames(_ decoder: inout FrameDecoder, into batch: inout Batch, afterSwitch: Bool) throws(WireError)
        -> Bool
    {
        var woken = false
        while let frame = try decoder.nextFrame() {
            guard frame.header.kind == .wakeHost else {
                if afterSwitch, frame.header.kind != .fatalSignal, frame.header.kind != .stackReport {
                    throw .unexpectedMessage("a \(frame.header.kind) frame on the pipe after the worker switched to the ring")
                }
                batch.frames.append(frame)
                continue
            }
            guard frame.payload.isEmpty else { throw .malformedPayload("a wake-up carries no payload") }
            woken = true
        }
        return woken
    }

    /// Reads what the ring holds, up to `budget` bytes, and decodes its frames.
    private func readRing(_ state: inout Reading, budget: Int, into batch: inout Batch) {
        // Taken out of the state while in use: a copy left behind would make each write to the
        // decoder's buffer copy all of it.
        guard var ring = state.ring, var decoder = state.ringDecoder.take() else { return }
        defer {
            state.ring = ring
            state.ringDecoder = decoder
            ringReadPosition.store(ring.readPosition, ordering: .releasing)
        }
        var left = budget
        while left > 0 {
            var failure: SharedRingError?
            let count = decoder.receive { buffer in
                do throws(SharedRingError) {
                    return try ring.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<min(buffer.count, left)]))
                } catch {
                    failure = error
                    return 0
                }
            }
            if let failure {
                batch.violation = .malformedPayload(failure.description)
                return
            }
            guard count > 0 else { break }
            left -= count
            batch.received = true
            do throws(WireError) {
                while let frame = try decoder.nextFrame() { batch.frames.append(frame) }
            } catch {
                batch.violation = error
                return
            }
        }
        if ring.producerNeedsWake() { batch.wakeWorker = ring }
    }

    /// One read of whatever is there, for a caller waiting for the handshake on its own thread.
    /// End of file stays in the pipe for the event loop, which reports the exit.
    func readOnce() -> Batch {
        var batch = Batch()
        reading.withLock { state in
            guard !state.closed else { return }
            let count = state.decoder.receive { buffer in frames.readAvailable(into: buffer).count }
            guard count > 0 else { return }
            batch.received = true
            do throws(WireError) {
                _ = try Self.takePipeFrames(&state.decoder, into: &batch, afterSwitch: state.ring != nil)
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
