/// Turns a byte stream into frames, for readers that receive bytes in arbitrary pieces (the
/// host's non-blocking event loop, in-memory transports, the fuzzer). Validates each header —
/// including the payload limit — before it reserves room for the payload.
package struct FrameDecoder: Sendable {
    package let direction: FrameKind.Direction
    /// The largest payload accepted; a larger frame is refused before room is made for it. A
    /// reader may raise it once it knows the peer's limit (the worker, after its `hello`).
    package var maximumPayload: Int

    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var pendingHeader: FrameHeader?

    /// Buffers up to this size are kept between frames; larger ones are released.
    private static let retainedCapacity = 1 << 20
    package static let initialCapacity = 64 << 10

    /// The room `receive` makes before each read, at least: one read takes in many small frames.
    private let readSize: Int

    package init(direction: FrameKind.Direction, maximumPayload: Int, initialCapacity: Int = Self.initialCapacity) {
        self.direction = direction
        self.maximumPayload = maximumPayload
        self.buffer = Self.unfilledBuffer(count: initialCapacity)
        self.readSize = min(initialCapacity, 16 << 10)
    }

    /// Room for bytes still to be received, not zeroed: only `start..<end` is ever read, and
    /// zeroing would make every page of it the process's own memory before any byte arrives
    /// (16 KiB of each worker, 64 KiB of the host per worker).
    private static func unfilledBuffer(count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }

    /// When nothing is buffered: a decoder with this one's buffer, for a stream that moves
    /// elsewhere (to a ring), so that the pages already touched serve it there; this one goes on
    /// with `capacity` bytes (wake-ups). Nil when bytes are buffered: they belong to this stream.
    package mutating func handOver(keeping capacity: Int) -> FrameDecoder? {
        guard end == start, pendingHeader == nil else { return nil }
        let moved = self
        self = FrameDecoder(direction: direction, maximumPayload: maximumPayload, initialCapacity: capacity)
        return moved
    }

    /// Bytes received but not yet returned as frames.
    package var bufferedByteCount: Int { end - start }

    /// Appends received bytes.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        reserveFreeSpace(bytes.count)
        buffer.withUnsafeMutableBytes { destination in
            UnsafeMutableRawBufferPointer(rebasing: destination[end..<end + bytes.count]).copyMemory(from: bytes)
        }
        end += bytes.count
    }

    package mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Lets `read` fill free space directly (one copy from the kernel into the frame buffer).
    /// `read` returns how many bytes it wrote.
    package mutating func receive(_ read: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        let wanted = pendingHeader.map { FrameHeader.size + $0.payloadLength - (end - start) } ?? 0
        reserveFreeSpace(max(wanted, readSize))
        let count = try buffer.withUnsafeMutableBytes { destination in
            try read(UnsafeMutableRawBufferPointer(rebasing: destination[end...]))
        }
        end += max(count, 0)
        return count
    }

    /// The next complete frame, or nil when more bytes are needed.
    package mutating func nextFrame() throws(WireError) -> Frame? {
        let available = end - start
        if pendingHeader == nil {
            guard available >= FrameHeader.size else { return nil }
            let decoded = buffer.withUnsafeBytes { bytes -> Result<FrameHeader, WireError> in
                do throws(WireError) {
                    return .success(
                        try FrameHeader.decode(
                            UnsafeRawBufferPointer(rebasing: bytes[start..<start + FrameHeader.size]),
                            direction: direction,
                            maximumPayload: maximumPayload
                        )
                    )
                } catch {
                    return .failure(error)
                }
            }
            pendingHeader = try decoded.get()
        }
        guard let header = pendingHeader else { return nil }
        let frameLength = FrameHeader.size + header.payloadLength
        guard available >= frameLength else { return nil }
        let payloadStart = start + FrameHeader.size
        let payload = Array(buffer[payloadStart..<payloadStart + header.payloadLength])
        start += frameLength
        pendingHeader = nil
        if start == end {
            start = 0
            end = 0
            if buffer.count > Self.retainedCapacity {
                buffer = Self.unfilledBuffer(count: Self.initialCapacity)
            }
        }
        return Frame(header: header, payload: payload)
    }

    /// Call at end of stream: throws when the stream stopped inside a frame.
    package func finish() throws(WireError) {
        let available = end - start
        guard available > 0 else { return }
        if let header = pendingHeader {
            throw .truncatedPayload(expected: header.payloadLength, received: available - FrameHeader.size)
        }
        throw .truncatedHeader(received: available)
    }

    private mutating func reserveFreeSpace(_ count: Int) {
        if buffer.count - end >= count { return }
        // Move the unread bytes to the front, then grow if that is not enough.
        if start > 0 {
            let unread = end - start
            buffer.withUnsafeMutableBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                base.copyMemory(from: base + start, byteCount: unread)
            }
            start = 0
            end = unread
        }
        if buffer.count - end < count {
            var capacity = buffer.count
            while capacity - end < count { capacity *= 2 }
            // A new buffer and one copy: growing element by element is slow in debug builds.
            var grown = Self.unfilledBuffer(count: capacity)
            grown.withUnsafeMutableBytes { destination in
                buffer.withUnsafeBytes { source in
                    destination.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: end)
                }
            }
            buffer = grown
        }
    }
}
