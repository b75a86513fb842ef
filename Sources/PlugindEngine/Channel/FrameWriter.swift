import PlugindSystem
import PlugindWire

/// Frames on their way to a worker, in the order they were queued, and the one writer among the
/// threads that queue them: the host's way of writing through a `FrameSink`, which decides what
/// goes where (the pipe, then the host → worker ring once the worker agreed to it, with a `wake`
/// on the pipe whenever the worker may be asleep). Queuing makes no system call and copies no
/// payload, so a caller may queue under its own lock and keep its frames in the order it decided;
/// `flush` then writes with no lock held while it writes, and never blocks: whoever finds nobody
/// writing takes the turn and writes until the queue is empty or the pipe (or ring) is full; the
/// event loop says when there is room again.
final class FrameWriter: Sendable {
    typealias Outcome = FrameSink.Outcome

    let descriptor: FileDescriptor
    private let sink = Locked(FrameSink(from: .host))

    init(descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    /// Queues `message`, its frame marked with `flags` besides its own.
    func enqueue(_ message: HostMessage, flags: FrameFlags = []) {
        var frame = message.encode()
        frame.header.flags.formUnion(flags)
        sink.withLock { $0.enqueue(frame.header, payload: frame.payload) }
    }

    /// Queues bytes already framed (the rest of a `hello` the pipe did not take at once).
    func enqueue(raw bytes: [UInt8]) {
        sink.withLock { $0.enqueue(raw: bytes) }
    }

    /// Queues the `switchToRing` frame, the last for the pipe: every frame queued after it goes
    /// into `ring`.
    func switchToRing(_ ring: SharedRingProducer) {
        sink.withLock { $0.switchToRing(ring) }
    }

    /// Whether the frame to write next waits for room in the pipe (not in the ring).
    var waitsForPipe: Bool { sink.withLock { $0.waitsForPipe } }

    /// Whether frames go into the ring now.
    var usesRing: Bool { sink.withLock { $0.usesRing } }

    var isEmpty: Bool { sink.withLock { $0.isEmpty } }

    /// What the host holds for the worker that the worker has not read yet.
    var queuedBytes: Int { sink.withLock { $0.queuedBytes } }

    /// Nothing more is written; what is queued is dropped.
    func close() {
        sink.withLock { $0.close() }
    }

    /// Writes what is queued, unless another thread is at it or the pipe (or ring) was full; the
    /// loop passes `roomAvailable` when the pipe has room again or the worker said it read.
    func flush(roomAvailable: Bool = false) -> Outcome {
        if let refused = sink.withLock({ $0.takeTurn(roomAvailable: roomAvailable) }) { return refused }
        while true {
            guard var write = sink.withLock({ $0.nextWrite() }) else { return .done }
            let written: FrameSink.Written
            switch write.lane {
            case .pipe:
                written = write.writePipe { vectors in
                    switch descriptor.writeAvailable(gathering: vectors) {
                    case .transferred(let count): count
                    case .wouldBlock, .endOfFile: 0
                    case .failed: nil
                    }
                }
            case .ring:
                // A full pipe holds wake-ups the worker has yet to read: it will look at the ring.
                written = write.writeRing { wake in
                    if case .failed = descriptor.writeAvailable(wake) { return false }
                    return true
                }
            }
            if let outcome = sink.withLock({ $0.complete(write, written) }) { return outcome }
        }
    }
}
