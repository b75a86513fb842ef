package import Foundation

/// A directory of this thread's own for fuzz targets that must hand a reader a file: made once
/// per thread (on tmpfs where there is one, so that writes and syncs cost no disk, and inode
/// numbers are not reused at once), emptied before each input, removed when the process exits.
/// One path for every input of a thread, so that readers that keep what they decoded by path
/// (`DecodedFileCache`) keep one entry, not one per input; one per thread, because the tests that
/// replay the corpora run at once.
package enum FuzzScratch {
    package struct Unavailable: Error, CustomStringConvertible {
        package var description: String
    }

    private static let made: String? = {
        let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NSTemporaryDirectory()
        var template = Array((base + "/plugind-fuzz.XXXXXX").utf8CString)
        let path = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap { mkdtemp($0) }.map { String(cString: $0) }
        }
        if path != nil { atexit { FuzzScratch.removeAll() } }
        return path
    }()

    /// This thread's directory, empty.
    package static func emptyDirectory() throws -> String {
        guard let made else { throw Unavailable(description: "no scratch directory could be made") }
        let directory = made + "/thread-\(pthread_self())"
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw Unavailable(description: "\(directory): \(String(cString: strerror(errno)))")
        }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
        return directory
    }

    /// Writes `bytes` to `path` as a new file (a new inode: a reader's cache by file identity
    /// sees a change even when size and times match the last input's).
    package static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws {
        let temporary = path + ".new"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard descriptor >= 0 else { throw Unavailable(description: "\(temporary): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Glibc.write(descriptor, base + written, raw.count - written)
            }
            guard count > 0 else { throw Unavailable(description: "\(temporary): \(String(cString: strerror(errno)))") }
            written += count
        }
        guard rename(temporary, path) == 0 else { throw Unavailable(description: "\(path): \(String(cString: strerror(errno)))") }
    }

    private static func removeAll() {
        if let made { try? FileManager.default.removeItem(atPath: made) }
    }
}
