/// The frames one side of the protocol reads from the other, decided once for host and worker:
/// from the pipe until the stream moves to the peer's shared ring (`switchToRing`), then from the
/// ring, with the pipe carrying only wake-ups — and, from a worker, what its signal handlers
/// write, since they cannot take the lock the ring's writers share. How each side waits for more
/// is its own (the host's event loop never blocks, the worker's thread does); what arrives, in
/// which order, and what may arrive where, is decided here, without a system call.
package struct FrameSource: Sendable {
    /// Who writes the frames this source reads.
    package enum Writer: Sendable {
        case host, worker
    }

    private var pipe: FrameDecoder
    /// The peer's ring, once the stream moved there.
    package private(set) var ring: SharedRingConsumer?
    private var ringDecoder: FrameDecoder?
    private let writer: Writer

    /// `initialCapacity`: the pipe decoder's first buffer, which the ring's decoder takes over.
    package init(from writer: Writer, maximumPayload: Int, initialCapacity: Int = FrameDecoder.initialCapacity) {
        self.writer = writer
        self.pipe = FrameDecoder(
            direction: writer == .host ? .hostToWorker : .workerToHost, maximumPayload: maximumPayload,
            initialCapacity: initialCapacity)
    }

    /// The largest payload accepted, on the pipe and in the ring.
    package var maximumPayload: Int {
        get { pipe.maximumPayload }
        set {
            pipe.maximumPayload = newValue
            ringDecoder?.maximumPayload = newValue
        }
    }

    /// The wake-up the writer sends on the pipe to say its ring holds more.
    private var wakeKind: FrameKind { writer == .host ? .wake : .wakeHost }

    /// What else may travel on the pipe after the switch: a worker's signal handlers write their
    /// reports there.
    private func allowedOnPipeAfterSwitch(_ kind: FrameKind) -> Bool {
        writer == .worker && (kind == .fatalSignal || kind == .stackReport)
    }

    /// The stream moves to `ring`. The pipe decoder's buffer goes with it (its touched pages
    /// serve the ring), unless it holds bytes: they belong to the pipe, and the ring gets a
    /// buffer of its own.
    package mutating func switchToRing(_ ring: SharedRingConsumer) {
        guard self.ring == nil else { return }
        self.ring = ring
        ringDecoder =
            pipe.handOver(keeping: FrameHeader.size * 4)
            ?? FrameDecoder(direction: pipe.direction, maximumPayload: pipe.maximumPayload)
        ring.wakeTaken()
    }

    /// Lets `read` fill the pipe decoder's free space (one copy from the kernel); its count.
    package mutating func receiveFromPipe(_ read: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        try pipe.receive(read)
    }

    /// The next frame the pipe holds, the wake-ups before it taken (the ring told so: `woken`).
    /// After the switch anything but a wake-up and a worker's signal handler report breaks the
    /// protocol; before it, a worker's wake-up may come ahead of its `ready` being read (it
    /// switched first), a host's may not (it sends none before switching). One frame at a time:
    /// a `switchToRing` must be acted on before the frames behind it are judged.
    package mutating func nextPipeFrame(woken: inout Bool) throws(WireError) -> Frame? {
        while let frame = try pipe.nextFrame() {
            if frame.header.kind == wakeKind {
                guard frame.payload.isEmpty else { throw .malformedPayload("a wake-up carries no payload") }
                guard ring != nil || writer == .worker else { throw .unexpectedMessage("a wake-up before the host switched to the ring") }
                woken = true
                continue
            }
            if ring != nil, !allowedOnPipeAfterSwitch(frame.header.kind) {
                throw .unexpectedMessage("a \(frame.header.kind) frame on the pipe after the \(writer) switched to the ring")
            }
            return frame
        }
        return nil
    }

    /// Every frame the pipe holds, in order, into `frames`; whether wake-ups were among them
    /// (taken: the ring is read next).
    package mutating func takePipeFrames(into frames: inout [Frame]) throws(WireError) -> Bool {
        var woken = false
        while let frame = try nextPipeFrame(woken: &woken) { frames.append(frame) }
        if woken { ring?.wakeTaken() }
        return woken
    }

    /// One read of the ring into its decoder's free space (as much as the decoder makes room
    /// for, at most `limit` bytes): the count, 0 when the ring is empty. One read at a time, so
    /// that the decoder's buffer stays the size of a frame, not of all the ring holds.
    package mutating func receiveFromRing(atMost limit: Int = .max) throws(WireError) -> Int {
        // Taken out of the state while in use: a copy left behind would make each write to the
        // decoder's buffer copy all of it.
        guard var ring, var decoder = ringDecoder.take() else { return 0 }
        defer {
            self.ring = ring
            ringDecoder = decoder
        }
        var failure: SharedRingError?
        let count = decoder.receive { buffer in
            do throws(SharedRingError) {
                return try ring.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<min(buffer.count, limit)]))
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw .malformedPayload(failure.description) }
        return count
    }

    /// The next complete frame read from the ring.
    package mutating func nextRingFrame() throws(WireError) -> Frame? {
        guard var decoder = ringDecoder.take() else { return nil }
        defer { ringDecoder = decoder }
        return try decoder.nextFrame()
    }

    /// The stream ended: a frame cut short on the pipe or in the ring breaks the protocol.
    package mutating func finish() throws(WireError) {
        try pipe.finish()
        try ringDecoder?.finish()
    }
}
