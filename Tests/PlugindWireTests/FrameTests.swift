import TestSupport
import Testing

@testable import PlugindWire

@Suite("Frame header and decoder", .tags(.unit))
struct FrameTests {
    @Test("every kind survives a header round trip", arguments: FrameKind.allCases)
    func headerRoundTrip(kind: FrameKind) throws {
        let header = FrameHeader(kind: kind, flags: [], requestID: 0xDEAD_BEEF_0102_0304, payloadLength: 1234)
        let decoded = try header.bytes.withUnsafeBytes { bytes in
            try FrameHeader.decode(bytes, direction: kind.direction, maximumPayload: 1 << 20)
        }
        #expect(decoded == header)
    }

    @Test("a kind meant for the other direction is rejected")
    func wrongDirection() {
        let bytes = FrameHeader(kind: .request, payloadLength: 0).bytes
        #expect(throws: WireError.unknownKind(FrameKind.request.rawValue)) {
            try bytes.withUnsafeBytes { try FrameHeader.decode($0, direction: .workerToHost, maximumPayload: 100) }
        }
    }

    @Test("an oversize frame is refused from its header, before any payload arrives")
    func oversizeFrame() {
        let connection = InMemoryConnection()
        var header = FrameHeader(kind: .response, requestID: 1, payloadLength: 0).bytes
        // Announce 3 GiB.
        header.replaceSubrange(16..<20, with: [0x00, 0x00, 0x00, 0xC0])
        connection.write(header)
        var receiver = InMemoryFrameReceiver(connection, direction: .workerToHost, maximumPayload: 1 << 20)
        #expect(throws: WireError.frameTooLarge(length: 0xC000_0000, maximum: 1 << 20)) { try receiver.receive() }
    }

    @Test("a stream that ends inside the header is truncated")
    func truncatedHeader() {
        let connection = InMemoryConnection()
        connection.write(Array(FrameHeader(kind: .response, payloadLength: 4).bytes.prefix(10)))
        connection.close()
        var receiver = InMemoryFrameReceiver(connection, direction: .workerToHost)
        #expect(throws: WireError.truncatedHeader(received: 10)) { try receiver.receive() }
    }

    @Test("a stream that ends inside the payload is truncated")
    func truncatedPayload() {
        let connection = InMemoryConnection()
        connection.write(FrameHeader(kind: .response, requestID: 3, payloadLength: 100).bytes + [UInt8](repeating: 7, count: 40))
        connection.close()
        var receiver = InMemoryFrameReceiver(connection, direction: .workerToHost)
        #expect(throws: WireError.truncatedPayload(expected: 100, received: 40)) { try receiver.receive() }
    }

    @Test("an unknown kind is rejected with its number")
    func unknownKind() {
        let connection = InMemoryConnection()
        var bytes = FrameHeader(kind: .response, payloadLength: 0).bytes
        bytes[5] = 0xEE
        connection.write(bytes)
        var receiver = InMemoryFrameReceiver(connection, direction: .workerToHost)
        #expect(throws: WireError.unknownKind(0xEE)) { try receiver.receive() }
        #expect(WireError.unknownKind(0xEE).description == "unknown message kind 0xee")
    }

    @Test("garbage is rejected by the magic check")
    func badMagic() {
        let connection = InMemoryConnection()
        connection.write(Array("this is not a plugind frame, not even close".utf8))
        var receiver = InMemoryFrameReceiver(connection, direction: .workerToHost)
        #expect(throws: WireError.badMagic(0x7369_6874)) { try receiver.receive() }
    }

    @Test("a connection on a kind that names none, and unknown flags, are rejected; a request keeps its connection")
    func reservedBits() throws {
        var reserved = FrameHeader(kind: .response, payloadLength: 0).bytes
        reserved[21] = 1
        #expect(throws: WireError.invalidHeader("a response message belongs to no connection, found connection 256")) {
            try reserved.withUnsafeBytes { try FrameHeader.decode($0, direction: .workerToHost, maximumPayload: 10) }
        }
        let request = FrameHeader(kind: .request, requestID: 4, payloadLength: 0, connection: 0xDEAD_BEEF).bytes
        let decoded = try request.withUnsafeBytes { try FrameHeader.decode($0, direction: .hostToWorker, maximumPayload: 10) }
        #expect(decoded.connection == 0xDEAD_BEEF)
        var oldFormat = FrameHeader(kind: .response, payloadLength: 0).bytes
        oldFormat[4] = 1
        #expect(throws: WireError.unsupportedFrameVersion(1)) {
            try oldFormat.withUnsafeBytes { try FrameHeader.decode($0, direction: .workerToHost, maximumPayload: 10) }
        }
        var flags = FrameHeader(kind: .response, payloadLength: 0).bytes
        flags[6] = 0x02
        #expect(throws: WireError.invalidHeader("unknown flags 0x2")) {
            try flags.withUnsafeBytes { try FrameHeader.decode($0, direction: .workerToHost, maximumPayload: 10) }
        }
    }

    @Test("frames split at every byte boundary reassemble")
    func splitDelivery() throws {
        let frames = (1...5).map { index in
            WorkerMessage.response(id: UInt64(index), bytes: [UInt8](repeating: UInt8(index), count: index * 1000)).encode()
        }
        let stream = frames.flatMap { $0.header.bytes + $0.payload }
        var decoder = FrameDecoder(direction: .workerToHost, maximumPayload: 1 << 20)
        var received: [Frame] = []
        for byte in stream {
            decoder.append([byte])
            while let frame = try decoder.nextFrame() { received.append(frame) }
        }
        #expect(received == frames)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test("a payload larger than the decoder's initial buffer arrives whole")
    func largePayload() throws {
        let payload = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let frame = WorkerMessage.response(id: 9, bytes: payload).encode()
        var decoder = FrameDecoder(direction: .workerToHost, maximumPayload: 4 << 20)
        decoder.append(frame.header.bytes + frame.payload)
        #expect(try decoder.nextFrame()?.payload == payload)
    }

    @Test("protocol versions negotiate to the highest common one")
    func versionNegotiation() {
        #expect(ProtocolVersion.negotiate(offeredMinimum: 1, offeredMaximum: 5, supportedMinimum: 1, supportedMaximum: 3) == 3)
        #expect(ProtocolVersion.negotiate(offeredMinimum: 2, offeredMaximum: 2, supportedMinimum: 1, supportedMaximum: 3) == 2)
        #expect(ProtocolVersion.negotiate(offeredMinimum: 4, offeredMaximum: 6, supportedMinimum: 1, supportedMaximum: 3) == nil)
        #expect(ProtocolVersion.negotiate(offeredMinimum: 1, offeredMaximum: 2) == nil)
        #expect(ProtocolVersion.negotiate(offeredMinimum: 1, offeredMaximum: 3) == 3)
    }
}
