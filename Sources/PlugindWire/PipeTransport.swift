import Glibc
package import PlugindSystem
import Synchronization

/// Blocking frame I/O over a pair of descriptors: the worker's side of the protocol. Sending is
/// serialised by a lock because plugin threads may post messages while the worker answers a
/// request; receiving is for one thread at a time, through the same `FrameDecoder` the host
/// reads with: one read takes in as many frames as have arrived.
///
/// Once both sides agreed to `ProtocolFeature.ring`, frames travel through the shared rings
/// (`SharedRing`): the worker's from its `ready` on (`sendReady(_:thenUseRings:)`), the host's
/// from its `switchToRing` on; the pipes then carry only wake-ups, and tell each side when the
/// other is gone. What goes where is decided by `FrameSource` and `FrameSink`, as in the host;
/// this type keeps the worker's system calls and its ways of waiting (it blocks).
package final class PipeTransport: Sendable {
    package let input: FileDescriptor
    package let output: FileDescriptor
    private struct Receiving {
        /// The host's frames: its pipe, then (after its `switchToRing`) its ring.
        var source: FrameSource
        /// A frame (or the error decoding it) taken out ahead by `hasBufferedFrame`.
        var lookahead: Result<Frame, WireError>?
        /// The ring the host will switch to, once this side agreed to it.
        var agreedRing: SharedRingConsumer?
        /// The host closed the pipe; what is left in the ring is still read.
        var pipeEnded = false
    }

    private let receiving: Locked<Receiving>
    /// What this side writes: the pipe, then (from its `ready` on) the worker → host ring; its
    /// lock serialises sending.
    private let sending = Locked(FrameSink(from: .worker))

    package init(input: FileDescriptor, output: FileDescriptor, maximumPayload: Int) {
        self.input = input
        self.output = output
        // A page at first: a worker's frames are mostly small (large payloads travel in the
        // shared region), and the buffer grows for a large one. Every page of it a worker has
        // touched stays that worker's own memory.
        receiving = Locked(Receiving(source: FrameSource(from: .host, maximumPayload: maximumPayload, initialCapacity: 4 << 10)))
    }

    /// The largest payload `receive()` accepts; larger frames are refused before allocation.
    package var maximumPayload: Int {
        get { receiving.withLock { $0.source.maximumPayload } }
        set { receiving.withLock { $0.source.maximumPayload = newValue } }
    }

    /// Sends this side's last frame for the pipe — its `ready`, which listed
    /// `ProtocolFeature.ring` — and from then on writes to the worker → host ring; the host's
    /// frames come through the other ring once it says so. One turn of the sending lock: a frame
    /// another thread sends meanwhile (a log from a thread the plugin's `init` started) goes after
    /// it into the ring, where the host reads from the `ready` on, never onto the pipe behind it
    /// (which the host refuses as a protocol violation).
    /// Once only: a second call would go through the ring and leave it as it is.
    package func sendReady(_ ready: Ready, thenUseRings memory: SharedMemory) throws(SystemError) {
        // Before the `ready`: the host switches only after reading it.
        receiving.withLock { $0.agreedRing = $0.agreedRing ?? SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toWorkerRing) }
        try send(WorkerMessage.ready(ready).encode()) { sink in
            sink.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toHostRing))
        }
    }

    /// Whether a frame has arrived already that `receive()` returns without reading: a reader
    /// that polls the descriptor before it reads must ask this first, since one read may have
    /// taken in several frames.
    package var hasBufferedFrame: Bool {
        receiving.withLock { state in takeBufferedFrame(&state) }
    }

    private func takeBufferedFrame(_ state: inout Receiving) -> Bool {
        if state.lookahead != nil { return true }
        do throws(WireError) {
            guard let frame = try nextFrame(&state) else { return false }
            state.lookahead = .success(frame)
        } catch {
            state.lookahead = .failure(error)
        }
        return true
    }

    /// Waits up to `milliseconds` for a frame (polling first until `pollingUntil`, when given):
    /// true when `receive()` has something to return (a frame, an error, or the end) without
    /// waiting long. A wake-up with nothing behind it is taken and is false.
    package func awaitFrame(waitingMilliseconds milliseconds: Int32, pollingUntil: MonotonicInstant?) -> Bool {
        receiving.withLock { state in
            if takeBufferedFrame(&state) { return true }
            guard let ring = state.source.ring else {
                if let pollingUntil { _ = input.awaitReadable(spinUntil: pollingUntil, sleepUntil: pollingUntil) }
                var descriptor = pollfd(fd: input.rawValue, events: Int16(POLLIN), revents: 0)
                return poll(&descriptor, 1, milliseconds) > 0
            }
            do throws(WireError) {
                if state.pipeEnded { return true }
                if let pollingUntil, try Self.pollRing(ring, until: pollingUntil) { return true }
                guard try Self.ringMayWait(ring) else { return true }
                var descriptor = pollfd(fd: input.rawValue, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, milliseconds) > 0 else { return false }
                // Readable: one read takes the wake-ups (or the end) without blocking.
                try takeWakeUps(&state)
                if state.pipeEnded { return true }
                return try Self.ringRead { () throws(SharedRingError) in try ring.available() } > 0
            } catch {
                state.lookahead = .failure(error)
                return true
            }
        }
    }

    /// Reads one host-to-worker frame, or nil on end of stream between frames. With
    /// `pollingUntil`, a read that would sleep polls for the frame until then first
    /// (`BusyPolling`).
    package func receive(pollingUntil: MonotonicInstant? = nil) throws -> Frame? {
        try receiving.withLock { (state) throws(WireError) -> Frame? in
            if let ahead = state.lookahead {
                state.lookahead = nil
                return try ahead.get()
            }
            while true {
                if let frame = try nextFrame(&state) { return frame }
                if let ring = state.source.ring {
                    if state.pipeEnded {
                        try state.source.finish()
                        return nil
                    }
                    if let pollingUntil, try Self.pollRing(ring, until: pollingUntil) { continue }
                    guard try Self.ringMayWait(ring) else { continue }
                    try takeWakeUps(&state)
                    continue
                }
                if let pollingUntil, MonotonicInstant.now < pollingUntil {
                    _ = input.awaitReadable(spinUntil: pollingUntil, sleepUntil: pollingUntil)
                }
                let count = try Self.readPipe(into: &state.source, from: input)
                if count == 0 {
                    try state.source.finish()
                    return nil
                }
            }
        }
    }

    /// The next frame already received: from the ring once the host switched to it, else from the
    /// pipe. Takes the host's switch when it comes.
    private func nextFrame(_ state: inout Receiving) throws(WireError) -> Frame? {
        if let ring = state.source.ring {
            if let frame = try state.source.nextRingFrame() { return frame }
            let count = try state.source.receiveFromRing()
            // The host found the ring full and waits for word that there is room: a wake-up (a
            // host that is gone learns nothing).
            if count > 0, ring.producerNeedsWake() { try? FrameSink.writeWakeUp(from: .worker, through: writeVectored) }
            return count > 0 ? try state.source.nextRingFrame() : nil
        }
        var woken = false
        guard let frame = try state.source.nextPipeFrame(woken: &woken) else { return nil }
        guard frame.header.kind == .switchToRing else { return frame }
        guard let agreed = state.agreedRing, frame.payload.isEmpty else {
            throw .unexpectedMessage("the host switched to a ring the worker did not agree to")
        }
        state.source.switchToRing(agreed)
        // Anything the pipe holds after the switch is wake-ups: taken, and the ring read.
        var none: [Frame] = []
        _ = try state.source.takePipeFrames(into: &none)
        return try nextFrame(&state)
    }

    /// Polls the ring until `deadline` (or until the processor is wanted elsewhere), saying so in
    /// the ring, so that the host sends no wake-up meanwhile. True when bytes arrived.
    private static func pollRing(_ ring: SharedRingConsumer, until deadline: MonotonicInstant) throws(WireError) -> Bool {
        ring.setPolling(true)
        while MonotonicInstant.now < deadline {
            if try ringRead({ () throws(SharedRingError) in try ring.available() }) > 0 { return true }
            if !BusyPolling.yieldUncontended() { break }
        }
        return false
    }

    /// Before sleeping on the pipe: false when bytes arrived in the ring meanwhile.
    private static func ringMayWait(_ ring: SharedRingConsumer) throws(WireError) -> Bool {
        try ringRead { () throws(SharedRingError) in try ring.mayWait() }
    }

    /// Blocks until the pipe has something (wake-ups, or the end) and takes all of it.
    private func takeWakeUps(_ state: inout Receiving) throws(WireError) {
        let count: Int
        do {
            count = try Self.readPipe(into: &state.source, from: input)
        } catch {
            state.pipeEnded = true
            return
        }
        if count == 0 {
            state.pipeEnded = true
            try state.source.finish()
        }
        // After the switch the pipe holds wake-ups alone: `takePipeFrames` refuses anything else.
        var none: [Frame] = []
        _ = try state.source.takePipeFrames(into: &none)
        state.source.ring?.wakeTaken()
    }

    private static func readPipe(into source: inout FrameSource, from input: FileDescriptor) throws(WireError) -> Int {
        do {
            return try source.receiveFromPipe { buffer in try input.read(into: buffer) }
        } catch let error as WireError {
            throw error
        } catch {
            // The host's end failed: as if it closed it.
            return 0
        }
    }

    private static func ringRead<Value>(_ body: () throws(SharedRingError) -> Value) throws(WireError) -> Value {
        do {
            return try body()
        } catch {
            throw .malformedPayload(error.description)
        }
    }

    /// Writes a header and its payload with one writev where possible; through the ring once the
    /// worker agreed to it. Blocks while the pipe or the ring has no room.
    package func send(_ header: FrameHeader, payload: UnsafeRawBufferPointer) throws(SystemError) {
        try send(header, payload: payload, then: { _ in })
    }

    /// Sends a frame and then, under the same lock, `then` may change where later frames go.
    private func send(_ header: FrameHeader, payload: UnsafeRawBufferPointer, then: (inout FrameSink) -> Void) throws(SystemError) {
        var headerBytes = (UInt64(0), UInt64(0), UInt64(0))
        try withUnsafeMutableBytes(of: &headerBytes) { (headerBuffer) throws(SystemError) in
            header.encode(into: headerBuffer)
            let frame = FrameBytes(header: UnsafeRawBufferPointer(headerBuffer), payload: payload)
            try sending.withLock { (sink) throws(SystemError) in
                try sink.write(
                    now: frame, pipe: writeVectored, waitForRoom: waitForRoom,
                    ringViolation: { _ in SystemError("the host's ring", .protocolError) })
                then(&sink)
            }
        }
    }

    package func send(_ frame: Frame) throws(SystemError) {
        try send(frame, then: { _ in })
    }

    private func send(_ frame: Frame, then: (inout FrameSink) -> Void) throws(SystemError) {
        try keepingSystemError { try frame.payload.withUnsafeBytes { try send(frame.header, payload: $0, then: then) } }
    }

    package func send(_ message: WorkerMessage) throws(SystemError) {
        try send(message.encode())
    }

    /// The ring is full and the host was asked to say when it read: sleeps until it does (a
    /// futex the host wakes), at most a while, and checks that the host is still there.
    private func waitForRoom(_ ring: SharedRingProducer) throws(SystemError) {
        ring.waitForRoom(timeoutMicroseconds: 10_000)
        var descriptor = pollfd(fd: output.rawValue, events: 0, revents: 0)
        if poll(&descriptor, 1, 0) > 0, descriptor.revents & Int16(POLLERR | POLLHUP) != 0 {
            throw SystemError("write to the host", .brokenPipe)
        }
    }

    /// One blocking gathered write: its count.
    private func writeVectored(_ vectors: UnsafeBufferPointer<IOVector>) throws(SystemError) -> Int {
        try retryingInterrupts("writev") { writev(output.rawValue, vectors.baseAddress, CInt(vectors.count)) }
    }
}
