import CPlugindShims
import Glibc
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("Frame writer: gathering writes through a pipe that fills", .tags(.unit))
struct FrameWriterTests {
    @Test("frames queued faster than the pipe takes them arrive whole and in order, across partial and gathered writes")
    func orderAcrossPartialWrites() throws {
        let pipe = try PlugindSystem.Pipe()
        defer { pipe.close() }
        try pipe.writeEnd.setNonBlocking()
        var actual: CInt = 0
        // The smallest pipe the kernel gives: one page, so that frames split across writes.
        #expect(plugind_shim_set_pipe_size(pipe.writeEnd.rawValue, 4096, &actual) == 0)
        let writer = FrameWriter(descriptor: pipe.writeEnd)
        let sent: [HostMessage] = (1...200).map { index in
            .request(id: UInt64(index), connection: 1, bytes: [UInt8](repeating: UInt8(index % 251), count: index * 7 % 900))
        }
        for message in sent { writer.enqueue(message) }
        let expectedBytes = sent.reduce(0) { $0 + $1.encode().header.bytes.count + $1.encode().payload.count }
        #expect(writer.queuedBytes == expectedBytes)
        var receiver = FrameDecoder(direction: .hostToWorker, maximumPayload: 1 << 20)
        var received: [HostMessage] = []
        var blocked = 0
        var buffer = [UInt8](repeating: 0, count: 1500)
        while received.count < sent.count {
            // As the loop does: after a read made room, the writer is told so.
            switch writer.flush(roomAvailable: true) {
            case .blocked: blocked += 1
            case .done, .busy: break
            case .waitingForRoom, .closed, .ringFull, .violation: Issue.record("the writer did not try although it was told of room")
            }
            // The reader takes less than a page at a time, so that the writer meets a full pipe.
            let count = buffer.withUnsafeMutableBytes { Glibc.read(pipe.readEnd.rawValue, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            receiver.append(Array(buffer[..<count]))
            while let frame = try receiver.nextFrame() { received.append(try HostMessage(frame)) }
        }
        #expect(received == sent)
        #expect(blocked > 0)
        #expect(writer.isEmpty && writer.queuedBytes == 0)
    }

    @Test("once the pipe is full, queuing more writes nothing until the loop says there is room, then all of it arrives")
    func fullPipeWaitsForRoom() throws {
        let pipe = try PlugindSystem.Pipe()
        defer { pipe.close() }
        try pipe.writeEnd.setNonBlocking()
        try pipe.readEnd.setNonBlocking()
        var actual: CInt = 0
        #expect(plugind_shim_set_pipe_size(pipe.writeEnd.rawValue, 4096, &actual) == 0)
        let writer = FrameWriter(descriptor: pipe.writeEnd)
        let payload = [UInt8](repeating: 7, count: 3000)
        writer.enqueue(.request(id: 1, connection: 1, bytes: payload))
        writer.enqueue(.request(id: 2, connection: 1, bytes: payload))
        #expect(writer.flush() == .blocked)
        let heldAfterBlock = writer.queuedBytes
        // A reader makes room, but nobody tells the writer: it does not try.
        var buffer = [UInt8](repeating: 0, count: 8192)
        var received: [UInt8] = []
        func drain() {
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(pipe.readEnd.rawValue, $0.baseAddress, $0.count) }
                guard count > 0 else { return }
                received += buffer[..<count]
            }
        }
        drain()
        writer.enqueue(.request(id: 3, connection: 1, bytes: payload))
        #expect(writer.flush() == .waitingForRoom)
        let third = HostMessage.request(id: 3, connection: 1, bytes: payload).encode()
        #expect(writer.queuedBytes == heldAfterBlock + third.header.bytes.count + third.payload.count)
        var outcome = writer.flush(roomAvailable: true)
        while outcome == .blocked {
            drain()
            outcome = writer.flush(roomAvailable: true)
        }
        drain()
        #expect(outcome == .done)
        var receiver = FrameDecoder(direction: .hostToWorker, maximumPayload: 1 << 20)
        receiver.append(received)
        var ids: [UInt64] = []
        while let frame = try receiver.nextFrame() {
            if case .request(let id, _, _) = try HostMessage(frame) { ids.append(id) }
        }
        #expect(ids == [1, 2, 3])
    }

    @Test("a worker's end closed: the writer reports closed and drops what waits")
    func closedEnd() throws {
        // As the host does: a write to a dead worker is EPIPE, not a signal.
        #expect(plugind_shim_ignore_sigpipe() == 0)
        let pipe = try PlugindSystem.Pipe()
        defer { pipe.writeEnd.close() }
        pipe.readEnd.close()
        let writer = FrameWriter(descriptor: pipe.writeEnd)
        writer.enqueue(.shutdown)
        #expect(writer.flush() == .closed)
        #expect(writer.queuedBytes == 0)
    }
}
