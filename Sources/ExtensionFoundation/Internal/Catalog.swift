import Foundation
package import PlugindBundle
import PlugindWire
import Synchronization

/// A directory plugind searches for bundles.
package struct SearchRoot: Sendable, Hashable {
    package var path: String
    /// Bundled with the host: enabled without approval (`Scope(restriction: .application)`).
    package var isBundledWithHost: Bool

    package init(path: String, isBundledWithHost: Bool) {
        self.path = path
        self.isBundledWithHost = isBundledWithHost
    }

    /// The roots of `host` in precedence order: bundled plugins first, then the search paths.
    package static func roots(of host: AppExtensionHost) -> [SearchRoot] {
        var roots: [SearchRoot] = []
        if let bundled = host.bundledPluginsDirectory {
            roots.append(SearchRoot(path: bundled.path, isBundledWithHost: true))
        }
        roots += host.searchPaths.map { SearchRoot(path: $0.path, isBundledWithHost: false) }
        return roots
    }
}

/// One usable bundle the catalog found.
package struct CatalogEntry: Sendable, Hashable {
    package var bundle: InspectedBundle
    package var root: SearchRoot

    package var manifest: Manifest { bundle.manifest }
    package var identifier: String { bundle.manifest.identifier }
}

/// The result of one scan: the winning bundle for each identifier, in root order, and a
/// diagnostic for every candidate that was rejected or shadowed.
package struct CatalogSnapshot: Sendable {
    package var entries: [CatalogEntry] = []
    package var diagnostics: [AppExtensionDiagnostic] = []

    package func entry(for identifier: String) -> CatalogEntry? {
        entries.first { $0.identifier == identifier }
    }
}

/// Scans search roots for bundles. Remembers each bundle's result keyed by the identity (device,
/// inode, size, modification and change time) of its directory, manifest and library, so an
/// unchanged tree is re-read with three `stat` calls per bundle and no file contents.
package final class Catalog: Sendable {
    private struct CachedBundle: Sendable {
        var keys: [FileIdentity?]
        var result: Result<InspectedBundle, BundleProblem>
    }

    private let cache = Mutex<[String: CachedBundle]>([:])
    private let inspections = Atomic<Int>(0)
    private let hostVersion: HostVersion
    private let resolver: LibraryResolver

    package init(hostVersion: HostVersion = .current) {
        self.hostVersion = hostVersion
        self.resolver = LibraryResolver()
    }

    /// How many bundles were read in full (manifest parsed, library checked) so far; cache hits
    /// do not count.
    package var inspectionCount: Int {
        inspections.load(ordering: .relaxed)
    }

    package func scan(_ roots: [SearchRoot]) -> CatalogSnapshot {
        var snapshot = CatalogSnapshot()
        var winners: [String: CatalogEntry] = [:]
        var seenRoots: Set<String> = []
        var livePaths: Set<String> = []
        for root in roots {
            let rootPath = canonicalPath(root.path) ?? root.path
            guard seenRoots.insert(rootPath).inserted else { continue }
            for bundlePath in Self.bundleDirectories(in: rootPath) {
                livePaths.insert(bundlePath)
                switch inspect(bundlePath) {
                case .success(let bundle):
                    let entry = CatalogEntry(bundle: bundle, root: root)
                    if let winner = winners[bundle.manifest.identifier] {
                        snapshot.diagnostics.append(
                            AppExtensionDiagnostic(
                                kind: .shadowed,
                                path: bundle.bundlePath,
                                bundleIdentifier: bundle.manifest.identifier,
                                extensionPointIdentifier: bundle.manifest.extensionPoint,
                                message: "shadowed by \(winner.bundle.bundlePath), which has the same identifier in an earlier search root"
                            )
                        )
                    } else {
                        winners[bundle.manifest.identifier] = entry
                        snapshot.entries.append(entry)
                    }
                case .failure(let problem):
                    snapshot.diagnostics.append(Self.diagnostic(for: problem, at: bundlePath))
                }
            }
        }
        // Forget bundles that are gone.
        cache.withLock { cache in
            for path in cache.keys where !livePaths.contains(path) { cache[path] = nil }
        }
        return snapshot
    }

    /// Directories directly inside `root` that hold a manifest.
    static func bundleDirectories(in root: String) -> [String] {
        candidateDirectories(in: root).filter { FileManager.default.fileExists(atPath: $0 + "/" + Manifest.fileName) }
    }

    /// Every directory directly inside `root` that is not hidden: a bundle, or one being copied in
    /// whose manifest is not there yet.
    static func candidateDirectories(in root: String) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return names.sorted().compactMap { name in
            guard !name.hasPrefix(".") else { return nil }
            let path = root + "/" + name
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue ? path : nil
        }
    }

    func inspect(_ bundlePath: String) -> Result<InspectedBundle, BundleProblem> {
        let cached = cache.withLock { $0[bundlePath] }
        if let cached, cached.keys == currentKeys(bundlePath, library: libraryPath(of: cached.result)) {
            return cached.result
        }
        inspections.add(1, ordering: .relaxed)
        let result = BundleInspector.inspect(bundleAt: bundlePath, hostVersion: hostVersion, resolver: resolver)
        let keys = currentKeys(bundlePath, library: libraryPath(of: result))
        cache.withLock { $0[bundlePath] = CachedBundle(keys: keys, result: result) }
        return result
    }

    private func libraryPath(of result: Result<InspectedBundle, BundleProblem>) -> String? {
        switch result {
        case .success(let bundle): bundle.libraryPath
        case .failure(let problem): problem.libraryPath
        }
    }

    private func currentKeys(_ bundlePath: String, library: String?) -> [FileIdentity?] {
        [
            FileStatus(path: bundlePath)?.identity,
            FileStatus(path: bundlePath + "/" + Manifest.fileName)?.identity,
            library.flatMap { FileStatus(path: $0)?.identity },
        ]
    }

    static func diagnostic(for problem: BundleProblem, at path: String) -> AppExtensionDiagnostic {
        let kind: AppExtensionDiagnostic.Kind
        switch problem.kind {
        case .invalidManifest: kind = .invalidManifest
        case .libraryMissing: kind = .libraryMissing
        case .libraryOutsideBundle: kind = .libraryOutsideBundle
        case .notALibrary: kind = .notALibrary
        case .wrongArchitecture: kind = .wrongArchitecture
        case .insecurePermissions: kind = .insecurePermissions
        case .requiresNewerHost: kind = .requiresNewerHost
        }
        return AppExtensionDiagnostic(
            kind: kind,
            path: path,
            bundleIdentifier: problem.identifier,
            extensionPointIdentifier: problem.extensionPoint,
            message: problem.message
        )
    }
}

extension Catalog {
    /// The process-wide catalog; its cache is shared by monitors and launches.
    package static let shared = Catalog()

    /// The bundle at `bundlePath` as the catalog sees it now (cached when unchanged), with the
    /// search root it lives in. Nil when it is in none of `roots` or has no manifest any more.
    package func entry(atBundlePath bundlePath: String, roots: [SearchRoot]) -> Result<CatalogEntry, BundleProblem>? {
        let parent = (bundlePath as NSString).deletingLastPathComponent
        guard let root = roots.first(where: { (canonicalPath($0.path) ?? $0.path) == parent }),
            FileManager.default.fileExists(atPath: bundlePath + "/" + Manifest.fileName)
        else { return nil }
        return inspect(bundlePath).map { CatalogEntry(bundle: $0, root: root) }
    }
}
