import Dispatch
import Foundation
import PlugindSystem

/// The moving parts behind a monitor: a directory watcher whose bursts of events trigger a
/// rescan on a serial queue (scans read files; they never run on the event loop or the
/// cooperative pool), and the set of paths to watch after each scan.
package final class MonitorEngine: Sendable {
    private let host: AppExtensionHost
    private let queue = DispatchQueue(label: "plugind.monitor", qos: .utility)
    private let watcher = Locked<DirectoryWatcher?>(nil)
    private let callback = Locked<(@Sendable (Inventory) -> Void)?>(nil)
    /// Makes the directory watcher: inotify on the shared loop, or what a test puts in its place.
    private let makeWatcher: @Sendable (@escaping @Sendable () -> Void) throws -> DirectoryWatcher

    package init(host: AppExtensionHost) {
        self.host = host
        let ignored = Self.ignoredFiles(host: host)
        self.makeWatcher = { onChange in try DirectoryWatcher(loop: try WorkerEventLoop.shared(), ignoring: ignored, onChange: onChange) }
    }

    /// Changes that are no change to the plugins: plugind's own catalog cache (and its temporary
    /// files) in the state directory, which every scan may write — each scan caused another —
    /// and hidden entries of a root, such as `plugind install`'s staging directory, which no scan
    /// looks at; the rename that ends an install is an event of its own.
    static func ignoredFiles(host: AppExtensionHost) -> [(directory: String, namePrefix: String)] {
        [(host.stateDirectory.path, CatalogStore.fileName)] + SearchRoot.roots(of: host).map { ($0.path, ".") }
    }

    /// Scans so far (tests and the benchmark count scans per change).
    package var scanCount: Int { scans.withLock { $0 } }
    private let scans = Locked(0)

    /// An engine whose watcher comes from `makeWatcher` (tests make it fail).
    init(host: AppExtensionHost, makeWatcher: @escaping @Sendable (@escaping @Sendable () -> Void) throws -> DirectoryWatcher) {
        self.host = host
        self.makeWatcher = makeWatcher
    }

    package var onInventory: (@Sendable (Inventory) -> Void)? {
        get { callback.withLock { $0 } }
        set { callback.withLock { $0 = newValue } }
    }

    /// Scans now and returns when the result is published; starts watching on first use.
    package func refreshNow() async throws {
        try startWatching()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                refresh()
                continuation.resume()
            }
        }
    }

    private func startWatching() throws {
        try watcher.withLock { watcher in
            // A watcher whose loop gave up is replaced by one on a new loop.
            guard watcher == nil || watcher?.isClosed == true else { return }
            do {
                watcher = try makeWatcher { [weak self] in
                    guard let self else { return }
                    self.queue.async { self.refresh() }
                }
            } catch {
                throw AppExtensionError(
                    .configurationError, plugin: nil, "cannot watch the plugin directories: \(error)", underlying: error)
            }
        }
    }

    /// Runs on `queue`. Directories are watched before they are scanned, so a change during
    /// the scan raises an event of its own and one scan covers one change; only a path the scan
    /// itself brings up (a problem outside the candidate directories) needs a second look.
    private func refresh() {
        try? startWatching()
        watcher.withLock { _ = $0?.watch(Self.pathsToWatch(host: host, inventory: nil)) }
        var inventory = scan()
        let addedWatches = watcher.withLock { $0?.watch(Self.pathsToWatch(host: host, inventory: inventory)) ?? false }
        if addedWatches { inventory = scan() }
        callback.withLock { $0 }?(inventory)
    }

    private func scan() -> Inventory {
        scans.withLock { $0 += 1 }
        return Inventory.take(host: host)
    }

    static func pathsToWatch(host: AppExtensionHost, inventory: Inventory?) -> Set<String> {
        let roots = SearchRoot.roots(of: host).map(\.path)
        var paths = Set(roots)
        // Every directory in a root, not only complete bundles: a manifest written into a new
        // directory raises no event on the root.
        for root in roots { paths.formUnion(Catalog.candidateDirectories(in: root)) }
        paths.formUnion(inventory?.problems.map(\.path) ?? [])
        paths.insert(host.policyDirectory.path)
        paths.insert(host.administratorPolicyDirectory.path)
        paths.insert(host.stateDirectory.path)
        return paths
    }

    /// The paths inotify watches right now.
    package var watchedPaths: Set<String> {
        watcher.withLock { $0?.watchedPaths ?? [] }
    }

    package func stop() {
        watcher.withLock { watcher in
            watcher?.close()
            watcher = nil
        }
        onInventory = nil
    }
}
