import Glibc
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@Suite("Pipe transport: the worker's frame reader", .tags(.unit))
struct PipeTransportTests {
    /// Writes `bytes` to `descriptor` whole (the pipe holds them all).
    private func write(_ bytes: [UInt8], to descriptor: FileDescriptor) {
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor.rawValue, $0.baseAddress, $0.count) }
        #expect(written == bytes.count)
    }

    @Test("frames that arrive together are taken in by one read and returned one by one; the rest is known to be there")
    func severalFramesOneRead() throws {
        let pipe = try PlugindSystem.Pipe()
        defer { pipe.close() }
        let transport = PipeTransport(input: pipe.readEnd, output: pipe.writeEnd, maximumPayload: 1 << 16)
        let messages: [HostMessage] = [.cancel(id: 1), .request(id: 2, connection: 3, bytes: [1, 2, 3]), .shutdown]
        write(messages.flatMap { $0.encode().header.bytes + $0.encode().payload }, to: pipe.writeEnd)
        #expect(try HostMessage(try #require(try transport.receive())) == messages[0])
        // The others are in the transport's buffer now, not in the pipe: a poll would not say so.
        var descriptor = pollfd(fd: pipe.readEnd.rawValue, events: Int16(POLLIN), revents: 0)
        #expect(poll(&descriptor, 1, 0) == 0)
        #expect(transport.hasBufferedFrame)
        #expect(try HostMessage(try #require(try transport.receive())) == messages[1])
        #expect(try HostMessage(try #require(try transport.receive())) == messages[2])
        #expect(!transport.hasBufferedFrame)
    }

    @Test("end of stream between frames is nil; inside a frame, or past the payload limit, an error")
    func endAndLimits() throws {
        let clean = try PlugindSystem.Pipe()
        let transport = PipeTransport(input: clean.readEnd, output: clean.writeEnd, maximumPayload: 16)
        write(HostMessage.shutdown.encode().header.bytes, to: clean.writeEnd)
        clean.writeEnd.close()
        #expect(try transport.receive() != nil)
        #expect(try transport.receive() == nil)
        clean.readEnd.close()

        let truncated = try PlugindSystem.Pipe()
        let cut = PipeTransport(input: truncated.readEnd, output: truncated.writeEnd, maximumPayload: 16)
        let frame = HostMessage.request(id: 1, connection: 1, bytes: [1, 2, 3, 4]).encode()
        write(Array((frame.header.bytes + frame.payload).dropLast(2)), to: truncated.writeEnd)
        truncated.writeEnd.close()
        #expect(throws: WireError.self) { try cut.receive() }
        truncated.readEnd.close()

        let large = try PlugindSystem.Pipe()
        defer { large.close() }
        let limited = PipeTransport(input: large.readEnd, output: large.writeEnd, maximumPayload: 16)
        let oversized = HostMessage.request(id: 1, connection: 1, bytes: [UInt8](repeating: 0, count: 64)).encode()
        write(oversized.header.bytes + oversized.payload, to: large.writeEnd)
        #expect(throws: WireError.self) { try limited.receive() }
    }
}
