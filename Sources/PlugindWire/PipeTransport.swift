import Glibc
package import PlugindSystem
import Synchronization

/// Blocking frame I/O over a pair of descriptors: the worker's side of the protocol. Sending is
/// serialised by a lock because plugin threads may post messages while the worker answers a
/// request; receiving is for one thread at a time, through the same `FrameDecoder` the host
/// reads with: one read takes in as many frames as have arrived.
package final class PipeTransport: Sendable {
    package let input: FileDescriptor
    package let output: FileDescriptor
    private struct Receiving {
        var decoder: FrameDecoder
        /// A frame (or the error decoding it) taken out ahead by `hasBufferedFrame`.
        var lookahead: Result<Frame, WireError>?
    }

    private let receiving: Locked<Receiving>
    private let sendLock = Locked(())

    package init(input: FileDescriptor, output: FileDescriptor, maximumPayload: Int) {
        self.input = input
        self.output = output
        // A page at first: a worker's frames are mostly small (large payloads travel in the
        // shared region), and the buffer grows for a large one. Every page of it a worker has
        // touched stays that worker's own memory.
        let decoder = FrameDecoder(direction: .hostToWorker, maximumPayload: maximumPayload, initialCapacity: 4 << 10)
        receiving = Locked(Receiving(decoder: decoder))
    }

    /// The largest payload `receive()` accepts; larger frames are refused before allocation.
    package var maximumPayload: Int {
        get { receiving.withLock { $0.decoder.maximumPayload } }
        set { receiving.withLock { $0.decoder.maximumPayload = newValue } }
    }

    /// Whether a frame has arrived already that `receive()` returns without reading: a reader
    /// that polls the descriptor before it reads must ask this first, since one read may have
    /// taken in several frames.
    package var hasBufferedFrame: Bool {
        receiving.withLock { state in
            if state.lookahead != nil { return true }
            do throws(WireError) {
                guard let frame = try state.decoder.nextFrame() else { return false }
                state.lookahead = .success(frame)
            } catch {
                state.lookahead = .failure(error)
            }
            return true
        }
    }

    /// Reads one host-to-worker frame, or nil on end of stream between frames. With
    /// `pollingUntil`, a read that would sleep polls for the frame until then first
    /// (`BusyPolling`).
    package func receive(pollingUntil: MonotonicInstant? = nil) throws -> Frame? {
        try receiving.withLock { state in
            if let ahead = state.lookahead {
                state.lookahead = nil
                return try ahead.get()
            }
            while true {
                if let frame = try state.decoder.nextFrame() { return frame }
                if let pollingUntil, MonotonicInstant.now < pollingUntil {
                    _ = input.awaitReadable(spinUntil: pollingUntil, sleepUntil: pollingUntil)
                }
                let count = try state.decoder.receive { buffer in try input.read(into: buffer) }
                if count == 0 {
                    try state.decoder.finish()
                    return nil
                }
            }
        }
    }

    /// Writes a header and its payload with one writev where possible.
    package func send(_ header: FrameHeader, payload: UnsafeRawBufferPointer) throws(SystemError) {
        var headerBytes = (UInt64(0), UInt64(0), UInt64(0))
        try withUnsafeMutableBytes(of: &headerBytes) { (headerBuffer) throws(SystemError) in
            header.encode(into: headerBuffer)
            try sendLock.withLock { (_) throws(SystemError) in
                try writeVectored(UnsafeRawBufferPointer(headerBuffer), payload)
            }
        }
    }

    package func send(_ frame: Frame) throws(SystemError) {
        try keepingSystemError { try frame.payload.withUnsafeBytes { try send(frame.header, payload: $0) } }
    }

    package func send(_ message: WorkerMessage) throws(SystemError) {
        try send(message.encode())
    }

    private func writeVectored(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) throws(SystemError) {
        var vectors = [
            iovec(iov_base: UnsafeMutableRawPointer(mutating: first.baseAddress), iov_len: first.count),
            iovec(iov_base: UnsafeMutableRawPointer(mutating: second.baseAddress), iov_len: second.count),
        ]
        var remaining = first.count + second.count
        var index = 0
        while remaining > 0 {
            let written = try vectors.withUnsafeMutableBufferPointer { (pointer) throws(SystemError) -> Int in
                try retryingInterrupts("writev") {
                    writev(output.rawValue, pointer.baseAddress! + index, CInt(pointer.count - index))
                }
            }
            remaining -= written
            // Advance past what was written, possibly part-way into a vector.
            var consumed = written
            while index < vectors.count, consumed >= vectors[index].iov_len {
                consumed -= vectors[index].iov_len
                index += 1
            }
            if index < vectors.count, consumed > 0 {
                vectors[index].iov_base += consumed
                vectors[index].iov_len -= consumed
            }
        }
    }
}
