import PlugindSystem

/// One direction of an in-memory byte stream, so that protocol code on both sides can be tested
/// without processes or pipes (in the spirit of NIOEmbedded). Bytes written are read back in
/// order; `close()` marks the end of the stream.
package final class InMemoryConnection: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var closed = false
    }

    private let state = Locked(State())

    package init() {}

    /// Appends raw bytes, well-formed or not.
    package func write(_ bytes: [UInt8]) {
        state.withLock { $0.bytes.append(contentsOf: bytes) }
    }

    /// Appends an encoded frame.
    package func send(_ frame: Frame) {
        write(frame.header.bytes + frame.payload)
    }

    package func close() {
        state.withLock { $0.closed = true }
    }

    /// Takes everything written so far, and whether the stream has ended.
    package func take() -> (bytes: [UInt8], closed: Bool) {
        state.withLock { state in
            defer { state.bytes.removeAll() }
            return (state.bytes, state.closed)
        }
    }
}

/// Reads frames from an `InMemoryConnection` through a `FrameDecoder`, as the host's event loop
/// does from a pipe.
package struct InMemoryFrameReceiver {
    private let connection: InMemoryConnection
    private var decoder: FrameDecoder
    private var ended = false

    package init(_ connection: InMemoryConnection, direction: FrameKind.Direction, maximumPayload: Int = 1 << 20) {
        self.connection = connection
        self.decoder = FrameDecoder(direction: direction, maximumPayload: maximumPayload)
    }

    /// The next frame; nil when none is complete yet or the stream ended cleanly. Throws on
    /// malformed input, including a stream that ended inside a frame.
    package mutating func receive() throws(WireError) -> Frame? {
        if let frame = try decoder.nextFrame() { return frame }
        let (bytes, closed) = connection.take()
        decoder.append(bytes)
        if let frame = try decoder.nextFrame() { return frame }
        if closed && !ended {
            ended = true
            try decoder.finish()
        }
        return nil
    }
}
