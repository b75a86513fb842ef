package import Glibc

/// What one read or write on a non-blocking descriptor did, as a value: an event loop branches on
/// it instead of on `errno`, and no caller outside this module needs Glibc to read a pipe.
package enum NonBlockingTransfer: Equatable, Sendable {
    /// This many bytes (more than none) moved.
    case transferred(Int)
    /// A read found the other end closed and nothing left.
    case endOfFile
    /// The pipe is empty (read) or full (write); wait for readiness.
    case wouldBlock
    /// Any other failure; for a write, EPIPE means the reader is gone.
    case failed(Errno)

    /// The byte count for a decoder that takes `read(2)`'s convention (0 for anything but data).
    package var count: Int {
        if case .transferred(let count) = self { return count }
        return 0
    }

    fileprivate init(_ result: Int) {
        switch result {
        case 0: self = .endOfFile
        case let count where count > 0: self = .transferred(count)
        default:
            let error = Errno.current
            self = error == .wouldBlock ? .wouldBlock : .failed(error)
        }
    }
}

/// One buffer of a gathering write. An alias, so that a caller keeps an array of them (reused from
/// write to write) without importing Glibc.
package typealias IOVector = iovec

extension IOVector {
    package init(_ buffer: UnsafeRawBufferPointer) {
        self.init(iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress), iov_len: buffer.count)
    }
}

extension FileDescriptor {
    /// Reads what is there, at most `buffer.count` bytes, retrying interruptions. Wraps `read(2)`.
    package func readAvailable(into buffer: UnsafeMutableRawBufferPointer) -> NonBlockingTransfer {
        while true {
            let result = Glibc.read(rawValue, buffer.baseAddress, buffer.count)
            if result < 0 && errno == EINTR { continue }
            return NonBlockingTransfer(result)
        }
    }

    /// Writes what the pipe takes of `buffer`, retrying interruptions. Wraps `write(2)`.
    package func writeAvailable(_ buffer: UnsafeRawBufferPointer) -> NonBlockingTransfer {
        while true {
            let result = Glibc.write(rawValue, buffer.baseAddress, buffer.count)
            if result < 0 && errno == EINTR { continue }
            return result == 0 ? .wouldBlock : NonBlockingTransfer(result)
        }
    }

    /// Writes what the pipe takes of `vectors`, in order, retrying interruptions. A write of
    /// nothing at all reports `wouldBlock`. Wraps `writev(2)`.
    package func writeAvailable(gathering vectors: UnsafeBufferPointer<IOVector>) -> NonBlockingTransfer {
        while true {
            let result = Glibc.writev(rawValue, vectors.baseAddress, CInt(vectors.count))
            if result < 0 && errno == EINTR { continue }
            return result == 0 ? .wouldBlock : NonBlockingTransfer(result)
        }
    }
}
