import Dispatch
import FoundationEssentials
import Glibc
import PlugindSystem

/// Discovery for one host configuration in this process: one directory watcher, and one scan per
/// change, whose inventory every subscriber gets — the monitors, the inventory streams
/// (`matching`, `availabilityUpdates`) and the owner's tools (`plugind watch`, `browse`). Before,
/// each of them ran an inotify instance and a scan of its own for the same change.
///
/// Bursts of events trigger a refresh on a serial queue (scans read files; they never run on the
/// event loop or the cooperative pool). Calls of `refreshNow` that arrive while a refresh waits
/// to run share it.
final class DiscoveryEngine: Sendable {
    typealias WatcherFactory = @Sendable (@escaping @Sendable () -> Void) throws -> DirectoryWatcher

    private let host: AppExtensionHost
    private let queue = DispatchQueue(label: "plugind.discovery", qos: .utility)
    private let makeWatcher: WatcherFactory
    /// The registry of the runtime this engine is shared in (`subscribe(host:in:_:)`), which it
    /// leaves with its last subscriber; nil for an engine of its own.
    private let registry: Locked<[DiscoveryEngine.Key: DiscoveryEngine]>?

    private struct State {
        var watcher: DirectoryWatcher?
        var subscribers: [Int: @Sendable (Inventory) -> Void] = [:]
        var nextSubscriber = 0
        /// Callers of `refreshNow` waiting for the refresh that is queued.
        var waiting: [CheckedContinuation<Void, Never>] = []
        /// A refresh is queued and has not started: a change or a caller arriving now is covered
        /// by it.
        var refreshQueued = false
        var scans = 0
        var stopped = false
    }

    private let state = Locked(State())

    /// What discovery depends on in a host configuration: two configurations that differ only in
    /// what it does not read (timeouts, limits, the worker, the log) share one engine, one
    /// watcher and one scan per change. What an inventory becomes for a subscriber (names in its
    /// languages, identities of its host) is the subscriber's.
    struct Key: Hashable, Sendable {
        let identifier: String
        let version: String
        let bundledPluginsDirectory: URL?
        let searchPaths: [URL]
        let policyDirectory: URL
        let administratorPolicyDirectory: URL
        let stateDirectory: URL
        let quarantine: AppExtensionHost.QuarantinePolicy

        init(_ host: AppExtensionHost) {
            identifier = host.identifier
            version = host.version
            bundledPluginsDirectory = host.bundledPluginsDirectory
            searchPaths = host.searchPaths
            policyDirectory = host.policyDirectory
            administratorPolicyDirectory = host.administratorPolicyDirectory
            stateDirectory = host.stateDirectory
            quarantine = host.quarantine
        }
    }

    /// Subscribes `onInventory` to the engine of `host` in `registry` (a runtime's), made on
    /// first use; it lives while it has subscribers. Returns the engine and the subscriber's token.
    static func subscribe(
        host: AppExtensionHost, registry: Locked<[DiscoveryEngine.Key: DiscoveryEngine]>,
        _ onInventory: @escaping @Sendable (Inventory) -> Void
    ) -> (DiscoveryEngine, Int) {
        registry.withLock { engines in
            let key = Key(host)
            let engine = engines[key] ?? DiscoveryEngine(host: host, makeWatcher: defaultWatcher(host: host), registry: registry)
            engines[key] = engine
            return (engine, engine.subscribe(onInventory))
        }
    }

    /// An engine of its own, with a watcher from `makeWatcher` (tests make it fail).
    convenience init(host: AppExtensionHost, makeWatcher: @escaping WatcherFactory) {
        self.init(host: host, makeWatcher: makeWatcher, registry: nil)
    }

    private init(host: AppExtensionHost, makeWatcher: @escaping WatcherFactory, registry: Locked<[DiscoveryEngine.Key: DiscoveryEngine]>?) {
        self.host = host
        self.makeWatcher = makeWatcher
        self.registry = registry
    }

    private static func defaultWatcher(host: AppExtensionHost) -> WatcherFactory {
        let ignored = ignoredFiles(host: host)
        return { onChange in try DirectoryWatcher(loop: try WorkerEventLoop.shared(), ignoring: ignored, onChange: onChange) }
    }

    /// Changes that are no change to the plugins: plugind's own catalog cache and foreign-plugin
    /// cache (and their temporary files) in the state directory, which every scan may write — each scan caused another —
    /// and hidden entries of a root, such as `plugind install`'s staging directory, which no scan
    /// looks at; the rename that ends an install is an event of its own.
    static func ignoredFiles(host: AppExtensionHost) -> [(directory: String, namePrefix: String)] {
        [(host.stateDirectory.path, CatalogStore.fileName), (host.stateDirectory.path, ForeignPluginCache.fileName)]
            + SearchRoot.roots(of: host).map { ($0.path, ".") }
    }

    // MARK: Subscribers

    /// Adds a subscriber, which gets every inventory from now on; returns its token.
    func subscribe(_ onInventory: @escaping @Sendable (Inventory) -> Void) -> Int {
        state.withLock { state in
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = onInventory
            return state.nextSubscriber
        }
    }

    /// Removes a subscriber. With the last one the watcher stops, and a shared engine leaves the
    /// registry (the next subscriber of the host makes a new one). Under the registry's lock, so
    /// that nobody subscribes to a shared engine that is stopping.
    func unsubscribe(_ token: Int) {
        let removal =
            registry?.withLock { engines -> Removal in
                let removal = removeSubscriber(token)
                if case .last = removal, engines[Key(host)] === self { engines[Key(host)] = nil }
                return removal
            } ?? removeSubscriber(token)
        if case .last(let watcher) = removal { watcher?.close() }
    }

    /// Stops the engine whatever its subscribers (its runtime shuts down): no more scans, the
    /// watcher closed. Subscribers keep the last inventory they had.
    func stop() {
        let watcher = state.withLock { state -> DirectoryWatcher? in
            state.stopped = true
            defer { state.watcher = nil }
            return state.watcher
        }
        watcher?.close()
    }

    private enum Removal {
        case unknownOrNotLast
        /// The last subscriber left: the engine stopped; its watcher, if it had one, to close.
        case last(DirectoryWatcher?)
    }

    private func removeSubscriber(_ token: Int) -> Removal {
        state.withLock { state -> Removal in
            guard state.subscribers.removeValue(forKey: token) != nil, state.subscribers.isEmpty else { return .unknownOrNotLast }
            state.stopped = true
            defer { state.watcher = nil }
            return .last(state.watcher)
        }
    }

    // MARK: Refreshing

    /// Scans now (or joins the refresh about to run) and returns once every subscriber has its
    /// result; starts watching on first use.
    func refreshNow() async throws {
        try startWatching()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let queueNow = state.withLock { state -> Bool in
                state.waiting.append(continuation)
                defer { state.refreshQueued = true }
                return !state.refreshQueued
            }
            if queueNow { queue.async { [self] in refresh() } }
        }
    }

    /// A burst of events: one refresh, unless one is queued already.
    private func changed() {
        let queueNow = state.withLock { state -> Bool in
            guard !state.stopped, !state.refreshQueued else { return false }
            state.refreshQueued = true
            return true
        }
        if queueNow { queue.async { [self] in refresh() } }
    }

    private func startWatching() throws {
        // A watcher whose loop gave up is replaced by one on a new loop.
        func needsWatcher(_ state: State) -> Bool { !state.stopped && (state.watcher == nil || state.watcher?.isClosed == true) }
        guard state.withLock({ needsWatcher($0) }) else { return }
        // The state directory exists before it is watched: made by the first scan's cache
        // otherwise, its creation would be a change, and cause a second scan.
        try? FileManager.default.createDirectory(
            atPath: host.stateDirectory.path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try state.withLock { state in
            guard needsWatcher(state) else { return }
            do {
                state.watcher = try makeWatcher { [weak self] in self?.changed() }
            } catch {
                throw AppExtensionError(
                    .configurationError, plugin: nil, "cannot watch the plugin directories: \(error)", underlying: error)
            }
        }
    }

    /// Runs on `queue`. Directories are watched before they are scanned, so a change during the
    /// scan raises an event of its own and one scan covers one change; only a path the scan
    /// itself brings up (a problem outside the candidate directories) needs a second look. Each
    /// root is listed once for the watches and once by the scan.
    private func refresh() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.refreshQueued = false
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        try? startWatching()
        let watcher = state.withLock { $0.watcher }
        let candidates = Self.watchedBeforeScan(host: host)
        watcher?.watch(candidates)
        var inventory = scan()
        let problems = Set(inventory.problems.map(\.path)).subtracting(candidates)
        if !problems.isEmpty, watcher?.watch(candidates.union(problems)) == true { inventory = scan() }
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber(inventory) }
        for continuation in waiting { continuation.resume() }
    }

    private func scan() -> Inventory {
        state.withLock { $0.scans += 1 }
        return Inventory.take(host: host)
    }

    /// The roots, every directory in them (not only complete bundles: a manifest written into a
    /// new directory raises no event on the root), and the policy and state directories.
    static func watchedBeforeScan(host: AppExtensionHost) -> Set<String> {
        let roots = SearchRoot.roots(of: host).map(\.path)
        var paths = Set(roots)
        for root in roots { paths.formUnion(Catalog.candidateDirectories(in: root)) }
        paths.insert(host.policyDirectory.path)
        paths.insert(host.administratorPolicyDirectory.path)
        paths.insert(host.stateDirectory.path)
        return paths
    }

    /// Scans so far (tests and the benchmark count scans per change).
    var scanCount: Int { state.withLock { $0.scans } }

    /// The paths inotify watches right now.
    var watchedPaths: Set<String> {
        state.withLock { $0.watcher?.watchedPaths ?? [] }
    }
}
