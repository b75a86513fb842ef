import Glibc
package import PlugindSystem
import Synchronization

/// Blocking frame I/O over a pair of descriptors: the worker's side of the protocol. Sending is
/// serialised by a lock because plugin threads may post messages while the worker answers a
/// request; receiving is for one thread.
package final class PipeTransport: Sendable {
    package let input: FileDescriptor
    package let output: FileDescriptor
    private let maximumPayloadStorage: Atomic<Int>
    private let sendLock = Locked(())

    package init(input: FileDescriptor, output: FileDescriptor, maximumPayload: Int) {
        self.input = input
        self.output = output
        self.maximumPayloadStorage = Atomic(maximumPayload)
    }

    /// The largest payload `receive()` accepts; larger frames are refused before allocation.
    package var maximumPayload: Int {
        get { maximumPayloadStorage.load(ordering: .relaxed) }
        set { maximumPayloadStorage.store(newValue, ordering: .relaxed) }
    }

    /// Reads one host-to-worker frame, or nil on end of stream between frames.
    package func receive() throws -> Frame? {
        var headerBytes = [UInt8](repeating: 0, count: FrameHeader.size)
        let gotHeader = try headerBytes.withUnsafeMutableBytes { try readFully(into: $0, what: .header) }
        guard gotHeader else { return nil }
        let limit = maximumPayload
        let header = try headerBytes.withUnsafeBytes { bytes in
            try FrameHeader.decode(bytes, direction: .hostToWorker, maximumPayload: limit)
        }
        let payload = try [UInt8](unsafeUninitializedCapacity: header.payloadLength) { buffer, count in
            if header.payloadLength > 0 {
                _ = try readFully(into: UnsafeMutableRawBufferPointer(buffer), what: .payload(header.payloadLength))
            }
            count = header.payloadLength
        }
        return Frame(header: header, payload: payload)
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

    private enum Part {
        case header
        case payload(Int)
    }

    private func readFully(into buffer: UnsafeMutableRawBufferPointer, what: Part) throws -> Bool {
        var offset = 0
        while offset < buffer.count {
            let count = try input.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]))
            if count == 0 {
                if offset == 0, case .header = what { return false }
                switch what {
                case .header: throw WireError.truncatedHeader(received: offset)
                case .payload(let expected): throw WireError.truncatedPayload(expected: expected, received: offset)
                }
            }
            offset += count
        }
        return true
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
