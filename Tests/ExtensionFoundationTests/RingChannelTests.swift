import Glibc
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("The host's side of the rings: the writer's lanes and what it reads from a worker that lies", .tags(.unit))
struct RingChannelTests {
    private func sharedMemory() throws -> SharedMemory {
        let layout = SharedMemoryLayout(regionSize: 16 << 10)
        let (memory, descriptor) = try SharedMemory.create(size: layout.totalSize)
        descriptor.close()
        return memory
    }

    /// The frames the pipe holds now.
    private func pipeFrames(_ descriptor: FileDescriptor, direction: FrameKind.Direction) throws -> [Frame] {
        var decoder = FrameDecoder(direction: direction, maximumPayload: 1 << 20)
        _ = decoder.receive { descriptor.readAvailable(into: $0).count }
        var frames: [Frame] = []
        while let frame = try decoder.nextFrame() { frames.append(frame) }
        return frames
    }

    /// Runs `body` with what the host reads from a worker that switched to the rings: the
    /// worker's frame pipe, the memory and the input; closes the pipes afterwards.
    private func withSwitchedInput(_ body: (PlugindSystem.Pipe, SharedMemory, WorkerInput) throws -> Void) throws {
        let frames = try PlugindSystem.Pipe()
        let output = try PlugindSystem.Pipe()
        defer {
            frames.close()
            output.close()
        }
        try frames.readEnd.setNonBlocking()
        let memory = try sharedMemory()
        let input = WorkerInput(frames: frames.readEnd, output: output.readEnd, maximumPayload: 1 << 20)
        input.useRing(SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toHostRing))
        try body(frames, memory, input)
    }

    /// Writes `message` into the worker → host ring as the worker does, and publishes it.
    private func writeToRing(_ message: WorkerMessage, in memory: SharedMemory) throws {
        var worker = SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toHostRing)
        let frame = message.encode()
        _ = try (frame.header.bytes + frame.payload).withUnsafeBytes { try worker.append($0) }
        worker.publish()
    }

    @Test("frames queued after the switch go into the ring behind it; a full ring waits for the worker's word that it read")
    func writerLanes() throws {
        let pipe = try PlugindSystem.Pipe()
        defer { pipe.close() }
        try pipe.writeEnd.setNonBlocking()
        try pipe.readEnd.setNonBlocking()
        let memory = try sharedMemory()
        let writer = FrameWriter(descriptor: pipe.writeEnd)
        writer.enqueue(.cancel(id: 1))
        writer.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toWorkerRing))
        #expect(writer.usesRing)
        let large = HostMessage.request(id: 2, connection: 0, bytes: (0..<40_000).map { UInt8(truncatingIfNeeded: $0) })
        writer.enqueue(large)
        #expect(writer.flush() == .ringFull)
        // Nothing is tried again until the worker says it read.
        #expect(writer.flush() == .waitingForRoom)
        #expect(!writer.waitsForPipe)
        // The pipe: the frame from before the switch, the switch, one wake-up.
        #expect(try pipeFrames(pipe.readEnd, direction: .hostToWorker).map(\.header.kind) == [.cancel, .switchToRing, .wake])
        var worker = SharedRingConsumer(memory: memory, layout: SharedMemoryLayout.toWorkerRing)
        worker.wakeTaken()
        var decoder = FrameDecoder(direction: .hostToWorker, maximumPayload: 1 << 20)
        var frame: Frame?
        var rounds = 0
        while frame == nil && rounds < 100 {
            rounds += 1
            _ = try decoder.receive { try worker.read(into: $0) }
            frame = try decoder.nextFrame()
            // The worker's word that it read (a `wakeHost` in the channel): the writer goes on.
            if worker.producerNeedsWake() { _ = writer.flush(roomAvailable: true) }
        }
        #expect(try HostMessage(try #require(frame)) == large)
        #expect(rounds >= 3)
        #expect(writer.isEmpty)
    }

    @Test("a worker that moves the ring's read position where no reader could have put it: a violation, and nothing more is written")
    func writerRefusesALyingReader() throws {
        let pipe = try PlugindSystem.Pipe()
        defer { pipe.close() }
        try pipe.writeEnd.setNonBlocking()
        let memory = try sharedMemory()
        let writer = FrameWriter(descriptor: pipe.writeEnd)
        writer.switchToRing(SharedRingProducer(memory: memory, layout: SharedMemoryLayout.toWorkerRing))
        writer.enqueue(.cancel(id: 1))
        #expect(writer.flush() == .done)
        // Ahead of every byte written.
        memory.storeCounter(1_000_000, at: SharedMemoryLayout.toWorkerRing.wordsOffset + 64)
        writer.enqueue(.cancel(id: 2))
        guard case .violation(let reason) = writer.flush() else {
            Issue.record("a lying read position was accepted")
            return
        }
        #expect(reason.contains("impossible state"))
        #expect(writer.flush() == .closed)
    }

    @Test("after the switch the pipe brings only wake-ups and the signal handlers' reports; the ring's frames follow them")
    func inputAfterTheSwitch() throws {
        try withSwitchedInput { frames, memory, input in
            try writeToRing(.response(id: 4, bytes: [1, 2, 3]), in: memory)
            #expect(input.ringHasInput)
            let report = WorkerMessage.fatalSignal(
                FatalSignalReport(signal: 11, code: 1, faultAddress: 0, addressSpaceBytes: 0, openDescriptors: 0)
            ).encode()
            let pipeBytes = FrameHeader(kind: .wakeHost, payloadLength: 0).bytes + report.header.bytes + report.payload
            #expect(pipeBytes.withUnsafeBytes { Glibc.write(frames.writeEnd.rawValue, $0.baseAddress, $0.count) } == pipeBytes.count)
            let batch = input.read(budget: 1 << 20)
            #expect(batch.violation == nil)
            #expect(batch.woken)
            #expect(batch.frames.map(\.header.kind) == [.fatalSignal, .response])
            #expect(!input.ringHasInput)

            // Anything else on the pipe now breaks the protocol.
            let log = WorkerMessage.log(level: .info, message: "from the pipe").encode()
            let forbidden = log.header.bytes + log.payload
            #expect(forbidden.withUnsafeBytes { Glibc.write(frames.writeEnd.rawValue, $0.baseAddress, $0.count) } == forbidden.count)
            #expect(input.read(budget: 1 << 20).violation != nil)
        }
    }

    @Test("a worker that overwrites the host's published read position makes the host see no input that no read takes")
    func inputIgnoresAForgedReadPosition() throws {
        try withSwitchedInput { _, memory, input in
            try writeToRing(.goodbye, in: memory)
            #expect(input.ringHasInput)
            #expect(input.read(budget: 1 << 20, pipe: false).frames.count == 1)
            #expect(!input.ringHasInput)
            // The host's published read position (64 bytes into the ring's words) set back to 0: before,
            // every look saw input and no read took any, and lookers spun until their request ended.
            memory.storeCounter(0, at: SharedMemoryLayout.toHostRing.wordsOffset + 64)
            #expect(!input.ringHasInput)
            let again = input.read(budget: 1 << 20, pipe: false)
            #expect(again.frames.isEmpty && again.violation == nil)
        }
    }

    @Test("a ring whose write position claims more than it holds: a violation, and nothing is read out of bounds")
    func inputRefusesALyingWriter() throws {
        try withSwitchedInput { _, memory, input in
            memory.storeCounter(UInt64(SharedMemoryLayout.ringSize) * 3, at: SharedMemoryLayout.toHostRing.wordsOffset)
            let batch = input.read(budget: 1 << 20, pipe: false)
            #expect(batch.frames.isEmpty)
            #expect(batch.violation?.description.contains("impossible state") == true)
        }
    }
}
