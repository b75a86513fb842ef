import Foundation
import Glibc
import PlugindSystem

/// The changes of a project's sources, for `plugind dev`: an inotify watch on every directory of
/// the project but its build outputs, followed into new directories.
final class SourceChanges: Sendable {
    /// Directories whose changes are the build's own, not the author's.
    static let ignored: Set<String> = ["build", ".build", "target", ".git"]

    private let inotify: Inotify
    private let watched: Locked<[Int32: String]>

    init(watching root: String) throws(CommandFailure) {
        do {
            inotify = try Inotify()
        } catch {
            throw CommandFailure(message: "cannot watch \(root.inert) for changes: \(error)", status: .failure)
        }
        watched = Locked([:])
        add(root)
    }

    /// Watches `directory` and every directory below it, but the ignored ones.
    private func add(_ directory: String) {
        let mask = Inotify.directoryChanges | UInt32(IN_MODIFY)
        guard let watch = inotify.addWatch(directory, mask: mask) else { return }
        watched.withLock { $0[watch] = directory }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where !Self.ignored.contains(name) {
            var isDirectory: ObjCBool = false
            let path = directory + "/" + name
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { add(path) }
        }
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
