import PlugindSystem
import PlugindWire

/// Frames on their way to a worker, in the order they were queued, and the one writer among the
/// threads that queue them. Queuing makes no system call and copies no payload (the arrays are
/// shared), so a caller may queue under its own lock and keep its frames in the order it decided;
/// `flush` then writes with no lock held while it writes: whoever finds nobody writing takes the
/// turn and writes until the queue is empty or the pipe (or ring) is full.
///
/// Once the worker agreed to the rings (`switchToRing`), frames queued after the switch go into
/// the host → worker ring instead of the pipe, which then carries a `wake` whenever the worker
/// does not poll the ring.
final class FrameWriter: Sendable {
    private struct Pending {
        var header: [UInt8]
        var payload: [UInt8]
        /// Bytes of header and payload together already written.
        var written = 0
        /// Whether it goes into the ring (queued after the switch) or the pipe.
        var toRing = false

        var total: Int { header.count + payload.count }
    }

    private struct State {
        var queue: [Pending] = []
        var head = 0
        var writing = false
        var closed = false
        /// The last write found the pipe full: nothing is tried again until the loop says there
        /// is room (`flush(roomAvailable:)`), so a worker that does not read costs the host no
        /// system call, and no gathering, per frame queued for it.
        var pipeFull = false
        /// Bytes queued and not yet written.
        var bytes = 0
        /// The ring frames go into once the host switched to it; the writer's own while
        /// `writing` (only the thread writing moves its position).
        var ring: SharedRingProducer?
        /// The last write found the ring full: nothing is tried until the channel says to
        /// (`flush(roomAvailable:)`).
        var ringFull = false
    }

    enum Outcome: Equatable {
        /// Everything queued is written.
        case done
        /// The pipe is full: flush again when it has room.
        case blocked
        /// The pipe was already full, and nothing was tried: whoever saw `blocked` watches it.
        case waitingForRoom
        /// Another thread is writing; it will write this caller's frames too.
        case busy
        /// The worker's end is gone; nothing more will be written.
        case closed
        /// The ring is full: flush again when the worker says it read (`wakeHost`).
        case ringFull
        /// The worker left the ring in a state no honest worker does; nothing more is written.
        case violation(String)
    }

    let descriptor: FileDescriptor
    private let state = Locked(State())

    init(descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    /// Queues `message`, its frame marked with `flags` besides its own.
    func enqueue(_ message: HostMessage, flags: FrameFlags = []) {
        var frame = message.encode()
        frame.header.flags.formUnion(flags)
        enqueue(raw: frame.header.bytes, payload: frame.payload)
    }

    /// Queues bytes already framed (the rest of a `hello` the pipe did not take at once).
    func enqueue(raw bytes: [UInt8], payload: [UInt8] = []) {
        state.withLock { state in
            guard !state.closed, !(bytes.isEmpty && payload.isEmpty) else { return }
            state.queue.append(Pending(header: bytes, payload: payload, toRing: state.ring != nil))
            state.bytes += bytes.count + payload.count
        }
    }

    /// Queues the `switchToRing` frame, the last for the pipe: every frame queued after it goes
    /// into `ring`.
    func switchToRing(_ ring: SharedRingProducer) {
        state.withLock { state in
            guard !state.closed, state.ring == nil else { return }
            let frame = FrameHeader(kind: .switchToRing, payloadLength: 0).bytes
            state.queue.append(Pending(header: frame, payload: []))
            state.bytes += frame.count
            state.ring = ring
        }
    }

    /// Whether the frame to write next waits for room in the pipe (not in the ring).
    var waitsForPipe: Bool {
        state.withLock { $0.head < $0.queue.count && !$0.queue[$0.head].toRing }
    }

    /// Whether frames go into the ring now.
    var usesRing: Bool {
        state.withLock { $0.ring != nil }
    }

    var isEmpty: Bool {
        state.withLock { $0.head == $0.queue.count }
    }

    /// What the host holds for the worker that the worker has not read yet.
    var queuedBytes: Int {
        state.withLock { $0.bytes }
    }

    /// Nothing more is written; what is queued is dropped.
    func close() {
        state.withLock { state in
            state.closed = true
            state.queue.removeAll()
            state.head = 0
            state.bytes = 0
        }
    }

    /// Writes what is queued, unless another thread is at it or the pipe was full; the loop
    /// passes `roomAvailable` when the pipe has room again.
    func flush(roomAvailable: Bool = false) -> Outcome {
        let turn = state.withLock { state -> Outcome? in
            if state.closed { return .closed }
            if roomAvailable {
                state.pipeFull = false
                state.ringFull = false
            }
            if state.pipeFull || state.ringFull { return .waitingForRoom }
            if state.writing { return .busy }
            state.writing = true
            return nil
        }
        if let turn { return turn }
        while true {
            // Up to `framesPerWrite` frames at once, in one gathering write: under load the
            // queue holds many small frames, and a system call each would cost more than them.
            let (batch, ring) = state.withLock { state -> (ArraySlice<Pending>, SharedRingProducer?) in
                guard state.head < state.queue.count else {
                    state.writing = false
                    state.queue.removeAll(keepingCapacity: true)
                    state.head = 0
                    return ([], nil)
                }
                // One lane at a time: the pipe's frames up to the switch, then the ring's.
                let toRing = state.queue[state.head].toRing
                var end = state.head + 1
                while end < min(state.queue.count, state.head + Self.framesPerWrite), state.queue[end].toRing == toRing { end += 1 }
                return (state.queue[state.head..<end], toRing ? state.ring : nil)
            }
            guard !batch.isEmpty else { return .done }
            var written: Int
            var ringViolation: String?
            if var ring {
                do throws(SharedRingError) {
                    written = try writeRing(batch, into: &ring)
                } catch {
                    written = -1
                    ringViolation = error.description
                }
                state.withLock { $0.ring = ring }
            } else {
                written = write(batch)
            }
            let outcome = state.withLock { state -> Outcome? in
                if written < 0 {
                    state.closed = true
                    state.writing = false
                    state.queue.removeAll()
                    state.head = 0
                    state.bytes = 0
                    return ringViolation.map(Outcome.violation) ?? .closed
                }
                guard !state.closed, state.head < state.queue.count else {
                    state.writing = false
                    return .closed
                }
                state.bytes -= written
                var left = written
                while left > 0, state.head < state.queue.count {
                    let taken = min(left, state.queue[state.head].total - state.queue[state.head].written)
                    state.queue[state.head].written += taken
                    left -= taken
                    guard state.queue[state.head].written == state.queue[state.head].total else { break }
                    state.queue[state.head] = Pending(header: [], payload: [])
                    state.head += 1
                }
                // Written entries are released once they are half the queue: a queue the
                // worker drains slowly holds what waits, not all it was ever sent.
                if state.head >= 1024, state.head * 2 >= state.queue.count {
                    state.queue.removeFirst(state.head)
                    state.head = 0
                }
                let wroteAll = written == batch.reduce(0) { $0 + $1.total - $1.written }
                if wroteAll { return nil }
                state.writing = false
                if batch.first?.toRing == true {
                    state.ringFull = true
                    return .ringFull
                }
                state.pipeFull = true
                return .blocked
            }
            if let outcome { return outcome }
        }
    }

    /// The most frames one write gathers (two vectors each, well under IOV_MAX).
    static let framesPerWrite = 32

    /// Writes what the pipe takes of `batch` (in order, the first one perhaps partly written
    /// already) without blocking: the count, 0 when full, -1 when the worker's end is gone.
    private func write(_ batch: ArraySlice<Pending>) -> Int {
        var vectors: [IOVector] = []
        vectors.reserveCapacity(batch.count * 2)
        return gather(batch, into: &vectors) { vectors in
            switch vectors.withUnsafeBufferPointer({ descriptor.writeAvailable(gathering: $0) }) {
            case .transferred(let count): count
            case .wouldBlock, .endOfFile: 0
            case .failed: -1
            }
        }
    }

    /// Copies what the ring takes of `batch` into it, publishes it, and wakes the worker when it
    /// does not poll the ring: the count copied, or -1 when the worker's end is gone. When the
    /// ring is full, the worker is asked to say when it has read (a `wakeHost`).
    private func writeRing(_ batch: ArraySlice<Pending>, into ring: inout SharedRingProducer) throws(SharedRingError) -> Int {
        var written = 0
        frames: for pending in batch {
            for (part, start) in [(pending.header, 0), (pending.payload, pending.header.count)] {
                var from = max(pending.written - start, 0)
                while from < part.count {
                    var failure: SharedRingError?
                    let appended = part.withUnsafeBytes { bytes in
                        do throws(SharedRingError) {
                            return try ring.append(UnsafeRawBufferPointer(rebasing: bytes[from...]))
                        } catch {
                            failure = error
                            return 0
                        }
                    }
                    if let failure { throw failure }
                    written += appended
                    from += appended
                    guard from < part.count else { break }
                    // Full: the worker reads what is there, and says when it did; room it made
                    // meanwhile is used at once.
                    guard publish(&ring) else { return -1 }
                    guard try ring.announceWaitingForRoom() else { break frames }
                }
            }
        }
        return publish(&ring) ? written : -1
    }

    /// Publishes what was copied into the ring, and writes a `wake` to the pipe when the worker
    /// needs one; false when the worker's end is gone.
    private func publish(_ ring: inout SharedRingProducer) -> Bool {
        ring.publish()
        guard ring.consumerNeedsWake() else { return true }
        // A full pipe holds wake-ups the worker has yet to read: it will look at the ring.
        let wake = FrameHeader(kind: .wake, payloadLength: 0).bytes
        if case .failed = wake.withUnsafeBytes({ descriptor.writeAvailable($0) }) { return false }
        return true
    }

    /// Calls `body` with the vectors of every frame of `batch` (what is left of each), while the
    /// arrays they point into are held: one level of recursion per frame.
    private func gather(_ batch: ArraySlice<Pending>, into vectors: inout [IOVector], _ body: (inout [IOVector]) -> Int) -> Int {
        guard let pending = batch.first else { return body(&vectors) }
        return pending.header.withUnsafeBytes { header in
            pending.payload.withUnsafeBytes { payload in
                let mark = vectors.count
                if pending.written < header.count {
                    let rest = UnsafeRawBufferPointer(rebasing: header[pending.written...])
                    vectors.append(IOVector(rest))
                    if !payload.isEmpty {
                        vectors.append(IOVector(payload))
                    }
                } else {
                    let rest = UnsafeRawBufferPointer(rebasing: payload[(pending.written - header.count)...])
                    vectors.append(IOVector(rest))
                }
                defer { vectors.removeSubrange(mark...) }
                return gather(batch.dropFirst(), into: &vectors, body)
            }
        }
    }
}
