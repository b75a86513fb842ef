import ExtensionFoundation
import Foundation
import Glibc
import Observation
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing
import Synchronization

/// Discovery of many bundles, and how fast a monitor sees a change.
enum DiscoveryBenchmarks {
    /// Creates `count` bundles of the echo plugin under `root`, each with its own copy of the
    /// library (a bundle may not hold hard links).
    static func populate(_ root: String, count: Int) throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let library = try Data(contentsOf: URL(fileURLWithPath: BenchHost.productsDirectory + "/libEcho.so"))
        for index in 0..<count { try writeBundle(index, at: root + "/bundle-\(index).appex", library: library) }
    }

    /// A bundle of the echo plugin as the `index`th of a populated root.
    private static func writeBundle(_ index: Int, at bundle: String, library: Data) throws {
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: false)
        let manifest = """
            {"manifestVersion": 1, "identifier": "org.plugind.bench.plugin\(index)", "name": "Plugin \(index)",
             "version": "1.0.0", "extensionPoint": "org.plugind.bench.point", "library": "libEcho.so"}
            """
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        try library.write(to: URL(fileURLWithPath: bundle + "/libEcho.so"))
    }

    static func host(root: String, state: String) -> AppExtensionHost {
        var host = AppExtensionHost(identifier: "org.plugind.bench", environment: ["HOME": state])
        host.bundledPluginsDirectory = nil
        host.searchPaths = [URL(fileURLWithPath: root)]
        host.policyDirectory = URL(fileURLWithPath: state + "/config")
        host.administratorPolicyDirectory = URL(fileURLWithPath: state + "/admin")
        host.stateDirectory = URL(fileURLWithPath: state + "/state")
        return host
    }

    /// One scan of `root` in this process; prints the time and how many bundles were found.
    static func scan(root: String, state: String, name: String, rescanCount: Int) async throws {
        let host = host(root: root, state: state)
        var found = 0
        let elapsed = await microseconds { found = Inventory.take(host: host).items.count }
        guard found > 0 else { throw BenchError("no usable bundle under \(root): \(Inventory.take(host: host).problems.prefix(3))") }
        Measurement(name: name, values: [elapsed], extra: ["bundles": Double(found)]).report()
        // The same process again: what a monitor pays for each rescan.
        var rescans: [Double] = []
        for _ in 0..<max(1, rescanCount) {
            rescans.append(await microseconds { found = Inventory.take(host: host).items.count })
        }
        Measurement(name: name + "-rescan", values: rescans, extra: ["bundles": Double(found)]).report()
    }

    /// From an approval written to the policy file to the monitor's `identities` showing it,
    /// as `Observations` sees it; then from an approved bundle renamed out of the root (a
    /// removal) and back into it (what `plugind install` does last) to the same.
    static func monitorLatency(iterations: Int) async throws {
        let bench = try BenchHost()
        defer { bench.remove() }
        let root = bench.directory + "/external"
        try populate(root, count: 1)
        let host = host(root: root, state: bench.directory)
        let monitor = AppExtensionPoint.Monitor(host: host)
        try await monitor.addAppExtensionPoint(try AppExtensionPoint(identifier: "org.plugind.bench.point", scope: .none))
        guard let entry = Inventory.take(host: host).item("org.plugind.bench.plugin0")?.entry else {
            throw BenchError("the populated bundle was not discovered: \(Inventory.take(host: host).problems)")
        }
        let editor = PolicyEditor(directory: host.policyDirectory)
        let identities = AsyncStream<Int>.makeStream()
        let observer = Task {
            for await current in Observations({ monitor.identities }) { identities.continuation.yield(current.count) }
        }
        var iterator = identities.stream.makeAsyncIterator()
        _ = await iterator.next()
        var samples: [Double] = []
        for _ in 0..<iterations {
            let start = ContinuousClock.now
            try editor.approve(entry)
            while await iterator.next() != 1 {}
            let (seconds, attoseconds) = start.duration(to: .now).components
            samples.append(Double(seconds) * 1e6 + Double(attoseconds) / 1e12)
            try editor.revoke(entry.identifier)
            while await iterator.next() != 0 {}
        }
        try editor.approve(entry)
        while await iterator.next() != 1 {}
        let (bundle, aside) = (entry.bundle.bundlePath, root + "/.aside")
        var removals: [Double] = []
        var installs: [Double] = []
        for _ in 0..<iterations {
            var start = ContinuousClock.now
            try FileManager.default.moveItem(atPath: bundle, toPath: aside)
            while await iterator.next() != 0 {}
            removals.append(elapsedMicroseconds(since: start))
            start = ContinuousClock.now
            try FileManager.default.moveItem(atPath: aside, toPath: bundle)
            while await iterator.next() != 1 {}
            installs.append(elapsedMicroseconds(since: start))
        }
        observer.cancel()
        Measurement(name: "approve-to-observation", values: samples).report()
        Measurement(name: "install-to-observation", values: installs).report()
        Measurement(name: "remove-to-observation", values: removals).report()
    }

    private static func elapsedMicroseconds(since start: ContinuousClock.Instant) -> Double {
        let (seconds, attoseconds) = start.duration(to: .now).components
        return Double(seconds) * 1e6 + Double(attoseconds) / 1e12
    }

    /// Scans a monitor makes for one install, done as `plugind install` does it (copied into a
    /// hidden staging directory in the root, then renamed into place): counted once the monitor
    /// lists the plugin and 100 ms passed for any further scan to show.
    static func scansPerInstall(iterations: Int) async throws {
        let bench = try BenchHost()
        defer { bench.remove() }
        let root = bench.directory + "/external"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let host = host(root: root, state: bench.directory)
        let engine = MonitorEngine(host: host)
        let inventories = AsyncStream<Int>.makeStream()
        engine.onInventory = { inventory in inventories.continuation.yield(inventory.items.count) }
        try await engine.refreshNow()
        var iterator = inventories.stream.makeAsyncIterator()
        _ = await iterator.next()
        let library = try Data(contentsOf: URL(fileURLWithPath: BenchHost.productsDirectory + "/libEcho.so"))
        var samples: [Double] = []
        for index in 0..<iterations {
            let before = engine.scanCount
            let staging = root + "/.bundle-\(index).installing"
            try writeBundle(index, at: staging, library: library)
            try FileManager.default.moveItem(atPath: staging, toPath: root + "/bundle-\(index).appex")
            while let count = await iterator.next(), count < index + 1 {}
            try await Task.sleep(for: .milliseconds(100))
            samples.append(Double(engine.scanCount - before))
        }
        engine.stop()
        Measurement(name: "scans-per-install", unit: "scans", values: samples).report()
    }

    /// CPU time an idle monitor uses over `seconds`.
    /// The process's CPU time over `seconds` with a Monitor open on 100 bundles and nothing
    /// changing, measured after `settle` seconds: the add's own work ends first, and so do the
    /// threads of the global dispatch pool it woke, which the pool ends after five idle seconds.
    /// `withMonitor: false` is the same program without the Monitor, the baseline: the dispatch
    /// pool's housekeeping (a timer each second while it keeps threads) would be in both.
    static func idleMonitor(seconds: Int, settle: Int, withMonitor: Bool) async throws {
        let bench = try BenchHost()
        defer { bench.remove() }
        let root = bench.directory + "/external"
        try populate(root, count: 100)
        let monitor = AppExtensionPoint.Monitor(host: host(root: root, state: bench.directory))
        if withMonitor {
            try await monitor.addAppExtensionPoint(try AppExtensionPoint(identifier: "org.plugind.bench.point", scope: .none))
        }
        // Blocking sleeps: a timer of the concurrency runtime or of dispatch would wake threads
        // of the measuring program itself inside the window.
        sleep(UInt32(settle))
        let before = cpuMicroseconds()
        sleep(UInt32(seconds))
        let used = cpuMicroseconds() - before
        _ = monitor.identities
        Measurement(
            name: withMonitor ? "idle-monitor-cpu" : "idle-baseline-cpu", values: [Double(used)],
            extra: ["seconds": Double(seconds), "settleSeconds": Double(settle)]
        ).report()
    }

    static func cpuMicroseconds() -> Int {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_utime.tv_sec * 1_000_000 + Int(usage.ru_utime.tv_usec) + usage.ru_stime.tv_sec * 1_000_000
            + Int(usage.ru_stime.tv_usec)
    }
}
