import PlugindSystem
import PlugindWire

/// What the host reads from one worker: frames from its pipe, decoded, and its output (stdout and
/// stderr share a pipe). Reads are system calls, so they hold this type's lock, never the lock
/// that callers sending requests need. `WorkerChannel` dispatches what is read.
final class WorkerInput: Sendable {
    /// The worker's end of the protocol, toward the host.
    let frames: FileDescriptor
    /// The worker's stdout and stderr.
    let output: FileDescriptor

    private struct Reading {
        var decoder: FrameDecoder
        /// End of file was read (or the pipe failed).
        var closed = false
    }

    private let reading: Locked<Reading>

    /// What one read brought.
    struct Batch {
        var frames: [Frame] = []
        /// The stream broke the protocol; nothing after it is believed.
        var violation: WireError?
        /// End of file (or the pipe failed): nothing more will come.
        var endOfStream = false
        /// Bytes were read.
        var received = false
    }

    init(frames: FileDescriptor, output: FileDescriptor, maximumPayload: Int) {
        self.frames = frames
        self.output = output
        reading = Locked(Reading(decoder: FrameDecoder(direction: .workerToHost, maximumPayload: maximumPayload)))
    }

    var isClosed: Bool { reading.withLock { $0.closed } }

    /// Reads what the pipe holds, at most `budget` bytes (so that what the frames make the host
    /// send is weighed before more is read; the loop calls again while data waits). Never waits.
    func read(budget: Int) -> Batch {
        var batch = Batch()
        reading.withLock { state in
            guard !state.closed else { return }
            var left = budget
            while left > 0 {
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
                    while let frame = try state.decoder.nextFrame() { batch.frames.append(frame) }
                } catch {
                    batch.violation = error
                    break
                }
            }
            if batch.endOfStream {
                state.closed = true
                do throws(WireError) {
                    try state.decoder.finish()
                } catch {
                    batch.violation = batch.violation ?? error
                }
            }
        }
        return batch
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
                while let frame = try state.decoder.nextFrame() { batch.frames.append(frame) }
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
