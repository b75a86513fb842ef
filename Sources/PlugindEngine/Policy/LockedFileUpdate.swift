package import FoundationEssentials
import Glibc
import PlugindBundle
// flock and open of the lock file: the policy files' lock protocol lives here, not in PlugindSystem.
package import PlugindSystem

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

    /// The file that was there could not be read as one of at most the update's limit: a FIFO,
    /// a device, a file too large, or one the system refused. Nothing was written.
    package struct Unreadable: Error, Sendable, CustomStringConvertible {
        package var path: String
        package var reason: RegularFileReadError
        package var description: String { "\(path) \(reason)" }
    }

    /// Runs `body` holding the lock for `path`, with the file's contents (nil: none) when it is a
    /// regular file of at most `limit` bytes (links followed: the callers vetted them with
    /// `TrustedPath`), else throws `Unreadable`; writes the data `body` returns, if any. A file
    /// `readableByEveryone` (the administrator's policy, which every user's plugind reads) is
    /// written 0644 in a directory made 0755; anything else is the owner's alone (0600, 0700).
    package static func update<Result>(
        _ path: String,
        limit: Int,
        readableByEveryone: Bool = false,
        _ body: (Data?) throws -> (data: Data?, result: Result)
    ) throws -> Result {
        let directory = path.deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: readableByEveryone ? 0o755 : 0o700])
        } catch {
            throw Failure(path: directory, reason: "cannot be created: \(ErrorText.describe(error))")
        }
        let lockPath = path + ".lock"
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw Failure(path: lockPath, reason: String(cString: strerror(errno))) }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw Failure(path: lockPath, reason: "flock: \(String(cString: strerror(errno)))") }
        }
        removeStaleTemporaries(of: path)
        let existing: Data?
        do throws(RegularFileReadError) {
            existing = Data(try FileDescriptor.readRegularFile(path, limit: limit, followingLinks: true))
        } catch .absent {
            existing = nil
        } catch {
            throw Unreadable(path: path, reason: error)
        }
        let (data, result) = try body(existing)
        if let data { try replace(path, with: data, mode: readableByEveryone ? 0o644 : 0o600) }
        return result
    }

    /// Removes the temporary files (`<name>.XXXXXX`, mkostemp's six letters and digits) that a
    /// writer killed between making one and renaming it over `path` left beside it. Every writer of
    /// `path` holds its lock while its own temporary file exists, so under the lock any is stale.
    static func removeStaleTemporaries(of path: String) {
        let directory = path.deletingLastPathComponent
        let prefix = path.lastPathComponent + "."
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        where name.hasPrefix(prefix) && name.utf8.count == prefix.utf8.count + 6
            && name.utf8.dropFirst(prefix.utf8.count).allSatisfy({ isASCIIAlphanumeric($0) })
        {
            unlink(directory + "/" + name)
        }
    }

    private static func isASCIIAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    /// Atomically replaces `path` with `data` (`AtomicFile.replace`), readable by the owner only
    /// unless `mode` says otherwise.
    package static func replace(_ path: String, with data: Data, mode: UInt32 = 0o600) throws {
        do {
            try AtomicFile.replace(path, with: [UInt8](data), mode: mode)
        } catch {
            throw Failure(path: path, reason: "cannot be replaced: \(error)")
        }
    }
}
