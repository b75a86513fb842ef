package import Foundation
import Glibc

/// Read-modify-write of a small file shared between processes: an exclusive `flock` on a
/// companion lock file serialises writers, and the new contents replace the old atomically
/// (temporary file, fsync, rename, fsync of the directory), so a reader never sees a torn file
/// and a crash never loses the previous version.
package enum LockedFileUpdate {
    package struct Failure: Error, Sendable, CustomStringConvertible {
        package var path: String
        package var reason: String
        package var description: String { "\(path): \(reason)" }
    }

    /// Runs `body` holding the lock for `path`; writes the data it returns, if any.
    package static func update<Result>(
        _ path: String,
        _ body: (Data?) throws -> (data: Data?, result: Result)
    ) throws -> Result {
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Failure(path: directory, reason: "cannot be created: \(error.localizedDescription)")
        }
        let lockPath = path + ".lock"
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw Failure(path: lockPath, reason: String(cString: strerror(errno))) }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw Failure(path: lockPath, reason: "flock: \(String(cString: strerror(errno)))") }
        }
        let existing = FileManager.default.contents(atPath: path)
        let (data, result) = try body(existing)
        if let data { try replace(path, with: data) }
        return result
    }

    /// Atomically replaces `path` with `data`.
    package static func replace(_ path: String, with data: Data) throws {
        var template = Array((path + ".XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else { throw Failure(path: path, reason: "cannot create a temporary file: \(String(cString: strerror(errno)))") }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var succeeded = false
        defer {
            close(fd)
            if !succeeded { unlink(temporary) }
        }
        let written = data.withUnsafeBytes { bytes -> Bool in
            var offset = 0
            while offset < bytes.count {
                let count = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += count
            }
            return true
        }
        guard written, fchmod(fd, 0o600) == 0, fsync(fd) == 0 else {
            throw Failure(path: temporary, reason: "write failed: \(String(cString: strerror(errno)))")
        }
        guard rename(temporary, path) == 0 else {
            throw Failure(path: path, reason: "rename failed: \(String(cString: strerror(errno)))")
        }
        succeeded = true
        let directory = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
    }
}
