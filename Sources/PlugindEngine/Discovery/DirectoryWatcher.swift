import Dispatch
import FoundationEssentials
import Glibc
import PlugindSystem

/// Watches directories with inotify on the event loop and calls `onChange` once per burst of
/// events: the first event starts a short quiet period, and everything that arrives during it is
/// folded into the same call. Idle, it costs nothing: no polling, no timers.
final class DirectoryWatcher: EventLoopHandler {
    private let inotify: Inotify
    private var descriptor: FileDescriptor { inotify.descriptor }
    private let loop: WorkerEventLoop
    private let quietPeriod: Duration
    private let onChange: @Sendable () -> Void

    private struct State {
        var watches: [String: Int32] = [:]
        /// Files whose events are no change to report: (directory, name prefix) pairs, such as
        /// plugind's own catalog cache in the state directory.
        var ignored: [(directory: String, namePrefix: String)] = []
        var changePending = false
        var closed = false
    }

    private let state = Locked(State())

    init(
        loop: WorkerEventLoop, quietPeriod: Duration = .milliseconds(5), ignoring ignored: [(directory: String, namePrefix: String)] = [],
        onChange: @escaping @Sendable () -> Void
    ) throws(SystemError) {
        inotify = try Inotify()
        self.loop = loop
        self.quietPeriod = quietPeriod
        self.onChange = onChange
        state.withLock { $0.ignored = ignored }
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
    func watch(_ paths: Set<String>, ignoring ignored: [(directory: String, namePrefix: String)]? = nil) -> Bool {
        var wanted: Set<String> = []
        for path in paths {
            var candidate = path
            while !FileManager.default.fileExists(atPath: candidate) && candidate != "/" {
                candidate = candidate.deletingLastPathComponent
            }
            wanted.insert(candidate)
        }
        return state.withLock { state in
            guard !state.closed else { return false }
            if let ignored { state.ignored = ignored }
            for (path, watch) in state.watches where !wanted.contains(path) {
                inotify.removeWatch(watch)
                state.watches[path] = nil
            }
            var added = false
            for path in wanted where state.watches[path] == nil {
                if let watch = inotify.addWatch(path, mask: Inotify.directoryChanges) {
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
        var sawEvent = false
        inotify.drain { bytes in
            if !sawEvent && !onlyIgnored(bytes) { sawEvent = true }
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

    /// Whether every event in `bytes` (a read from inotify) concerns an ignored file.
    private func onlyIgnored(_ bytes: ArraySlice<UInt8>) -> Bool {
        let (directories, ignored) = state.withLock { state in
            (Dictionary(state.watches.map { ($1, $0) }, uniquingKeysWith: { first, _ in first }), state.ignored)
        }
        guard !ignored.isEmpty else { return false }
        return Self.onlyIgnored(bytes, directories: directories, ignored: ignored)
    }

    /// Whether every event in `bytes` names a file of `ignored`, its directory found by watch
    /// descriptor in `directories`.
    static func onlyIgnored(
        _ bytes: ArraySlice<UInt8>, directories: [Int32: String], ignored: [(directory: String, namePrefix: String)]
    ) -> Bool {
        guard let events = Inotify.events(in: bytes) else { return false }
        return events.allSatisfy { event in
            let directory = directories[event.watch] ?? ""
            return !event.name.isEmpty && ignored.contains { $0.directory == directory && event.name.hasPrefix($0.namePrefix) }
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

    /// Stops watching: the descriptor leaves the loop on the loop thread, and is closed on
    /// another, because closing an inotify descriptor waits for the kernel's grace period
    /// (milliseconds), which would stall every worker's I/O.
    func close() {
        let wasOpen = state.withLock { state -> Bool in
            defer { state.closed = true }
            return !state.closed
        }
        guard wasOpen else { return }
        let descriptor = descriptor
        loop.execute { [loop] in
            loop.deregister(descriptor)
            Self.closing.async { descriptor.close() }
        }
    }

    private static let closing = DispatchQueue(label: "plugind.inotify-close", qos: .utility)
}
