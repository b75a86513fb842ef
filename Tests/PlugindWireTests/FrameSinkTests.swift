import CPlugindShims
import Glibc
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

/// What each side writes, decided once for host and worker: over a real pipe, and into a ring in
/// shared memory of this process, read back as the other side reads (`FrameSource`). The host's
/// way (queue, turns, no blocking) and the worker's (`write(now:)`, blocking) both.
@Suite("FrameSink: pipe, then ring, wake-ups, room and order", .tags(.unit))
struct FrameSinkTests {
    /// A pipe whose ends never block, one page deep when `small`.
    private struct TestPipe {
        let pipe: PlugindSystem.Pipe

        init(small: Bool = false) throws {
            pipe = try PlugindSystem.Pipe()
            try pipe.writeEnd.setNonBlocking()
            try pipe.readEnd.setNonBlocking()
            if small {
                var actual: CInt = 0
                #expect(plugind_shim_set_pipe_size(pipe.writeEnd.rawValue, 4096, &actual) == 0)
            }
        }

        func close() { pipe.close() }

        /// The bytes the pipe holds now.
        func drain() -> [UInt8] {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while case .transferred(let count) = buffer.withUnsafeMutableBytes({ pipe.readEnd.readAvailable(into: $0) }) {
                bytes += buffer[..<count]
            }
            return bytes
        }
    }

    /// The shared memory of both rings, as both sides map it (here one mapping).
    private static func sharedMemory() throws -> SharedMemory {
        let (memory, descriptor) = try SharedMemory.create(size: SharedMemoryLayout(regionSize: 16 << 10).totalSize)
        descriptor.close()
        return memory
    }

    private static func frames(_ bytes: [UInt8], direction: FrameKind.Direction) throws -> [Frame] {
        var decoder = FrameDecoder(direction: direction, maximumPayload: 4 << 20)
        decoder.append(bytes)
        var frames: [Frame] = []
        while let frame = try decoder.nextFrame() { frames.append(frame) }
        try decoder.finish()
        return frames
    }

    /// Everything the ring holds now.
    private static func drain(_ ring: inout SharedRingConsumer) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = try buffer.withUnsafeMutableBytes { try ring.read(into: $0) }
            guard count > 0 else { return bytes }
            bytes += buffer[..<count]
        }
    }

    /// One turn of the host's writer (`FrameWriter.flush`), on this thread.
    private static func flush(_ sink: inout FrameSink, to pipe: TestPipe, roomAvailable: Bool = false) -> FrameSink.Outcome {
        if let refused = sink.takeTurn(roomAvailable: roomAvailable) { return refused }
        while var write = sink.nextWrite() {
            let written: FrameSink.Written
            switch write.lane {
            case .pipe:
                written = write.writePipe { vectors in
                    switch pipe.pipe.writeEnd.writeAvailable(gathering: vectors) {
                    case .transferred(let count): count
                    case .wouldBlock, .endOfFile: 0
                    case .failed: nil
                    }
                }
            case .ring:
                written = write.writeRing { wake in
                    if case .failed = pipe.pipe.writeEnd.writeAvailable(wake) { return false }
                    return true
                }
            }
            if let outcome = sink.complete(write, written) { return outcome }
        }
        return .done
    }

    /// The worker's way: one blocking write of `message` through `sink`; `pipe` writes at most
    /// `chunk` bytes a call, as a pipe that takes part of a write.
    private static func send(
        _ message: WorkerMessage, through sink: inout FrameSink, pipe: TestPipe, chunk: Int = .max,
        waitForRoom: (SharedRingProducer) -> Void = { _ in Issue.record("the ring was full") }
    ) throws {
        let frame = message.encode()
        try frame.header.bytes.withUnsafeBytes { header in
            try frame.payload.withUnsafeBytes { payload in
                try sink.write(
                    now: FrameBytes(header: header, payload: payload),
                    pipe: { (vectors) throws(SystemError) -> Int in
                        var limited = Array(vectors)
                        var left = chunk
                        for index in limited.indices {
                            limited[index].iov_len = min(limited[index].iov_len, left)
                            left -= limited[index].iov_len
                        }
                        let count = limited.withUnsafeBufferPointer { writev(pipe.pipe.writeEnd.rawValue, $0.baseAddress, CInt($0.count)) }
                        guard count >= 0 else { throw SystemError("writev", .brokenPipe) }
                        return count
                    },
                    waitForRoom: { (ring) throws(SystemError) in waitForRoom(ring) },
                    ringViolation: { _ in SystemError("the ring", .protocolError) })
            }
        }
    }

    private static func request(_ id: UInt64, size: Int) -> HostMessage {
        .request(id: id, connection: 1, bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(id)) })
    }

    @Test("the host's frames: on the pipe up to its switch, in the ring after it, one wake-up; the reader gets them in order")
    func hostOrderAcrossTheSwitch() throws {
        let pipe = try TestPipe()
        defer { pipe.close() }
        let memory = try Self.sharedMemory()
        var sink = FrameSink(from: .host)
        // Both halves fit: the pipe's 64 KiB, the ring's 16 KiB.
        let sent = (1...40).map { Self.request(UInt64($0), size: $0 * 37 % 300) }
        for message in sent[..<20] { sink.enqueue(message.encode().header, payload: message.encode().payload) }
        sink.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toWorkerRing))
        #expect(sink.usesRing)
        for message in sent[20...] { sink.enqueue(message.encode().header, payload: message.encode().payload) }
        #expect(Self.flush(&sink, to: pipe) == .done)
        #expect(sink.isEmpty && sink.queuedBytes == 0)

        // Read as the worker does: the pipe up to the switch, then the ring.
        let pipeFrames = try Self.frames(pipe.drain(), direction: .hostToWorker)
        #expect(pipeFrames.map(\.header.kind) == Array(repeating: .request, count: 20) + [.switchToRing, .wake])
        var source = FrameSource(from: .host, maximumPayload: 1 << 20)
        var received: [HostMessage] = []
        for frame in pipeFrames where frame.header.kind == .request { received.append(try HostMessage(frame)) }
        source.switchToRing(SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toWorkerRing))
        while try source.receiveFromRing() > 0 {
            while let frame = try source.nextRingFrame() { received.append(try HostMessage(frame)) }
        }
        #expect(received == sent)
    }

    @Test("the worker's frames: its ready the pipe's last, every later one in the ring; the host reads them in order")
    func workerOrderAcrossTheSwitch() throws {
        let pipe = try TestPipe()
        defer { pipe.close() }
        let memory = try Self.sharedMemory()
        var sink = FrameSink(from: .worker)
        let sent = (0..<30).map { WorkerMessage.log(level: .info, message: "line \($0)") }
        for message in sent[..<10] { try Self.send(message, through: &sink, pipe: pipe) }
        sink.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toHostRing))
        for message in sent[10...] { try Self.send(message, through: &sink, pipe: pipe) }

        // Read as the host does (`WorkerInput`): the pipe, then (told of the switch) the ring.
        var source = FrameSource(from: .worker, maximumPayload: 1 << 20)
        let bytes = pipe.drain()
        _ = bytes.withUnsafeBytes { all in
            source.receiveFromPipe { buffer in
                buffer.copyMemory(from: all)
                return all.count
            }
        }
        var frames: [Frame] = []
        #expect(try source.takePipeFrames(into: &frames))
        source.switchToRing(SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toHostRing))
        while try source.receiveFromRing() > 0 {
            while let frame = try source.nextRingFrame() { frames.append(frame) }
        }
        #expect(try frames.map { try WorkerMessage($0) } == sent)
        // Exactly one wake-up: the host never took it, so none more was due.
        #expect(try Self.frames(bytes, direction: .workerToHost).filter { $0.header.kind == .wakeHost }.count == 1)
    }

    @Test("a wake-up exactly when the reader may sleep: not while one is pending, not while it polls, again once it took the last")
    func wakeUpsWhenTheReaderMaySleep() throws {
        let pipe = try TestPipe()
        defer { pipe.close() }
        let memory = try Self.sharedMemory()
        var sink = FrameSink(from: .worker)
        sink.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toHostRing))
        var reader = SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toHostRing)
        func wakeUps() throws -> Int {
            try Self.frames(pipe.drain(), direction: .workerToHost).filter { $0.header.kind == .wakeHost }.count
        }

        try Self.send(.log(level: .info, message: "one"), through: &sink, pipe: pipe)
        #expect(try wakeUps() == 1)
        // The reader has not taken that one: it will read the ring anyway.
        try Self.send(.log(level: .info, message: "two"), through: &sink, pipe: pipe)
        #expect(try wakeUps() == 0)
        // Taken and read: it may sleep again.
        reader.wakeTaken()
        #expect(try Self.drain(&reader).count > 0)
        #expect(try reader.mayWait())
        try Self.send(.log(level: .info, message: "three"), through: &sink, pipe: pipe)
        #expect(try wakeUps() == 1)
        // A reader that polls needs none.
        reader.wakeTaken()
        _ = try Self.drain(&reader)
        reader.setPolling(true)
        try Self.send(.log(level: .info, message: "four"), through: &sink, pipe: pipe)
        #expect(try wakeUps() == 0)
        // About to sleep, it looks once more and finds the frame: no wake-up was lost.
        #expect(try !reader.mayWait())
        _ = try Self.drain(&reader)
        try Self.send(.log(level: .info, message: "five"), through: &sink, pipe: pipe)
        #expect(try wakeUps() == 1)

        // The host's writer: one wake-up for all a turn wrote.
        var host = FrameSink(from: .host)
        host.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toWorkerRing))
        for id in 1...10 { host.enqueue(FrameHeader(kind: .cancel, requestID: UInt64(id), payloadLength: 0), payload: []) }
        #expect(Self.flush(&host, to: pipe) == .done)
        #expect(try Self.frames(pipe.drain(), direction: .hostToWorker).map(\.header.kind) == [.switchToRing, .wake])
    }

    @Test("a full ring: the host's frames wait in order until the reader says it read, then go on where they stopped")
    func fullRingQueuesAndResumes() throws {
        let pipe = try TestPipe()
        defer { pipe.close() }
        let memory = try Self.sharedMemory()
        var sink = FrameSink(from: .host)
        sink.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toWorkerRing))
        // Far more than the ring's 16 KiB.
        let sent = (1...12).map { Self.request(UInt64($0), size: 5000 + $0) }
        for message in sent { sink.enqueue(message.encode().header, payload: message.encode().payload) }
        #expect(Self.flush(&sink, to: pipe) == .ringFull)
        // Nothing is tried again until the reader said it read; what waits is counted.
        let held = sink.queuedBytes
        #expect(held > 0 && !sink.waitsForPipe)
        sink.enqueue(FrameHeader(kind: .cancel, requestID: 99, payloadLength: 0), payload: [])
        #expect(Self.flush(&sink, to: pipe) == .waitingForRoom)
        #expect(sink.queuedBytes == held + FrameHeader.size)

        var reader = SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toWorkerRing)
        var bytes: [UInt8] = []
        var turns = 0
        var outcome = FrameSink.Outcome.ringFull
        while outcome != .done, turns < 1000 {
            turns += 1
            bytes += try Self.drain(&reader)
            // The writer asked to be told: the reader's word (a `wakeHost`), and the next turn.
            #expect(reader.producerNeedsWake())
            outcome = Self.flush(&sink, to: pipe, roomAvailable: true)
            #expect(outcome == .done || outcome == .ringFull)
        }
        bytes += try Self.drain(&reader)
        // About 60 KiB through 16 KiB: the writer stopped and went on several times.
        #expect(turns >= 3)
        let frames = try Self.frames(bytes, direction: .hostToWorker)
        #expect(try frames.dropLast().map { try HostMessage($0) } == sent)
        #expect(frames.last?.header.requestID == 99)
        #expect(sink.isEmpty && sink.queuedBytes == 0)
    }

    @Test("the reader's word that it read, arriving while another thread's turn fills the ring, is not lost: that turn writes on")
    func roomWordDuringTheTurn() throws {
        let pipe = try TestPipe()
        defer { pipe.close() }
        let memory = try Self.sharedMemory()
        var sink = FrameSink(from: .host)
        sink.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toWorkerRing))
        #expect(Self.flush(&sink, to: pipe) == .done)
        let sent = (1...6).map { Self.request(UInt64($0), size: 5000 + $0) }
        for message in sent { sink.enqueue(message.encode().header, payload: message.encode().payload) }
        var reader = SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toWorkerRing)
        // A caller's turn (`FrameWriter.flush` on its own thread) fills the ring and asks the
        // reader to say when it read…
        #expect(sink.takeTurn() == nil)
        guard var write = sink.nextWrite() else {
            Issue.record("nothing to write")
            return
        }
        let written = write.writeRing { wake in
            if case .failed = pipe.pipe.writeEnd.writeAvailable(wake) { return false }
            return true
        }
        // … the reader reads and says so before that turn ended, and the loop's turn, told of
        // the room, finds the caller's turn still writing.
        var bytes = try Self.drain(&reader)
        #expect(reader.producerNeedsWake())
        #expect(sink.takeTurn(roomAvailable: true) == .busy)
        // The caller's turn ends: not waiting for a word that already came, it writes on.
        #expect(sink.complete(write, written) == nil)
        var outcome: FrameSink.Outcome?
        var turns = 0
        while outcome != .done, turns < 100 {
            turns += 1
            guard var next = sink.nextWrite() else {
                outcome = .done
                break
            }
            let more = next.writeRing { wake in
                if case .failed = pipe.pipe.writeEnd.writeAvailable(wake) { return false }
                return true
            }
            bytes += try Self.drain(&reader)
            if let ended = sink.complete(next, more) {
                outcome = ended
                if ended == .ringFull {
                    #expect(reader.producerNeedsWake())
                    outcome = Self.flush(&sink, to: pipe, roomAvailable: true)
                    bytes += try Self.drain(&reader)
                }
            }
        }
        bytes += try Self.drain(&reader)
        let frames = try Self.frames(bytes, direction: .hostToWorker)
        #expect(try frames.map { try HostMessage($0) } == sent)
        #expect(sink.isEmpty)
    }

    @Test("a full ring: the worker waits for room (here, the reader reads meanwhile) and goes on; a 1 MiB frame arrives whole")
    func largeFrameThroughAFullRing() throws {
        let pipe = try TestPipe()
        defer { pipe.close() }
        let memory = try Self.sharedMemory()
        var sink = FrameSink(from: .worker)
        sink.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toHostRing))
        var reader = SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toHostRing)
        var bytes: [UInt8] = []
        var waits = 0
        let large = WorkerMessage.response(id: 7, bytes: (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 * 7) })
        try Self.send(large, through: &sink, pipe: pipe) { _ in
            waits += 1
            // The writer asked to be woken once the reader read: the reader reads, and says so.
            bytes += (try? Self.drain(&reader)) ?? []
            #expect(reader.producerNeedsWake())
        }
        bytes += try Self.drain(&reader)
        // About once a ring's worth.
        #expect(waits > (1 << 20) / SharedMemoryLayout.ringSize / 2)
        #expect(try Self.frames(bytes, direction: .workerToHost).map { try WorkerMessage($0) } == [large])
        // One wake-up: the reader never took it.
        #expect(try Self.frames(pipe.drain(), direction: .workerToHost).map(\.header.kind) == [.wakeHost])
    }

    @Test("a pipe that takes part of a write: the host's queue goes on where the pipe stopped, across gathered writes, 1 MiB included")
    func hostPartialWritesOnAPipe() throws {
        let pipe = try TestPipe(small: true)
        defer { pipe.close() }
        var sink = FrameSink(from: .host)
        var sent = (1...150).map { Self.request(UInt64($0), size: $0 * 7 % 900) }
        sent.insert(Self.request(1000, size: 1 << 20), at: 70)
        for message in sent { sink.enqueue(message.encode().header, payload: message.encode().payload) }
        var bytes: [UInt8] = []
        var blocked = 0
        var outcome = Self.flush(&sink, to: pipe)
        while outcome != .done {
            #expect(outcome == .blocked)
            blocked += 1
            // Full: nothing is tried until the side says there is room.
            #expect(Self.flush(&sink, to: pipe) == .waitingForRoom)
            bytes += pipe.drain()
            outcome = Self.flush(&sink, to: pipe, roomAvailable: true)
        }
        bytes += pipe.drain()
        #expect(blocked > 200)
        #expect(try Self.frames(bytes, direction: .hostToWorker).map { try HostMessage($0) } == sent)
        #expect(sink.isEmpty && sink.queuedBytes == 0)
    }

    @Test("a pipe that takes part of a write: the worker's blocking write goes on where the pipe stopped")
    func workerPartialWritesOnAPipe() throws {
        let pipe = try TestPipe()
        defer { pipe.close() }
        var sink = FrameSink(from: .worker)
        let sent: [WorkerMessage] = [.log(level: .info, message: "a"), .response(id: 3, bytes: Array(repeating: 9, count: 3000)), .goodbye]
        var bytes: [UInt8] = []
        for message in sent {
            // A few bytes a write: some end inside the header, some inside the payload.
            try Self.send(message, through: &sink, pipe: pipe, chunk: 5)
            bytes += pipe.drain()
        }
        #expect(try Self.frames(bytes, direction: .workerToHost).map { try WorkerMessage($0) } == sent)
    }

    @Test("closed: what waits is dropped, nothing more is queued or written; a reader gone closes it too")
    func close() throws {
        #expect(plugind_shim_ignore_sigpipe() == 0)
        let pipe = try TestPipe()
        defer { pipe.close() }
        var sink = FrameSink(from: .host)
        sink.enqueue(FrameHeader(kind: .cancel, requestID: 1, payloadLength: 0), payload: [])
        sink.close()
        #expect(sink.isClosed && sink.isEmpty && sink.queuedBytes == 0)
        sink.enqueue(FrameHeader(kind: .cancel, requestID: 2, payloadLength: 0), payload: [])
        sink.enqueue(raw: [1, 2, 3])
        #expect(sink.isEmpty && sink.queuedBytes == 0)
        #expect(Self.flush(&sink, to: pipe) == .closed)
        #expect(pipe.drain().isEmpty)

        // The reader's end closed: the write fails, the sink closes and drops what waits.
        let deadPipe = try TestPipe()
        defer { deadPipe.pipe.writeEnd.close() }
        deadPipe.pipe.readEnd.close()
        var gone = FrameSink(from: .host)
        gone.enqueue(FrameHeader(kind: .cancel, requestID: 1, payloadLength: 0), payload: [])
        gone.enqueue(raw: Array(repeating: 0, count: 100))
        #expect(Self.flush(&gone, to: deadPipe) == .closed)
        #expect(gone.isClosed && gone.queuedBytes == 0)
    }
}
