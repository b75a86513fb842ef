package import Glibc
package import PlugindSystem

/// What `stat(2)` says about a file, as plugind uses it: identity for caches and approval pins,
/// ownership and mode for the "writable by others" check.
package struct FileStatus: Sendable, Hashable {
    package var identity: FileIdentity
    package var mode: UInt32
    package var owner: UInt32
    package var group: UInt32

    package var isDirectory: Bool { mode & S_IFMT == S_IFDIR }
    package var isRegularFile: Bool { mode & S_IFMT == S_IFREG }

    /// Follows symlinks. Nil when the file does not exist or cannot be examined.
    package init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        self.init(status)
    }

    /// `path` relative to the open directory `directory` (an absolute `path` ignores it): a
    /// shorter path walk than from `/` when many files under one directory are examined.
    package init?(path: String, relativeTo directory: CInt) {
        var status = stat()
        guard fstatat(directory, path, &status, 0) == 0 else { return nil }
        self.init(status)
    }

    /// The open file `descriptor`'s. Wraps `fstat(2)`.
    package init?(descriptor: FileDescriptor) {
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else { return nil }
        self.init(status)
    }

    /// The status of `path` (of a symlink itself unless `followingLinks`), or why it cannot be
    /// examined. Wraps `stat(2)` and `lstat(2)`.
    package static func examining(_ path: String, followingLinks: Bool) -> Result<FileStatus, Errno> {
        var status = stat()
        let result = followingLinks ? stat(path, &status) : lstat(path, &status)
        return result == 0 ? .success(FileStatus(status)) : .failure(.current)
    }

    /// Whether the sticky bit is set: in a directory, only an entry's owner may replace it.
    package var isSticky: Bool { mode & S_ISVTX != 0 }

    package init(identity: FileIdentity, mode: UInt32, owner: UInt32, group: UInt32) {
        self.identity = identity
        self.mode = mode
        self.owner = owner
        self.group = group
    }

    package init(_ status: stat) {
        identity = FileIdentity(status)
        mode = status.st_mode
        owner = status.st_uid
        group = status.st_gid
    }

    /// Why the file belongs to someone other than the current user or root, or nil.
    package var foreignOwnerProblem: String? { foreignOwnerProblem(user: effectiveUserID) }

    /// Why the file belongs to someone other than `user` (the effective user, taken once for
    /// many files) or root, or nil.
    package func foreignOwnerProblem(user: UInt32) -> String? {
        owner != user && owner != 0 ? "is owned by uid \(owner), not by you (uid \(user)) or root" : nil
    }

    /// Why someone other than the current user (or root) could change this file, or nil.
    package var writableByOthersProblem: String? { writableByOthersProblem(user: effectiveUserID) }

    /// Why someone other than `user` (the effective user, taken once for many files) or root
    /// could change this file, or nil. A group-writable file is accepted only when its group is
    /// the owner's personal group (same number as the owner), the usual setup with umask 002.
    package func writableByOthersProblem(user: UInt32) -> String? {
        if let problem = foreignOwnerProblem(user: user) { return problem }
        if mode & S_IWOTH != 0 {
            return "is writable by every user (mode \(String(mode & 0o7777, radix: 8)))"
        }
        if mode & S_IWGRP != 0 && group != owner {
            return "is writable by group \(group) (mode \(String(mode & 0o7777, radix: 8)))"
        }
        return nil
    }
}

/// The user whose files plugind may trust besides root's. Wraps `geteuid(2)`.
package var effectiveUserID: UInt32 { geteuid() }

/// The canonical absolute path (symlinks and `..` resolved), or nil when it does not exist.
package func canonicalPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}
