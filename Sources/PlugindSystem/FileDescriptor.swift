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

    /// Reads up to `count` bytes starting at `offset` without moving the file position, so that
    /// several threads can read parts of one file; fewer only at its end. Wraps `pread(2)`.
    package func read(count: Int, at offset: Int) throws(SystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let read = try keepingSystemError {
                try bytes.withUnsafeMutableBytes { buffer throws(SystemError) in
                    guard let start = buffer.baseAddress else { return 0 }
                    return try retryingInterrupts("pread") {
                        Glibc.pread(rawValue, start + filled, count - filled, off_t(offset + filled))
                    }
                }
            }
            if read == 0 { break }
            filled += read
        }
        bytes.removeSubrange(filled...)
        return bytes
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

    /// Reads until end of file, or `limit` bytes. A regular file is read into one buffer of its
    /// length (one byte more, to see its end without growing it): a store of megabytes is then
    /// read with no copy, where chunks appended one by one were copied and regrown (`perf`).
    package func readToEnd(limit: Int = .max) throws(SystemError) -> [UInt8] {
        var status = stat()
        let length = fstat(rawValue, &status) == 0 && status.st_mode & S_IFMT == S_IFREG ? Int(status.st_size) : 0
        var buffer = [UInt8](repeating: 0, count: Swift.min(limit, Swift.max(length + 1, 4096)))
        var filled = 0
        while filled < limit {
            if filled == buffer.count {
                buffer.append(contentsOf: repeatElement(0, count: Swift.min(limit - filled, Swift.max(buffer.count, 65536))))
            }
            let count = try keepingSystemError {
                try buffer.withUnsafeMutableBytes { bytes throws(SystemError) in
                    try read(into: UnsafeMutableRawBufferPointer(rebasing: bytes[filled...]))
                }
            }
            if count == 0 { break }
            filled += count
        }
        buffer.removeSubrange(filled...)
        return buffer
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
