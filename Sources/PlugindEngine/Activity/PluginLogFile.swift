package import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem

/// The per-user log where no journal runs: JSON lines in two files under `<state>/logs`, each
/// rotated to `<name>.1` when it passes `rotationBytes`. What plugins say goes to `plugins.log`;
/// plugind's own events (crashes, quarantines, limits, refusals) and the owner's decisions go to
/// `events.log`, so that no amount of plugin text rotates them away. Hosts of the same user append
/// at once: each line is one `O_APPEND` write, and the rotation is done under a lock file.
///
/// Every reader treats the files as any process of the user may have written them: reads are
/// bounded (`readLimit` of each file, from its end) and lines longer than `maximumLineBytes` or
/// that do not parse are skipped.
package struct PluginLogFile: Sendable {
    /// One of the two logs.
    package enum Part: String, CaseIterable, Sendable {
        /// The plugins' own lines, and the notes saying how many of them were dropped.
        case pluginOutput = "plugins.log"
        /// plugind's events and the owner's decisions.
        case events = "events.log"

        /// Where an entry of `event` goes.
        package init(_ event: PluginLogEntry.Event) {
            switch event {
            case .log, .dropped: self = .pluginOutput
            case .crash, .killed, .quarantine, .limit, .refusal, .approve, .disable, .enable, .revoke: self = .events
            }
        }
    }

    package static let rotationBytes = 1 << 20
    /// The most read of one file at once: the files stay near `rotationBytes`, unless another
    /// process of the user grows them.
    package static let readLimit = 4 << 20
    /// Longer lines are not plugind's (an entry's message is cut at 8 KiB).
    package static let maximumLineBytes = 64 << 10

    package let directory: String

    package init(directory: String) {
        self.directory = directory
    }

    package func path(of part: Part) -> String { directory + "/" + part.rawValue }
    package func rotatedPath(of part: Part) -> String { path(of: part) + ".1" }

    /// Appends one line to its part; false when it could not be written.
    func append(_ entry: PluginLogEntry) -> Bool {
        guard var line = try? JSONEncoder.activityRecords.encode(entry) else { return false }
        line.append(UInt8(ascii: "\n"))
        if !PrivateDirectory.make(directory) { return false }
        let lock = open(directory + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { return false }
        defer { close(lock) }
        guard flock(lock, LOCK_EX) == 0 else { return false }
        let part = Part(entry.event)
        var status = stat()
        if lstat(path(of: part), &status) == 0, Int(status.st_size) + line.count > Self.rotationBytes {
            _ = rename(path(of: part), rotatedPath(of: part))
        }
        let file = open(path(of: part), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard file >= 0 else { return false }
        defer { close(file) }
        let written = line.withUnsafeBytes { Glibc.write(file, $0.baseAddress, $0.count) }
        return written == line.count
    }

    /// Every entry in both parts, oldest first (by the time each carries; ties keep file order).
    package func entries() -> [PluginLogEntry] {
        let entries = Part.allCases.flatMap { part in
            (lines(of: rotatedPath(of: part), from: 0).lines + lines(of: path(of: part), from: 0).lines).compactMap(Self.entry)
        }
        return entries.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    }

    /// The entry of one line; nil for one that is too long or does not parse.
    static func entry(_ line: Data) -> PluginLogEntry? {
        guard line.count <= maximumLineBytes else { return nil }
        return try? StrictJSONDecoder().decode(PluginLogEntry.self, from: line)
    }

    /// The complete lines of `path` from byte `offset` on (but no more than `readLimit` before
    /// its end), and the offset after the last one.
    package func lines(of path: String, from offset: Int) -> (lines: [Data], end: Int) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return ([], offset) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return ([], offset) }
        let size = Int(status.st_size)
        guard size > offset else { return ([], offset) }
        let start = max(offset, size - Self.readLimit)
        var data = Data(count: min(size - start, Self.readLimit))
        let count = data.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(start)) }
        guard count > 0 else { return ([], offset) }
        data.removeSubrange(count...)
        guard let last = data.lastIndex(of: UInt8(ascii: "\n")) else { return ([], offset) }
        var complete = data[data.startIndex...last]
        // Started inside the file to stay bounded: the first line is a part of one.
        if start > offset, let first = complete.firstIndex(of: UInt8(ascii: "\n")) { complete = complete[(first + 1)...] }
        let lines = complete.split(separator: UInt8(ascii: "\n")).map { Data($0) }
        return (lines, start + (last - data.startIndex) + 1)
    }

    /// What `plugind logs --follow` has read of each part: new entries as they are appended,
    /// also across a rotation (the rest of the old file is read from its new name).
    package struct Follower {
        private let file: PluginLogFile
        private var positions: [Part: (inode: UInt64, offset: Int)] = [:]

        /// From the current end of every part.
        package init(_ file: PluginLogFile) {
            self.file = file
            for part in Part.allCases {
                if let now = Self.identity(of: file.path(of: part)) { positions[part] = (now.inode, now.size) }
            }
        }

        /// The entries appended since the last call, oldest first.
        package mutating func newEntries() -> [PluginLogEntry] {
            var lines: [Data] = []
            for part in Part.allCases {
                guard let now = Self.identity(of: file.path(of: part)) else { continue }
                var position = positions[part] ?? (now.inode, 0)
                if now.inode != position.inode || now.size < position.offset {
                    // Rotated: what is left of the old file is under its `.1` name now.
                    if let rotated = Self.identity(of: file.rotatedPath(of: part)), rotated.inode == position.inode {
                        lines += file.lines(of: file.rotatedPath(of: part), from: position.offset).lines
                    }
                    position = (now.inode, 0)
                }
                let read = file.lines(of: file.path(of: part), from: position.offset)
                positions[part] = (position.inode, read.end)
                lines += read.lines
            }
            return lines.compactMap(PluginLogFile.entry).enumerated()
                .sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        }

        private static func identity(of path: String) -> (inode: UInt64, size: Int)? {
            var status = stat()
            guard stat(path, &status) == 0 else { return nil }
            return (UInt64(status.st_ino), Int(status.st_size))
        }
    }
}
