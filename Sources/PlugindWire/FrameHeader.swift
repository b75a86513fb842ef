/// The fixed 24-byte header in front of every payload (little-endian):
///
///     offset  size  field
///          0     4  magic "PLGD"
///          4     1  frame format version (1)
///          5     1  kind (`FrameKind`)
///          6     2  flags (`FrameFlags`)
///          8     8  request identifier (0 when the message belongs to no request)
///         16     4  payload length in bytes
///         20     4  connection identifier (0: the process itself, not one connection)
///
/// The payload follows immediately. Data payloads (requests, responses, events) are the caller's
/// bytes, never re-encoded.
package struct FrameHeader: Equatable, Sendable {
    package static let size = 24
    package static let magic: UInt32 = 0x4447_4C50  // "PLGD" read as little-endian
    /// 2 since connections: the last four bytes name one.
    package static let formatVersion: UInt8 = 2

    package var kind: FrameKind
    package var flags: FrameFlags
    package var requestID: UInt64
    package var payloadLength: Int
    package var connection: UInt32

    package init(kind: FrameKind, flags: FrameFlags = [], requestID: UInt64 = 0, payloadLength: Int, connection: UInt32 = 0) {
        self.kind = kind
        self.flags = flags
        self.requestID = requestID
        self.payloadLength = payloadLength
        self.connection = connection
    }

    /// Writes the header into the first `size` bytes of `buffer`.
    package func encode(into buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count >= Self.size && payloadLength <= Int(UInt32.max))
        buffer.storeBytes(of: Self.magic.littleEndian, toByteOffset: 0, as: UInt32.self)
        buffer[4] = Self.formatVersion
        buffer[5] = kind.rawValue
        buffer.storeBytes(of: flags.rawValue.littleEndian, toByteOffset: 6, as: UInt16.self)
        buffer.storeBytes(of: requestID.littleEndian, toByteOffset: 8, as: UInt64.self)
        buffer.storeBytes(of: UInt32(payloadLength).littleEndian, toByteOffset: 16, as: UInt32.self)
        buffer.storeBytes(of: connection.littleEndian, toByteOffset: 20, as: UInt32.self)
    }

    /// The header as bytes.
    package var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.size) { buffer, count in
            encode(into: UnsafeMutableRawBufferPointer(buffer))
            count = Self.size
        }
    }

    /// Validates and decodes a header from exactly `size` bytes. Checks the payload length against
    /// `maximumPayload` before anyone allocates for it, and the kind against `direction`.
    package static func decode(
        _ buffer: UnsafeRawBufferPointer,
        direction: FrameKind.Direction,
        maximumPayload: Int
    ) throws(WireError) -> FrameHeader {
        guard buffer.count >= size else { throw .truncatedHeader(received: buffer.count) }
        let magic = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        guard magic == Self.magic else { throw .badMagic(magic) }
        guard buffer[4] == formatVersion else { throw .unsupportedFrameVersion(buffer[4]) }
        guard let kind = FrameKind(rawValue: buffer[5]), kind.direction == direction else {
            throw .unknownKind(buffer[5])
        }
        let rawFlags = UInt16(littleEndian: buffer.loadUnaligned(fromByteOffset: 6, as: UInt16.self))
        let flags = FrameFlags(rawValue: rawFlags)
        // Only the host marks frames for polling.
        guard flags.isSubset(of: direction == .hostToWorker ? .known : .known.subtracting(.pollForNext)) else {
            throw .invalidHeader("unknown flags 0x\(String(rawFlags, radix: 16))")
        }
        let requestID = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        let length = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: 16, as: UInt32.self)))
        let connection = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: 20, as: UInt32.self))
        guard kind.carriesConnection || connection == 0 else {
            throw .invalidHeader("a \(kind) message belongs to no connection, found connection \(connection)")
        }
        guard length <= maximumPayload else { throw .frameTooLarge(length: length, maximum: maximumPayload) }
        return FrameHeader(kind: kind, flags: flags, requestID: requestID, payloadLength: length, connection: connection)
    }
}

/// Per-frame flags.
package struct FrameFlags: OptionSet, Hashable, Sendable {
    package var rawValue: UInt16
    package init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The payload lies in shared memory; the frame carries its `SharedMemoryLocation`. Only on
    /// requests and responses, and only when both sides listed `ProtocolFeature.sharedMemory`.
    package static let sharedMemory = FrameFlags(rawValue: 1 << 0)

    /// The host expects its next request soon (it awaits few answers): the worker, once idle
    /// after answering this one, polls for it a moment before it sleeps (`BusyPolling`). Only on
    /// requests and calls, and only when both sides listed `ProtocolFeature.busyPolling`.
    package static let pollForNext = FrameFlags(rawValue: 1 << 1)

    /// A receiver rejects any other bit.
    package static let known: FrameFlags = [.sharedMemory, .pollForNext]
}

/// One decoded frame.
package struct Frame: Equatable, Sendable {
    package var header: FrameHeader
    package var payload: [UInt8]

    package init(header: FrameHeader, payload: [UInt8]) {
        self.header = header
        self.payload = payload
    }
}
