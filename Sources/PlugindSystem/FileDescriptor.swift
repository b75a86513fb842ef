import CPlugindShims
import Glibc

/// A raw file descriptor. Like swift-system's, it is a plain value: whoever creates one closes it
/// exactly once.
package struct FileDescriptor: RawRepresentable, Hashable, Sendable {
    package var rawValue: CInt

    package init(rawValue: CInt) {
        self.rawValue = rawValue
    }

    package static let standardInput = FileDescriptor(rawValue: 0)
    package static let standardOutput = FileDescriptor(rawValue: 1)
    package static let standardError = FileDescriptor(rawValue: 2)

    /// Opens `path` with close-on-exec set. Wraps `open(2)`.
    package static func open(
        _ path: String,
        _ flags: CInt,
        permissions: UInt32 = 0o644
    ) throws(SystemError) -> FileDescriptor {
        let fd = try retryingInterrupts("open \(path)") {
            Glibc.open(path, flags | O_CLOEXEC, permissions)
        }
        return FileDescriptor(rawValue: fd)
    }

    /// Opens `/dev/null`: what a child gets for a standard stream it must not use.
    package static func openNullDevice(writable: Bool) throws(SystemError) -> FileDescriptor {
        try open("/dev/null", writable ? OpenOptions.readWrite : .readOnly)
    }

    /// Whether the descriptor is a terminal. Wraps `isatty(3)`.
    package var isTerminal: Bool { isatty(rawValue) == 1 }

    /// Closes the descriptor. EBADF means plugind lost track of its own descriptor: a bug, so it
    /// traps. Wraps `close(2)`.
    package func close() {
        let result = Glibc.close(rawValue)
        precondition(result == 0 || errno != EBADF, "closed a descriptor twice: \(rawValue)")
    }

    /// Reads at most `buffer.count` bytes; 0 means end of file. Wraps `read(2)`.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try retryingInterrupts("read") { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Writes at most `buffer.count` bytes and returns how many were written. Wraps `write(2)`.
    package func write(_ buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        try retryingInterrupts("write") { Glibc.write(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads until `buffer` is full. Returns false on end of file before the first byte, and throws
    /// `truncated` when the file ends part-way.
    package func readExactly(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Bool {
        var offset = 0
        while offset < buffer.count {
            let count = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]))
            if count == 0 {
                if offset == 0 { return false }
                throw SystemError("read (end of file after \(offset) of \(buffer.count) bytes)", .invalidArgument)
            }
            offset += count
        }
        return true
    }

    /// Writes every byte of `buffer`, looping over short writes.
    package func writeAll(_ buffer: UnsafeRawBufferPointer) throws(SystemError) {
        var offset = 0
        while offset < buffer.count {
            offset += try write(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
        }
    }

    /// Writes every byte of `bytes`.
    package func writeAll(_ bytes: [UInt8]) throws(SystemError) {
        try keepingSystemError { try bytes.withUnsafeBytes { try writeAll($0) } }
    }

    /// Reads until end of file.
    package func readToEnd(limit: Int = .max) throws(SystemError) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while result.count < limit {
            let count = try keepingSystemError { try chunk.withUnsafeMutableBytes { try read(into: $0) } }
            if count == 0 { break }
            result.append(contentsOf: chunk[..<min(count, limit - result.count)])
        }
        return result
    }

    /// Sets close-on-exec.
    package func setCloseOnExec() throws(SystemError) {
        try checkShim("fcntl(F_SETFD)", plugind_shim_set_cloexec(rawValue))
    }

    /// Sets O_NONBLOCK.
    package func setNonBlocking() throws(SystemError) {
        try checkShim("fcntl(F_SETFL)", plugind_shim_set_nonblocking(rawValue))
    }

    /// Duplicates the descriptor onto the lowest free number ≥ `minimum`, with close-on-exec.
    /// Wraps `fcntl(F_DUPFD_CLOEXEC)`.
    package func duplicate(minimum: CInt = 0) throws(SystemError) -> FileDescriptor {
        let fd = try retryingInterrupts("fcntl(F_DUPFD_CLOEXEC)") { fcntl(rawValue, F_DUPFD_CLOEXEC, minimum) }
        return FileDescriptor(rawValue: fd)
    }

    /// Makes `target` a copy of this descriptor (close-on-exec cleared). Wraps `dup2(2)`.
    package func duplicate(onto target: FileDescriptor) throws(SystemError) {
        try retryingInterrupts("dup2") { dup2(rawValue, target.rawValue) }
    }
}
