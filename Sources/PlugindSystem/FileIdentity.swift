package import Glibc

/// The identity of a file at the moment it was hashed. The change time moves on every write and
/// cannot be set back, so an equal identity means the bytes were not rewritten.
package struct FileIdentity: Hashable, Sendable, Codable {
    package var device: UInt64
    package var inode: UInt64
    package var size: UInt64
    package var modificationNanoseconds: Int64
    package var changeNanoseconds: Int64

    package init(device: UInt64, inode: UInt64, size: UInt64, modificationNanoseconds: Int64, changeNanoseconds: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modificationNanoseconds = modificationNanoseconds
        self.changeNanoseconds = changeNanoseconds
    }
}

extension FileIdentity {
    /// The identity `stat(2)` reported. A file's owner sets its modification time to anything
    /// (`touch -d 2300-01-01`, or `tar` extracting a hostile archive), past what nanoseconds in 64
    /// bits hold: such times saturate instead of trapping whoever looks at the file. The change
    /// time, which no one sets, still tells two writes apart.
    package init(_ status: stat) {
        func nanoseconds(_ time: timespec) -> Int64 {
            Int64(time.tv_sec).multipliedSaturating(by: 1_000_000_000).addingSaturating(Int64(time.tv_nsec))
        }
        self.init(
            device: UInt64(status.st_dev),
            inode: UInt64(status.st_ino),
            size: UInt64(truncatingIfNeeded: status.st_size),
            modificationNanoseconds: nanoseconds(status.st_mtim),
            changeNanoseconds: nanoseconds(status.st_ctim)
        )
    }

    /// The identity of the file at `path` (symlinks followed), or nil.
    package init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        self.init(status)
    }
}
