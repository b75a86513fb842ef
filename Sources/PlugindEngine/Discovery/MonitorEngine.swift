import PlugindSystem

/// One observer's subscription to its host's discovery (`DiscoveryEngine`): what a monitor, an
/// inventory stream, `plugind watch` or `plugind browse` holds. Every subscription of the same
/// host configuration shares one watcher and one scan per change.
package final class MonitorEngine: Sendable {
    private let engine: DiscoveryEngine
    private let token: Int
    private let callback = Locked<(@Sendable (Inventory) -> Void)?>(nil)

    /// A subscription to the engine of `host` in `runtime` (the calling task's).
    package init(host: AppExtensionHost, runtime: PlugindRuntime = .current) {
        (engine, token) = DiscoveryEngine.subscribe(host: host, registry: runtime.discoveryEngines, Self.forward(to: callback))
    }

    /// A subscription to an engine of its own, whose watcher comes from `makeWatcher` (tests make
    /// it fail).
    init(host: AppExtensionHost, makeWatcher: @escaping DiscoveryEngine.WatcherFactory) {
        engine = DiscoveryEngine(host: host, makeWatcher: makeWatcher)
        token = engine.subscribe(Self.forward(to: callback))
    }

    /// What the engine calls: whatever `onInventory` is at the time.
    private static func forward(to callback: Locked<(@Sendable (Inventory) -> Void)?>) -> @Sendable (Inventory) -> Void {
        { inventory in callback.withLock { $0 }?(inventory) }
    }

    /// Called with each inventory the host's engine takes, on its queue.
    package var onInventory: (@Sendable (Inventory) -> Void)? {
        get { callback.withLock { $0 } }
        set { callback.withLock { $0 = newValue } }
    }

    /// Scans now and returns when the result is published; starts watching on first use.
    package func refreshNow() async throws {
        try await engine.refreshNow()
    }

    /// Scans so far by the host's engine (tests and the benchmark count scans per change).
    package var scanCount: Int { engine.scanCount }

    /// The paths inotify watches right now.
    package var watchedPaths: Set<String> { engine.watchedPaths }

    /// Ends the subscription; idempotent.
    package func stop() {
        onInventory = nil
        engine.unsubscribe(token)
    }

    deinit {
        engine.unsubscribe(token)
    }
}
