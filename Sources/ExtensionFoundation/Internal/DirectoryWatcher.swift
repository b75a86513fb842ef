import CPlugindShims
import Foundation
import Glibc
import PlugindSystem

/// Watches directories with inotify on the event loop and calls `onChange` once per burst of
/// events: the first event starts a short quiet period, and everything that arrives during it is
/// folded into the same call. Idle, it costs nothing: no polling, no timers.
final class DirectoryWatcher: EventLoopHandler {
    private let descriptor: FileDescriptor
    private let loop: WorkerEventLoop
    private let quietPeriod: Duration
    private let onChange: @Sendable () -> Void

    private struct State {
        var watches: [String: Int32] = [:]
        var changePending = false
        var closed = false
    }

    private let state = Locked(State())

    private static let mask: UInt32 =
        UInt32(IN_CREATE) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM) | UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE)
        | UInt32(IN_ATTRIB) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF)

    init(loop: WorkerEventLoop, quietPeriod: Duration = .milliseconds(5), onChange: @escaping @Sendable () -> Void) throws(SystemError) {
        let fd = try retryingInterrupts("inotify_init1") { inotify_init1(CInt(IN_NONBLOCK | IN_CLOEXEC)) }
        descriptor = FileDescriptor(rawValue: fd)
        self.loop = loop
        self.quietPeriod = quietPeriod
        self.onChange = onChange
        do {
            try loop.register(descriptor, events: Epoll.readable, handler: self)
        } catch {
            descriptor.close()
            throw error
        }
    }

    /// Makes the watched set exactly `paths` (directories or files). A path that does not exist
    /// is replaced by its nearest existing ancestor, so its creation is noticed too. Returns
    /// whether a path is watched that was not before.
    @discardableResult
    func watch(_ paths: Set<String>) -> Bool {
        var wanted: Set<String> = []
        for path in paths {
            var candidate = path
            while !FileManager.default.fileExists(atPath: candidate) && candidate != "/" {
                candidate = (candidate as NSString).deletingLastPathComponent
            }
            wanted.insert(candidate)
        }
        return state.withLock { state in
            guard !state.closed else { return false }
            for (path, watch) in state.watches where !wanted.contains(path) {
                inotify_rm_watch(descriptor.rawValue, watch)
                state.watches[path] = nil
            }
            var added = false
            for path in wanted where state.watches[path] == nil {
                let watch = inotify_add_watch(descriptor.rawValue, path, Self.mask)
                if watch >= 0 {
                    state.watches[path] = watch
                    added = true
                }
            }
            return added
        }
    }

    var watchedPaths: Set<String> {
        state.withLock { Set($0.watches.keys) }
    }

    func handleEvent(descriptor fd: Int32, events: UInt32) {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var sawEvent = false
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor.rawValue, $0.baseAddress, $0.count) }
            if count > 0 {
                sawEvent = true
                continue
            }
            if count < 0 && errno == EINTR { continue }
            break
        }
        guard sawEvent else { return }
        let schedule = state.withLock { state -> Bool in
            guard !state.closed, !state.changePending else { return false }
            state.changePending = true
            return true
        }
        if schedule {
            loop.schedule(after: quietPeriod) { [weak self] in
                guard let self else { return }
                let fire = self.state.withLock { state -> Bool in
                    state.changePending = false
                    return !state.closed
                }
                if fire { self.onChange() }
            }
        }
    }

    /// The loop gave up: stop, and tell the owner, whose next refresh makes a new watcher.
    func loopFailed(_ error: SystemError) {
        let wasOpen = state.withLock { state -> Bool in
            defer { state.closed = true }
            return !state.closed
        }
        guard wasOpen else { return }
        descriptor.close()
        onChange()
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Stops watching; the descriptor is closed on the loop thread.
    func close() {
        let wasOpen = state.withLock { state -> Bool in
            defer { state.closed = true }
            return !state.closed
        }
        guard wasOpen else { return }
        let descriptor = descriptor
        loop.execute { [loop] in
            loop.deregister(descriptor)
            descriptor.close()
        }
    }
}
