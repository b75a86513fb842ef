import Foundation
import Glibc
import PlugindSystem

/// The changes of a project's sources, for `plugind dev`: an inotify watch on every directory of
/// the project but its build outputs, followed into new directories.
final class SourceChanges: Sendable {
    /// Directories whose changes are the build's own, not the author's.
    static let ignored: Set<String> = ["build", ".build", "target", ".git"]

    /// How far one walk of a directory tree goes. Links to directories are followed (a project
    /// may link sources from elsewhere), so a tree may hold itself (two links to `.` make the
    /// paths below the project endless) or most of the disk (a link to `/`): the walk visits each
    /// directory once, and stops at these bounds.
    struct Limits: Sendable {
        /// Directories below the walk's start.
        var depth = 32
        /// Directory entries read, the walk's cost (files and directories alike).
        var entries = 65_536
    }

    /// What the walks so far did.
    struct WalkStatistics: Equatable, Sendable {
        /// Directory entries read.
        var entries = 0
        /// Directories watched (each directory once a walk, however many paths lead to it).
        var directories = 0
        /// Whether a walk stopped at a bound, leaving directories unwatched.
        var limitReached = false
    }

    private let inotify: Inotify
    private let limits: Limits
    private let watched: Locked<[Int32: String]>
    private let statistics = Locked(WalkStatistics())

    init(watching root: String, limits: Limits = Limits()) throws(CommandFailure) {
        do {
            inotify = try Inotify()
        } catch {
            throw CommandFailure(message: "cannot watch \(root.inert) for changes: \(error)", status: .failure)
        }
        self.limits = limits
        watched = Locked([:])
        add(root)
    }

    /// What the walks so far did.
    var walkStatistics: WalkStatistics { statistics.withLock { $0 } }

    /// A directory as the walk remembers it: the same directory by any path (a link) is the
    /// same pair.
    private struct DirectoryIdentity: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    /// Watches `top` and every directory below it, but the ignored ones: each directory once,
    /// however many links lead to it, within `limits`.
    private func add(_ top: String) {
        let mask = Inotify.directoryChanges | UInt32(IN_MODIFY)
        var walk = WalkStatistics()
        defer {
            let walked = walk
            statistics.withLock {
                $0.entries += walked.entries
                $0.directories += walked.directories
                $0.limitReached = $0.limitReached || walked.limitReached
            }
        }
        guard let identity = Self.directoryIdentity(top) else { return }
        var visited: Set<DirectoryIdentity> = [identity]
        // Breadth first: the first path to reach a directory is its shallowest, so that the depth
        // bound falls where the tree is deepest, not where a link happened to lead first.
        var pending = [(path: top, depth: 0)]
        var next = 0
        while next < pending.count {
            let (directory, depth) = pending[next]
            next += 1
            guard let watch = inotify.addWatch(directory, mask: mask) else { continue }
            watched.withLock { $0[watch] = directory }
            walk.directories += 1
            guard let stream = opendir(directory) else { continue }
            defer { closedir(stream) }
            while let entry = readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name == "." || name == ".." { continue }
                guard walk.entries < limits.entries else {
                    walk.limitReached = true
                    return
                }
                walk.entries += 1
                // A regular file needs no stat: the entry's type says it is no directory.
                let type = Int32(entry.pointee.d_type)
                guard !Self.ignored.contains(name), type == Int32(DT_DIR) || type == Int32(DT_LNK) || type == Int32(DT_UNKNOWN),
                    let identity = Self.directoryIdentity(directory + "/" + name), !visited.contains(identity)
                else { continue }
                guard depth < limits.depth else {
                    walk.limitReached = true
                    continue
                }
                visited.insert(identity)
                pending.append((directory + "/" + name, depth + 1))
            }
        }
    }

    /// The identity of the directory at `path` (a link followed, as the watch follows it); nil
    /// for anything else.
    private static func directoryIdentity(_ path: String) -> DirectoryIdentity? {
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else { return nil }
        return DirectoryIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    /// Forgets the events so far: a build starting now sees every change made after this.
    func discardPending() {
        inotify.drain { _ = follow($0) }
    }

    /// Whether `bytes` (a read of events) tell of a source change; watches new directories.
    private func follow(_ bytes: ArraySlice<UInt8>) -> Bool {
        var relevant = false
        for event in Inotify.events(in: bytes) ?? [] {
            guard !Self.ignored.contains(event.name), let directory = watched.withLock({ $0[event.watch] }) else { continue }
            relevant = true
            var isDirectory: ObjCBool = false
            let path = directory + "/" + event.name
            if !event.name.isEmpty, FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                add(path)
            }
        }
        return relevant
    }

    /// Returns after the next change of a source, once the writes that follow it have settled
    /// (an editor's save is often several): 150 ms without another event.
    func next() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread { [self] in
                waitForEvent(timeoutMilliseconds: -1)
                while waitForEvent(timeoutMilliseconds: 150) {}
                continuation.resume()
            }.start()
        }
    }

    /// Waits for events of a source (not of an ignored directory); watches new directories.
    /// False when `timeoutMilliseconds` passed without one.
    @discardableResult
    private func waitForEvent(timeoutMilliseconds: Int32) -> Bool {
        while true {
            var poller = pollfd(fd: inotify.descriptor.rawValue, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, timeoutMilliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return false }
            var relevant = false
            inotify.drain { bytes in if follow(bytes) { relevant = true } }
            if relevant { return true }
        }
    }
}
