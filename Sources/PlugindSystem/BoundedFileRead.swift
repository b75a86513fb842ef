import Glibc

extension FileDescriptor {
    /// The contents of the regular file at `path`, when it is one of at most `limit` bytes: for
    /// files another process may have written or replaced (a record, a log, a page), so that a
    /// link, a FIFO, a device or a file grown without end is refused instead of followed, waited
    /// on or read whole. Nil for anything else, or when it cannot be read.
    package static func readRegularFile(_ path: String, limit: Int) -> [UInt8]? {
        guard let descriptor = try? open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) else { return nil }
        defer { descriptor.close() }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG, Int(status.st_size) <= limit,
            let bytes = try? descriptor.readToEnd(limit: limit + 1), bytes.count <= limit
        else { return nil }
        return bytes
    }
}
