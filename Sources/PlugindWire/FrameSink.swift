package import PlugindSystem

/// The frames one side of the protocol writes to the other, decided once for host and worker (the
/// write side of `FrameSource`): on the pipe until the stream moves to the peer's shared ring
/// (`switchToRing`), then into the ring, with the pipe carrying a wake-up whenever the reader
/// may be asleep; what does not fit waits in order and is taken up where it stopped (a pipe's
/// partial write, a full ring). How each side writes and waits is its own, passed in as
/// closures: the host writes without blocking and waits on its event loop (`enqueue`,
/// `takeTurn`, `nextWrite`, `complete`), the worker blocks (`write(now:…)`). What goes where,
/// gathered how, and when a wake-up is due, is decided here, without a system call.
///
/// A worker's signal handlers write their reports on the pipe after the switch, past this type:
/// they cannot take the lock its writers share (`FrameSource` accepts them there).
package struct FrameSink: Sendable {
    /// Who writes through this sink.
    package typealias Writer = FrameSource.Writer

    /// Where a frame travels.
    package enum Lane: Sendable {
        case pipe, ring
    }

    /// A frame waiting to be written.
    package struct Queued: Sendable {
        /// None for bytes framed already.
        var header: FrameHeader?
        var payload: [UInt8]
        var lane: Lane
        /// Bytes of header and payload together already written.
        var written = 0

        var count: Int { (header == nil ? 0 : FrameHeader.size) + payload.count }
    }

    /// How a turn of writing ended, or why none was taken.
    package enum Outcome: Equatable, Sendable {
        /// Everything queued is written.
        case done
        /// The pipe is full: take a turn again when it has room.
        case blocked
        /// The pipe (or ring) was already full and nothing was tried: whoever saw `blocked` (or
        /// `ringFull`) watches for room.
        case waitingForRoom
        /// Another writer has the turn; it writes this caller's frames too.
        case busy
        /// The reader's end is gone; nothing more is written.
        case closed
        /// The ring is full: take a turn again when the reader says it read.
        case ringFull
        /// The reader left the ring in a state no honest reader does; nothing more is written.
        case violation(String)
    }

    /// What a turn's write did, as the side that made the system calls reports it.
    package enum Written: Sendable {
        /// This many bytes of the write's frames, in order.
        case count(Int)
        /// The reader's end is gone.
        case gone
        /// The ring is in an impossible state.
        case violation(String)
    }

    /// The most frames one write gathers (two vectors each, well under IOV_MAX): under load the
    /// queue holds many small frames, and a system call each would cost more than them.
    package static let framesPerWrite = 32

    private let writer: Writer
    private var queue: [Queued] = []
    private var head = 0
    /// The bytes queued and not yet written: what the peer has not taken yet.
    package private(set) var queuedBytes = 0
    /// The peer's ring, once the stream moved there. While a turn writes into it, the turn's
    /// copy is the one that counts (only the writer with the turn moves its position).
    private var ring: SharedRingProducer?
    private var writing = false
    /// The last write found the pipe full: nothing is tried until the side says there is room,
    /// so that a reader that does not read costs the writer no system call, and no gathering,
    /// per frame queued.
    private var pipeFull = false
    /// The last write found the ring full: nothing is tried until the reader says it read.
    private var ringFull = false
    /// The reader said it read while a turn was writing: the turn's write may find the ring
    /// full only because the word came before it ended, and the word is not sent twice (the
    /// reader cleared the request it answered). That turn writes again instead of waiting.
    private var roomArrivedDuringTurn = false
    package private(set) var isClosed = false

    package init(from writer: Writer) {
        self.writer = writer
    }

    /// The wake-up this side sends on the pipe to say its ring holds more.
    private var wakeKind: FrameKind { Self.wakeKind(from: writer) }

    private static func wakeKind(from writer: Writer) -> FrameKind { writer == .host ? .wake : .wakeHost }

    /// Whether frames go into the ring now.
    package var usesRing: Bool { ring != nil }

    /// Whether nothing waits.
    package var isEmpty: Bool { head == queue.count }

    /// Whether the frame to write next waits for room in the pipe (not in the ring).
    package var waitsForPipe: Bool { head < queue.count && queue[head].lane == .pipe }

    // MARK: Queueing (a writer that must not block)

    /// Queues a frame; no system call, no copy of the payload.
    package mutating func enqueue(_ header: FrameHeader, payload: [UInt8]) {
        append(Queued(header: header, payload: payload, lane: ring == nil ? .pipe : .ring))
    }

    /// Queues bytes framed already (the rest of a frame written in part before this sink).
    package mutating func enqueue(raw bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        append(Queued(header: nil, payload: bytes, lane: ring == nil ? .pipe : .ring))
    }

    private mutating func append(_ frame: Queued) {
        guard !isClosed else { return }
        queuedBytes += frame.count
        queue.append(frame)
    }

    /// The stream moves to `ring`: every frame after this goes into it. The host's last frame on
    /// the pipe is its `switchToRing`, queued here; the worker's is its `ready`, written before
    /// this in the same turn of the lock its writers share.
    package mutating func switchToRing(_ ring: SharedRingProducer) {
        guard !isClosed, self.ring == nil else { return }
        if writer == .host { enqueue(FrameHeader(kind: .switchToRing, payloadLength: 0), payload: []) }
        self.ring = ring
    }

    /// Nothing more is written; what is queued is dropped.
    package mutating func close() {
        isClosed = true
        queue.removeAll()
        head = 0
        queuedBytes = 0
    }

    // MARK: Turns (a writer that must not block)

    /// Takes the turn to write (nil), or says why not; `roomAvailable` when the pipe has room
    /// again or the reader said it read from the ring.
    package mutating func takeTurn(roomAvailable: Bool = false) -> Outcome? {
        if isClosed { return .closed }
        if roomAvailable {
            pipeFull = false
            ringFull = false
            if writing { roomArrivedDuringTurn = true }
        }
        if pipeFull || ringFull { return .waitingForRoom }
        if writing { return .busy }
        writing = true
        roomArrivedDuringTurn = false
        return nil
    }

    /// The turn's next write: up to `framesPerWrite` frames from the head of the queue, of one
    /// lane (the pipe's up to the switch, then the ring's). Nil when nothing waits: the turn
    /// ended.
    package mutating func nextWrite() -> Write? {
        guard !isClosed, head < queue.count else {
            writing = false
            if !isClosed {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            return nil
        }
        let lane = queue[head].lane
        var end = head + 1
        while end < min(queue.count, head + Self.framesPerWrite), queue[end].lane == lane { end += 1 }
        // A copy of the few frames, not a slice of the queue: frames queued while the write is
        // under way then never copy the whole queue.
        return Write(lane: lane, frames: Array(queue[head..<end]), ring: lane == .ring ? ring : nil, wakeKind: wakeKind)
    }

    /// What `write` did: the queue moves past what was written. Nil to go on with `nextWrite`;
    /// otherwise the turn ended, and how.
    package mutating func complete(_ write: Write, _ written: Written) -> Outcome? {
        if let moved = write.ring, !isClosed { ring = moved }
        let count: Int
        switch written {
        case .gone, .violation:
            close()
            writing = false
            if case .violation(let reason) = written { return .violation(reason) }
            return .closed
        case .count(let value): count = value
        }
        guard !isClosed, head < queue.count else {
            writing = false
            return .closed
        }
        queuedBytes -= count
        var left = count
        while left > 0, head < queue.count {
            let taken = min(left, queue[head].count - queue[head].written)
            queue[head].written += taken
            left -= taken
            guard queue[head].written == queue[head].count else { break }
            queue[head] = Queued(header: nil, payload: [], lane: .pipe)
            head += 1
        }
        // Written entries are released once they are half the queue: a queue the reader drains
        // slowly holds what waits, not all it was ever sent.
        if head >= 1024, head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
        if count == write.count { return nil }
        if write.lane == .ring {
            // The reader's word that it read came while this turn wrote: it is spent, so look
            // at the ring again rather than wait for another.
            if roomArrivedDuringTurn {
                roomArrivedDuringTurn = false
                return nil
            }
            writing = false
            ringFull = true
            return .ringFull
        }
        writing = false
        pipeFull = true
        return .blocked
    }

    /// One write of a turn: frames of one lane, written with no lock held.
    package struct Write: Sendable {
        package let lane: Lane
        fileprivate let frames: [Queued]
        /// The ring, the turn's own while it writes.
        fileprivate var ring: SharedRingProducer?
        fileprivate let wakeKind: FrameKind
        /// What is left to write of the frames.
        package let count: Int

        fileprivate init(lane: Lane, frames: [Queued], ring: SharedRingProducer?, wakeKind: FrameKind) {
            self.lane = lane
            self.frames = frames
            self.ring = ring
            self.wakeKind = wakeKind
            count = frames.reduce(0) { $0 + $1.count - $1.written }
        }

        /// The pipe's lane: `write` makes one gathered write of what is left of the frames (their
        /// headers encoded on the stack, their payloads where they lie) and returns the count, 0
        /// when the pipe is full, nil when the reader's end is gone.
        package func writePipe(_ write: (UnsafeBufferPointer<IOVector>) -> Int?) -> Written {
            withUnsafeTemporaryAllocation(byteCount: FrameHeader.size * frames.count, alignment: 8) { headers in
                withUnsafeTemporaryAllocation(of: IOVector.self, capacity: 2 * frames.count) { vectors in
                    Self.gather(frames[...], headers: headers, vectors: vectors, count: 0) { gathered in
                        write(gathered).map(Written.count) ?? .gone
                    }
                }
            }
        }

        /// Pins each frame's payload while the next ones are gathered: one level of recursion a
        /// frame.
        private static func gather(
            _ frames: ArraySlice<Queued>, headers: UnsafeMutableRawBufferPointer, vectors: UnsafeMutableBufferPointer<IOVector>,
            count: Int, _ body: (UnsafeBufferPointer<IOVector>) -> Written
        ) -> Written {
            guard let frame = frames.first else { return body(UnsafeBufferPointer(rebasing: vectors[..<count])) }
            return frame.payload.withUnsafeBytes { payload in
                let header = frame.encodeHeader(into: headers)
                var count = count
                FrameBytes(header: header, payload: payload).vectors(after: frame.written, into: vectors, count: &count)
                let rest = UnsafeMutableRawBufferPointer(rebasing: headers[header.count...])
                return gather(frames.dropFirst(), headers: rest, vectors: vectors, count: count, body)
            }
        }

        /// The ring's lane: copies what is left of the frames into the ring, as far as there is
        /// room, and publishes it; `wakeUp` writes a wake-up on the pipe when one is due (false:
        /// the reader's end is gone). A full ring asks the reader to say when it read, and ends
        /// the write with what was copied.
        package mutating func writeRing(wakeUp: (UnsafeRawBufferPointer) -> Bool) -> Written {
            guard var producer = ring else { return .count(0) }
            defer { ring = producer }
            var copied = 0
            var gone = false
            var violation: SharedRingError?
            let wakeKind = wakeKind
            frames: for frame in frames {
                let full = frame.withBytes { bytes -> Bool in
                    var written = frame.written
                    defer { copied += written - frame.written }
                    while true {
                        let step: RingStep
                        do throws(SharedRingError) {
                            step = try FrameSink.append(bytes, written: &written, to: &producer)
                        } catch {
                            violation = error
                            return true
                        }
                        switch step {
                        case .appended: return false
                        case .wakeDue:
                            guard FrameSink.withWakeUp(wakeKind, wakeUp) else {
                                gone = true
                                return true
                            }
                        case .full: return true
                        }
                    }
                }
                if full { break frames }
            }
            if let violation { return .violation(violation.description) }
            if !gone, FrameSink.publish(&producer), !FrameSink.withWakeUp(wakeKind, wakeUp) { gone = true }
            return gone ? .gone : .count(copied)
        }
    }

    // MARK: Writing now (a writer that blocks)

    /// Writes `frame` now, for a writer that blocks (nothing is queued): on the pipe through
    /// `pipe` (one write, its count; the rest follows), or into the ring, then a wake-up through
    /// `pipe` when one is due. A full ring asks the reader to say when it read and calls
    /// `waitForRoom` (which returns when it did, or a while later), then goes on.
    package mutating func write<Failure: Error>(
        now frame: FrameBytes,
        pipe: (UnsafeBufferPointer<IOVector>) throws(Failure) -> Int,
        waitForRoom: (SharedRingProducer) throws(Failure) -> Void,
        ringViolation: (SharedRingError) -> Failure
    ) throws(Failure) {
        guard var producer = ring else {
            try Self.writeAll(frame, through: pipe)
            return
        }
        defer { ring = producer }
        var written = 0
        while true {
            let step: RingStep
            do throws(SharedRingError) {
                step = try Self.append(frame, written: &written, to: &producer)
            } catch {
                throw ringViolation(error)
            }
            switch step {
            case .appended:
                if Self.publish(&producer) { try writeWakeUp(through: pipe) }
                return
            case .wakeDue: try writeWakeUp(through: pipe)
            case .full: try waitForRoom(producer)
            }
        }
    }

    /// Writes all of `frame` through `pipe`, taking up a partial write where it stopped.
    private static func writeAll<Failure: Error>(
        _ frame: FrameBytes, through pipe: (UnsafeBufferPointer<IOVector>) throws(Failure) -> Int
    ) throws(Failure) {
        var written = 0
        while written < frame.count {
            var failure: Failure?
            withUnsafeTemporaryAllocation(of: IOVector.self, capacity: 2) { vectors in
                var count = 0
                frame.vectors(after: written, into: vectors, count: &count)
                do throws(Failure) {
                    written += try pipe(UnsafeBufferPointer(rebasing: vectors[..<count]))
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
        }
    }

    private func writeWakeUp<Failure: Error>(through pipe: (UnsafeBufferPointer<IOVector>) throws(Failure) -> Int) throws(Failure) {
        try Self.writeWakeUp(from: writer, through: pipe)
    }

    /// Writes a wake-up from `writer` through `pipe`, for a writer that blocks: also the
    /// worker's word that it read from the host's full ring (which the host waits for on its
    /// loop).
    package static func writeWakeUp<Failure: Error>(
        from writer: Writer, through pipe: (UnsafeBufferPointer<IOVector>) throws(Failure) -> Int
    ) throws(Failure) {
        var failure: Failure?
        _ = withWakeUp(wakeKind(from: writer)) { bytes in
            do throws(Failure) {
                try writeAll(FrameBytes(header: bytes, payload: UnsafeRawBufferPointer(start: nil, count: 0)), through: pipe)
            } catch {
                failure = error
            }
            return true
        }
        if let failure { throw failure }
    }

    // MARK: The ring, for both

    /// What appending to the ring came to.
    enum RingStep {
        /// All of the frame is in the ring, not yet published.
        case appended
        /// The ring filled: what fits is published, and the reader sleeps: send it a wake-up,
        /// then append again.
        case wakeDue
        /// The ring is full and the reader was asked to say when it read: wait for that, then
        /// append again.
        case full
    }

    /// Copies what is left of `frame` past `written` into the ring, as far as there is room.
    /// When the ring fills, what was copied is published, a wake-up is due when the reader
    /// sleeps, and the reader is asked to say when it read; room it made meanwhile is used at
    /// once.
    static func append(_ frame: FrameBytes, written: inout Int, to ring: inout SharedRingProducer) throws(SharedRingError) -> RingStep {
        while written < frame.count {
            let rest = frame.part(after: written)
            let appended = try ring.append(rest)
            written += appended
            if appended == rest.count { continue }
            ring.publish()
            if ring.consumerNeedsWake() { return .wakeDue }
            guard try ring.announceWaitingForRoom() else { return .full }
        }
        return .appended
    }

    /// Publishes what was appended: whether a wake-up is due (claimed: the caller sends it).
    static func publish(_ ring: inout SharedRingProducer) -> Bool {
        ring.publish()
        return ring.consumerNeedsWake()
    }

    /// Calls `body` with a wake-up frame of `kind`, encoded on the stack.
    static func withWakeUp(_ kind: FrameKind, _ body: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        withUnsafeTemporaryAllocation(byteCount: FrameHeader.size, alignment: 8) { buffer in
            FrameHeader(kind: kind, payloadLength: 0).encode(into: buffer)
            return body(UnsafeRawBufferPointer(buffer))
        }
    }
}

/// One frame's bytes, borrowed for a write: its encoded header (empty for bytes framed already)
/// and its payload.
package struct FrameBytes {
    package let header: UnsafeRawBufferPointer
    package let payload: UnsafeRawBufferPointer

    package init(header: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) {
        self.header = header
        self.payload = payload
    }

    package var count: Int { header.count + payload.count }

    /// The rest of the part (header, then payload) that byte `written` falls in.
    func part(after written: Int) -> UnsafeRawBufferPointer {
        if written < header.count { return UnsafeRawBufferPointer(rebasing: header[written...]) }
        return UnsafeRawBufferPointer(rebasing: payload[(written - header.count)...])
    }

    /// Puts the vectors of what is left past `written` (at most two) into `vectors` from `count`
    /// on, and counts them.
    func vectors(after written: Int, into vectors: UnsafeMutableBufferPointer<IOVector>, count: inout Int) {
        if written < header.count {
            vectors[count] = IOVector(UnsafeRawBufferPointer(rebasing: header[written...]))
            count += 1
            if !payload.isEmpty {
                vectors[count] = IOVector(payload)
                count += 1
            }
        } else if written < self.count {
            vectors[count] = IOVector(UnsafeRawBufferPointer(rebasing: payload[(written - header.count)...]))
            count += 1
        }
    }
}

extension FrameSink.Queued {
    /// Encodes the header into the start of `buffer`: the bytes, empty when there is none.
    fileprivate func encodeHeader(into buffer: UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer {
        guard let header else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        header.encode(into: buffer)
        return UnsafeRawBufferPointer(rebasing: buffer[..<FrameHeader.size])
    }

    /// Calls `body` with the frame's bytes, the header encoded on the stack.
    fileprivate func withBytes<Result>(_ body: (FrameBytes) -> Result) -> Result {
        withUnsafeTemporaryAllocation(byteCount: FrameHeader.size, alignment: 8) { buffer in
            let header = encodeHeader(into: buffer)
            return payload.withUnsafeBytes { body(FrameBytes(header: header, payload: $0)) }
        }
    }
}
