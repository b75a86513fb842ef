package import Foundation
import PlugindSystem

/// The per-user log of plugin entries where no journal runs: JSON lines in
/// `<state>/logs/plugins.log`, rotated to `plugins.log.1` when it passes `rotationBytes`, so both
/// together never hold much more than twice that. Hosts of the same user append at once: each
/// line is one `O_APPEND` write, and the rotation is done under a lock file.
package struct PluginLogFile: Sendable {
    package static let fileName = "plugins.log"
    package static let rotationBytes = 1 << 20

    package let directory: String

    package init(directory: String) {
        self.directory = directory
    }

    package var path: String { directory + "/" + Self.fileName }
    package var rotatedPath: String { path + ".1" }

    /// Appends one line; false when it could not be written.
    func append(_ entry: PluginLogEntry) -> Bool {
        guard var line = try? JSONEncoder.activityRecords.encode(entry) else { return false }
        line.append(UInt8(ascii: "\n"))
        if !PrivateDirectory.make(directory) { return false }
        let lock = open(directory + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { return false }
        defer { close(lock) }
        guard flock(lock, LOCK_EX) == 0 else { return false }
        var status = stat()
        if lstat(path, &status) == 0, Int(status.st_size) + line.count > Self.rotationBytes {
            _ = rename(path, rotatedPath)
        }
        let file = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard file >= 0 else { return false }
        defer { close(file) }
        let written = line.withUnsafeBytes { Glibc.write(file, $0.baseAddress, $0.count) }
        return written == line.count
    }

    /// Every entry in both files, oldest first; lines that do not parse are skipped.
    package func entries() -> [PluginLogEntry] {
        (read(rotatedPath) + read(path)).compactMap { try? JSONDecoder().decode(PluginLogEntry.self, from: $0) }
    }

    /// The complete lines of `path` from byte `offset` on, and the offset after the last one.
    package func lines(of path: String, from offset: Int) -> (lines: [Data], end: Int) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return ([], offset) }
        defer { try? handle.close() }
        guard (try? handle.seek(toOffset: UInt64(offset))) != nil, let data = try? handle.readToEnd(), !data.isEmpty else {
            return ([], offset)
        }
        guard let last = data.lastIndex(of: UInt8(ascii: "\n")) else { return ([], offset) }
        let complete = data[data.startIndex...last]
        let lines = complete.split(separator: UInt8(ascii: "\n")).map { Data($0) }
        return (lines, offset + complete.count)
    }

    private func read(_ path: String) -> [Data] {
        lines(of: path, from: 0).lines
    }
}
