import Glibc

/// Why `FileDescriptor.readRegularFile` read nothing. Each description completes a sentence that
/// begins with the file's path, which the caller names.
package enum RegularFileReadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Nothing is there: for most readers an empty state, not a problem.
    case absent
    /// A symbolic link, where the reader follows none.
    case symbolicLink
    /// A FIFO, a device, a directory or a socket (named): one could block the reader, or never end.
    case notRegular(String)
    /// More bytes than the reader takes, `limit`.
    case tooLarge(limit: Int)
    /// The system refused it: no permission, no descriptors left, an I/O error.
    case unreadable(SystemError)

    package var description: String {
        switch self {
        case .absent: "does not exist"
        case .symbolicLink: "is a symbolic link, which is not followed here; put the file itself in its place"
        case .notRegular(let kind): "is \(kind), not a regular file"
        case .tooLarge(let limit): "is larger than \(ByteCount(limit)), the most read of it"
        case .unreadable(let error): "cannot be read (\(error))"
        }
    }
}

extension FileDescriptor {
    /// The contents of the regular file at `path` (relative to the directory open as `directory`,
    /// if given), when it is one of at most `limit` bytes: for files another process may have
    /// written or replaced (a record, a log, a descriptor, a policy), so that a link, a FIFO, a
    /// device or a file grown without end is refused instead of followed, waited on or read
    /// whole. Opened `O_NONBLOCK` (a FIFO's open does not wait for a writer) and, unless
    /// `followingLinks`, `O_NOFOLLOW`; then `fstat` must find a regular file within `limit`, and
    /// the read stops one byte past it in case the file grew meanwhile.
    package static func readRegularFile(
        _ path: String, in directory: CInt = AT_FDCWD, limit: Int, followingLinks: Bool = false
    ) throws(RegularFileReadError) -> [UInt8] {
        let flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (followingLinks ? 0 : O_NOFOLLOW)
        let descriptor: FileDescriptor
        do {
            descriptor = FileDescriptor(rawValue: try retryingInterrupts("open") { openat(directory, path, flags) })
        } catch {
            switch error.errno.rawValue {
            case ENOENT: throw .absent
            case ELOOP where !followingLinks: throw .symbolicLink
            // A socket, or a device without a driver: say which.
            case ENXIO: throw .notRegular(kind(of: path, in: directory, followingLinks: followingLinks) ?? "a socket")
            default: throw .unreadable(error)
            }
        }
        defer { descriptor.close() }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else { throw .unreadable(SystemError("fstat", .current)) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .notRegular(kind(status.st_mode)) }
        guard Int(status.st_size) <= limit else { throw .tooLarge(limit: limit) }
        let bytes: [UInt8]
        do {
            bytes = try descriptor.readToEnd(limit: limit.addingSaturating(1))
        } catch {
            throw .unreadable(error)
        }
        guard bytes.count <= limit else { throw .tooLarge(limit: limit) }
        return bytes
    }

    private static func kind(of path: String, in directory: CInt, followingLinks: Bool) -> String? {
        var status = stat()
        guard fstatat(directory, path, &status, followingLinks ? 0 : AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return kind(status.st_mode)
    }

    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFDIR: "a directory"
        case S_IFSOCK: "a socket"
        case S_IFLNK: "a symbolic link"
        default: "of an unknown kind"
        }
    }
}
