import Dispatch
import FoundationEssentials
import Glibc
package import PlugindBundle
import PlugindSystem
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
        HostFiles.of(host).roots
    }
}

/// One usable bundle the catalog found.
package struct CatalogEntry: Sendable, Hashable {
    package var bundle: InspectedBundle
    package var root: SearchRoot

    package init(bundle: InspectedBundle, root: SearchRoot) {
        self.bundle = bundle
        self.root = root
    }

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
/// inode, size, modification and change time) of every entry of it, so an unchanged tree is
/// re-read with one `lstat` per entry (three for the usual bundle) and no file contents. The
/// identities are a hint for discovery only: a launch loads sealed copies whose bytes it hashed.
package final class Catalog: Sendable {
    /// What must be unchanged for a cached result to hold.
    private struct BundleKeys: Equatable, Sendable {
        var directory: FileIdentity?
        var manifest: FileIdentity?
        var library: FileIdentity?

        init(directory: FileIdentity?, manifest: FileIdentity?, library: FileIdentity?) {
            self.directory = directory
            self.manifest = manifest
            self.library = library
        }

        /// The identities a usable bundle was inspected with (taken before its files were read,
        /// so that a change while they were read shows next time).
        init(_ bundle: InspectedBundle) {
            self.init(
                directory: bundle.bundleStatus.identity, manifest: bundle.manifestStatus.identity, library: bundle.libraryStatus.identity)
        }
    }

    /// A class, so that a cache lookup retains one object rather than every field of a bundle.
    private final class CachedBundle: Sendable {
        let keys: BundleKeys
        let result: Result<InspectedBundle, BundleProblem>
        /// The scan that found the bundle unchanged on disk as it read the store, which need not
        /// examine it again.
        let unchangedInScan: Int?

        init(keys: BundleKeys, result: Result<InspectedBundle, BundleProblem>, unchangedInScan: Int? = nil) {
            self.keys = keys
            self.result = result
            self.unchangedInScan = unchangedInScan
        }
    }

    /// What the catalog has to do with the stores on disk (see `CatalogStore`).
    private struct StoreState {
        /// Directories whose store was read into the cache already.
        var loaded: Set<String> = []
        /// Set when a usable bundle was read in full or one went away: the store is out of date.
        var stale = false
    }

    private let cache = Locked<[String: CachedBundle]>([:])
    private let storeState = Locked(StoreState())
    private let inspections = Atomic<Int>(0)
    /// Scans begun, numbering each.
    private let scans = Atomic<Int>(0)
    private let resolver: LibraryResolver

    package init() {
        self.resolver = LibraryResolver()
    }

    /// How many bundles were read in full (manifest parsed, library checked) so far; cache hits
    /// do not count.
    package var inspectionCount: Int {
        inspections.load(ordering: .relaxed)
    }

    /// Scans `roots`. With `storeDirectory`, results kept on disk there by an earlier process
    /// are used (when the files are unchanged) and the store is updated after the scan.
    package func scan(_ roots: [SearchRoot], storeDirectory: String? = nil) -> CatalogSnapshot {
        let scanNumber = scans.add(1, ordering: .relaxed).newValue
        let store = storeDirectory.map { CatalogStore(directory: $0, writerVersion: .current) }
        // Each root once, canonical, in precedence order, open for the scan: files are examined
        // relative to it, a shorter path walk for each of them.
        var seenRoots: Set<String> = []
        var uniqueRoots: [(root: SearchRoot, path: String)] = []
        for root in roots {
            let rootPath = canonicalPath(root.path) ?? root.path
            if seenRoots.insert(rootPath).inserted { uniqueRoots.append((root, rootPath)) }
        }
        let rootDirectories = uniqueRoots.map { try? FileDescriptor.open($0.path, [.readOnly, .directory]) }
        defer { for directory in rootDirectories { directory?.close() } }
        let listings = listAndLoad(
            uniqueRoots.map(\.path), directories: rootDirectories, store: store, scanNumber: scanNumber)
        var snapshot = CatalogSnapshot()
        // Identifier → index of the winning entry in `snapshot.entries`.
        var winners: [String: Int] = [:]
        // What each root held, kept for the bookkeeping after the scan: the paths found and the
        // store's list are made from it only when they are needed (a rescan of an unchanged root
        // needs neither, and making them cost a string and a hash per bundle).
        var scanned: [(rootPath: String, found: [(name: String, found: CachedBundle?)])] = []
        var foundCount = 0
        let expectedCount = cache.withLock { $0.count }
        winners.reserveCapacity(expectedCount)
        snapshot.entries.reserveCapacity(expectedCount)
        for (index, (root, rootPath)) in uniqueRoots.enumerated() {
            let results = inspectAll(
                listings[index], inRoot: rootPath, descriptor: rootDirectories[index]?.rawValue ?? -1, scanNumber: scanNumber)
            scanned.append((rootPath, results))
            for (name, found) in results {
                guard let found else { continue }
                foundCount += 1
                switch found.result {
                case .success(let bundle):
                    // The first bundle of an identifier wins; its index is stored with one hash.
                    let index = snapshot.entries.count
                    let winnerIndex = Self.insertOrFind(bundle.manifest.identifier, index, in: &winners)
                    if winnerIndex != index {
                        let winner = snapshot.entries[winnerIndex]
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
                        snapshot.entries.append(CatalogEntry(bundle: bundle, root: root))
                    }
                case .failure(let problem):
                    snapshot.diagnostics.append(Self.diagnostic(for: problem, at: rootPath + "/" + name))
                }
            }
        }
        let forgotUsableBundle = forgetGone(from: scanned, foundCount: foundCount, roots: seenRoots)
        if let store {
            let shouldSave = storeState.withLock { state in
                defer { state.stale = false }
                return state.stale || forgotUsableBundle
            }
            if shouldSave {
                // What the store keeps: the usable bundles with where they were found, in scan order.
                store.save(
                    scanned.flatMap { root in
                        root.found.compactMap { name, found -> (foundAt: String, bundle: InspectedBundle)? in
                            guard case .success(let bundle) = found?.result else { return nil }
                            return (root.rootPath + "/" + name, bundle)
                        }
                    })
            }
        }
        return snapshot
    }

    /// Forgets the cached bundles of `roots` (canonical) that a scan did not find again; true
    /// when one of them was usable (the store is out of date).
    private func forgetGone(
        from scanned: [(rootPath: String, found: [(name: String, found: CachedBundle?)])], foundCount: Int, roots: Set<String>
    ) -> Bool {
        // Every bundle found is in the cache (inspecting it put it there): as many entries as
        // found means there is nothing else, and a rescan of unchanged roots skips the walk over
        // every entry (a visible share of a rescan of many bundles).
        guard cache.withLock({ $0.count }) != foundCount else { return false }
        var livePaths = Set<String>(minimumCapacity: foundCount)
        for root in scanned {
            for (name, found) in root.found where found != nil { livePaths.insert(root.rootPath + "/" + name) }
        }
        return cache.withLock { cache in
            var forgotUsable = false
            for (path, cached) in cache where !livePaths.contains(path) && roots.contains(Self.parent(of: path)) {
                if case .success = cached.result { forgotUsable = true }
                cache[path] = nil
            }
            return forgotUsable
        }
    }

    /// Every directory directly inside `root` that is not hidden: a bundle, or one being copied in
    /// whose manifest is not there yet.
    static func candidateDirectories(in root: String) -> [String] {
        DirectoryListing.subdirectoryNames(of: root).map { root + "/" + $0 }
    }

    /// Every directory in `root` (canonical) with its bundle, nil for one without a manifest, in
    /// name order. A large root is split over the processors: checking a bundle is mostly
    /// waiting on `stat` and file reads, which run in parallel well. The results are the cache's
    /// objects, not copies of them: a copy of a result retained every field of it (`perf`).
    private func inspectAll(
        _ names: [String], inRoot root: String, descriptor rootDescriptor: CInt, scanNumber: Int
    ) -> [(name: String, found: CachedBundle?)] {
        let processors = ProcessInfo.processInfo.activeProcessorCount
        // The cache as it was when the scan began, read without the lock: the scan's threads
        // would otherwise contend for it once per bundle (`perf` showed the lock's slow path).
        // A bundle the scan itself inspects is added under the lock and read by the next scan.
        let known = cache.withLock { $0 }
        guard names.count >= Self.parallelScanThreshold, processors > 1 else {
            return names.map { ($0, inspect($0, inRoot: root, descriptor: rootDescriptor, known: known, scanNumber: scanNumber)) }
        }
        // Several chunks per processor, so that one slow chunk does not leave the others idle.
        let chunkCount = processors * 4
        let chunkSize = (names.count + chunkCount - 1) / chunkCount
        let chunks = Locked<[Int: [CachedBundle?]]>([:])
        DispatchQueue.concurrentPerform(iterations: chunkCount) { chunk in
            let range = min(chunk * chunkSize, names.count)..<min((chunk + 1) * chunkSize, names.count)
            let results = names[range].map {
                inspect($0, inRoot: root, descriptor: rootDescriptor, known: known, scanNumber: scanNumber)
            }
            chunks.withLock { $0[chunk] = results }
        }
        let results = chunks.withLock { chunks in (0..<chunkCount).flatMap { chunks[$0] ?? [] } }
        return Array(zip(names, results))
    }

    /// Below this many directories in a root, a scan stays on the calling thread.
    private static let parallelScanThreshold = 256

    /// The bundle `name` in `root` (canonical; open as `rootDescriptor` unless that is negative),
    /// from the cache when the identities of its directory, manifest and library are unchanged.
    /// Nil when the directory has no manifest.
    func inspect(_ name: String, inRoot root: String, descriptor rootDescriptor: CInt) -> Result<InspectedBundle, BundleProblem>? {
        inspect(name, inRoot: root, descriptor: rootDescriptor, known: nil, scanNumber: nil)?.result
    }

    /// `inspect(_:inRoot:descriptor:)` with the cache as scan `scanNumber` took it (`known`; nil:
    /// read it now).
    private func inspect(
        _ name: String, inRoot root: String, descriptor rootDescriptor: CInt, known: [String: CachedBundle]?, scanNumber: Int?
    ) -> CachedBundle? {
        let bundlePath = root + "/" + name
        let directory = rootDescriptor >= 0 ? rootDescriptor : AT_FDCWD
        let relativePath = rootDescriptor >= 0 ? name : bundlePath
        func libraryIdentity(_ library: String) -> FileIdentity? {
            let relativeLibrary = library.hasPrefix(root + "/") && rootDescriptor >= 0 ? String(library.dropFirst(root.count + 1)) : library
            return FileStatus(path: relativeLibrary, relativeTo: directory)?.identity
        }
        func currentKeys(library: String?) -> BundleKeys {
            BundleKeys(
                directory: FileStatus(path: relativePath, relativeTo: directory)?.identity,
                manifest: FileStatus(path: relativePath + "/" + Manifest.fileName, relativeTo: directory)?.identity,
                library: library.flatMap(libraryIdentity)
            )
        }
        // A usable bundle holds while every entry of it (and a system library it names) is
        // unchanged; a rejected one while its directory, manifest and library are.
        if let cached = known.map({ $0[bundlePath] }) ?? cache.withLock({ $0[bundlePath] }) {
            if let scanNumber, cached.unchangedInScan == scanNumber { return cached }
            let unchanged: Bool
            switch cached.result {
            case .success(let bundle):
                unchanged = Self.isUnchanged(bundle, foundAt: bundlePath, name: relativePath, in: directory)
            case .failure(let problem):
                unchanged = cached.keys == currentKeys(library: problem.libraryPath)
            }
            if unchanged { return cached }
        }
        let result = BundleInspector.inspect(bundleNamed: name, inCanonicalRoot: root, descriptor: rootDescriptor, resolver: resolver)
        let keys: BundleKeys
        switch result {
        case .success(let bundle):
            storeState.withLock { $0.stale = true }
            keys = BundleKeys(bundle)
        case .failure(let problem):
            if problem.hasNoManifest { return nil }
            // The inspection took the directory's and the manifest's identities before it read
            // them, so that a change while they were read shows next time; the library is known
            // only now.
            keys = BundleKeys(
                directory: problem.directoryIdentity, manifest: problem.manifestIdentity,
                library: problem.libraryPath.flatMap { libraryIdentity($0) })
        }
        inspections.add(1, ordering: .relaxed)
        let inspected = CachedBundle(keys: keys, result: result)
        cache.withLock { $0[bundlePath] = inspected }
        return inspected
    }

    /// Whether every entry of `bundle`, found at `foundAt` and examined as `name` relative to
    /// `directory`, and a system library it names, are as it was inspected with. A bundle found
    /// through a symlink in its root is examined through the link: the link's target must still
    /// be the directory it was read from.
    private static func isUnchanged(_ bundle: InspectedBundle, foundAt: String, name: String, in directory: CInt) -> Bool {
        bundle.contents.isUnchanged(name: name, in: directory, followingLink: foundAt != bundle.bundlePath)
            && (!bundle.usesSystemLibrary || FileStatus(path: bundle.libraryPath)?.identity == bundle.libraryStatus.identity)
    }

    /// The names in each root (`rootPaths`, canonical; open as `directories`), and, in the first
    /// scan of a process with `store`, the store read into the cache meanwhile: its chunks are
    /// decoded on every processor, each bundle examined on disk as soon as its chunk is decoded
    /// (`scanNumber` then need not examine it again), and the roots listed alongside. A new
    /// process waits for the processors' shares of the work, not for each step in turn.
    private func listAndLoad(
        _ rootPaths: [String], directories: [FileDescriptor?], store: CatalogStore?, scanNumber: Int
    ) -> [[String]] {
        @Sendable func list() -> [[String]] { rootPaths.map { DirectoryListing.subdirectoryNames(of: $0) } }
        guard let store, storeState.withLock({ $0.loaded.insert(store.path).inserted }), let opened = store.open() else {
            return list()
        }
        defer { opened.close() }
        let openRoots = zip(rootPaths, directories).compactMap { path, directory in directory.map { (path, $0.rawValue) } }
        /// The open root directly holding the bundle found at `path`, and its name there.
        @Sendable func location(of path: String) -> (root: CInt, name: String)? {
            guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")),
                let root = openRoots.first(where: { $0.0 == path[..<slash] })
            else { return nil }
            return (root.1, String(path[path.utf8.index(after: slash)...]))
        }
        let listings = Locked<[[String]]>([])
        let chunks = Locked<[Int: [(path: String, cached: CachedBundle)]]>([:])
        let damaged = Locked(false)
        DispatchQueue.concurrentPerform(iterations: opened.chunks.count + 1) { part in
            guard part > 0 else {
                let listed = list()
                listings.withLock { $0 = listed }
                return
            }
            guard let stored = opened.bundles(inChunk: part - 1) else {
                damaged.withLock { $0 = true }
                return
            }
            let cached = stored.map { foundAt, bundle in
                let unchanged =
                    location(of: foundAt).map { Self.isUnchanged(bundle, foundAt: foundAt, name: $0.name, in: $0.root) } ?? false
                return (
                    foundAt,
                    CachedBundle(keys: BundleKeys(bundle), result: .success(bundle), unchangedInScan: unchanged ? scanNumber : nil)
                )
            }
            chunks.withLock { $0[part - 1] = cached }
        }
        // A damaged chunk spoils the whole store: nothing of it is used, and the scan's save
        // replaces it.
        if damaged.withLock({ $0 }) {
            storeState.withLock { $0.stale = true }
        } else {
            let loaded = chunks.withLock { $0 }
            cache.withLock { cache in
                cache.reserveCapacity(cache.count + loaded.values.reduce(0) { $0 + $1.count })
                for index in 0..<opened.chunks.count {
                    for (path, cached) in loaded[index] ?? [] where cache[path] == nil { cache[path] = cached }
                }
            }
        }
        return listings.withLock { $0 }
    }

    /// The value `key` has in `dictionary`, after storing `value` for it when it had none.
    private static func insertOrFind(_ key: String, _ value: Int, in dictionary: inout [String: Int]) -> Int {
        func stored(_ slot: inout Int) -> Int { slot }
        return stored(&dictionary[key, default: value])
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[..<slash])
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
        case .invalidContents: kind = .invalidContents
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
        guard let slash = bundlePath.lastIndex(of: "/"), slash != bundlePath.startIndex else { return nil }
        let parent = String(bundlePath[..<slash])
        let name = String(bundlePath[bundlePath.index(after: slash)...])
        guard !name.isEmpty, let root = roots.first(where: { (canonicalPath($0.path) ?? $0.path) == parent }) else { return nil }
        return inspect(name, inRoot: parent, descriptor: -1)?.map { CatalogEntry(bundle: $0, root: root) }
    }
}
