import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem
import PlugindTypes
import PlugindWire

/// Finds the LADSPA and frei0r plugins installed on the machine and lists each through a bundle
/// of its own (`ForeignPluginBundles`): every library of the directories enumerated, checked by
/// the system-library rule (root owns the file and every directory on the way, and nobody else
/// may write them), described by a confined scanning worker (`ForeignPluginScanner`) unless the
/// cache knows its bytes. A library that is refused, crashes or hangs while being scanned is
/// reported by its path, and the rest are listed.
package enum ForeignPluginDiscovery {
    package struct Report: Sendable, Codable {
        package struct Failure: Sendable, Hashable, Codable {
            package var library: String
            package var reason: String
        }

        package var plugins: [ForeignPluginListing] = []
        package var failures: [Failure] = []
        /// Libraries described by a scanning worker in this refresh.
        package var scanned = 0
        /// Libraries whose description came from the cache.
        package var reused = 0
    }

    private enum Outcome: Sendable {
        case described(canonicalPath: String, ForeignPluginCache.Record, scanned: Bool)
        case failed(String)
    }

    /// How many scanning workers run at once.
    static let parallelScans = 4

    /// Refreshes the bundles of `host`'s foreign plugins from `directories`; `progress` hears
    /// each library as it is done (done, total, path).
    package static func refresh(
        host: AppExtensionHost, directories: [ForeignPluginDirectory], scanTimeout: Duration = .seconds(30),
        progress: @escaping @Sendable (Int, Int, String) -> Void = { _, _, _ in }
    ) async throws -> Report {
        let state = host.stateDirectory.path
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let cachePath = ForeignPluginCache.path(stateDirectory: state)
        var cache = ForeignPluginCache.load(from: cachePath)
        let libraries = ForeignPluginLibrary.enumerate(directories)
        var report = Report()

        let known = cache.records
        let outcomes = await withTaskGroup(of: (Int, Outcome).self) { group in
            var results = [Outcome?](repeating: nil, count: libraries.count)
            var next = 0
            var done = 0
            func add() {
                guard next < libraries.count else { return }
                let index = next
                next += 1
                group.addTask {
                    (index, await outcome(libraries[index], known: known, host: host, timeout: scanTimeout))
                }
            }
            for _ in 0..<parallelScans { add() }
            for await (index, result) in group {
                results[index] = result
                done += 1
                progress(done, libraries.count, libraries[index].path)
                add()
            }
            return results
        }

        var present: Set<String> = []
        var manifests: [String: [UInt8]] = [:]
        for (library, outcome) in zip(libraries, outcomes) {
            guard let outcome else { continue }
            switch outcome {
            case .failed(let reason):
                report.failures.append(.init(library: library.path, reason: reason))
            case .described(let canonicalPath, let record, let scanned):
                present.insert(canonicalPath)
                cache.set(canonicalPath, record)
                if scanned { report.scanned += 1 } else { report.reused += 1 }
                switch record.result {
                case .failure(let failure):
                    report.failures.append(.init(library: library.path, reason: failure.message))
                case .success(let description):
                    for (listing, manifest) in ForeignPluginBundles.manifests(
                        for: library, canonicalPath: canonicalPath, description: description)
                    {
                        if let other = report.plugins.first(where: { $0.identifier == listing.identifier }) {
                            report.failures.append(
                                .init(
                                    library: library.path,
                                    reason: "its plugin \(listing.identifier) is listed already from \(other.library)"))
                            continue
                        }
                        report.plugins.append(listing)
                        manifests[listing.identifier] = manifest
                    }
                }
            }
        }
        cache.keep(only: present)
        cache.save(to: cachePath)
        try ForeignPluginBundles.write(manifests, root: ForeignPluginBundles.root(stateDirectory: state))
        return report
    }

    /// One library: refused, reused from the cache, or scanned now.
    private static func outcome(
        _ library: ForeignPluginLibrary, known: [String: ForeignPluginCache.Record], host: AppExtensionHost, timeout: Duration
    ) async -> Outcome {
        let resolution: TrustedLibraryPath.Resolution
        switch TrustedLibraryPath.resolve(library.path, rule: .systemPlugin) {
        case .success(let resolved): resolution = resolved
        case .failure(let refusal): return .failed("refused: \(refusal.reason)")
        }
        let path = resolution.canonicalPath
        let identity = resolution.status.identity
        if let record = known[path], record.identity == identity {
            return .described(canonicalPath: path, record, scanned: false)
        }
        do {
            _ = try ELFFile.checkHeader(atPath: path)
        } catch {
            return .failed("not a library for this machine: \(error)")
        }
        guard let digest = try? ContentHashes.shared.digest(ofFileAtPath: path, identity: identity) else {
            return .failed("cannot be read")
        }
        if var record = known[path], record.digest == digest {
            record.identity = identity
            return .described(canonicalPath: path, record, scanned: false)
        }
        let result = await ForeignPluginScanner.describe(
            library, canonicalPath: path, status: resolution.status, host: host, timeout: timeout)
        return .described(canonicalPath: path, ForeignPluginCache.Record(identity: identity, digest: digest, result: result), scanned: true)
    }
}
