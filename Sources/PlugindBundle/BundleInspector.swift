import FoundationEssentials
import Glibc
package import PlugindSystem
import PlugindTypes

/// A bundle directory that passed the checks plugind can make without loading anything:
/// manifest schema, library location, ownership and permissions, ELF class and machine.
///
/// Immutable, and a class: catalogs hand the same bundle to every scan, inventory and launch,
/// and copying a reference is one retain where copying its dozen strings was a dozen.
package final class InspectedBundle: Sendable, Hashable {
    package let manifest: Manifest
    package let warnings: [String]
    /// Canonical path of the bundle directory.
    package let bundlePath: String
    package let manifestPath: String
    /// Canonical path of the library (inside the bundle, or a system library for a soname).
    package let libraryPath: String
    package let libraryStatus: FileStatus
    package let manifestStatus: FileStatus
    package let bundleStatus: FileStatus
    /// True when `library` named a system library by soname.
    package let usesSystemLibrary: Bool
    /// Every entry of the bundle, checked against the bundle rules.
    package let contents: BundleContents

    package init(
        manifest: Manifest,
        warnings: [String],
        bundlePath: String,
        manifestPath: String,
        libraryPath: String,
        libraryStatus: FileStatus,
        manifestStatus: FileStatus,
        bundleStatus: FileStatus,
        usesSystemLibrary: Bool,
        contents: BundleContents
    ) {
        self.manifest = manifest
        self.warnings = warnings
        self.bundlePath = bundlePath
        self.manifestPath = manifestPath
        self.libraryPath = libraryPath
        self.libraryStatus = libraryStatus
        self.manifestStatus = manifestStatus
        self.bundleStatus = bundleStatus
        self.usesSystemLibrary = usesSystemLibrary
        self.contents = contents
    }

    /// The library's path relative to the bundle, or nil for a system library.
    package var libraryRelativePath: String? {
        usesSystemLibrary ? nil : String(libraryPath.dropFirst(bundlePath.count + 1))
    }

    package static func == (left: InspectedBundle, right: InspectedBundle) -> Bool {
        left.bundlePath == right.bundlePath && left.manifest == right.manifest
            && left.libraryStatus == right.libraryStatus && left.contents == right.contents
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(bundlePath)
        hasher.combine(libraryStatus)
    }
}

/// Why a bundle directory was rejected.
package struct BundleProblem: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Kind: String, Sendable, Hashable {
        case invalidManifest, libraryMissing, libraryOutsideBundle, notALibrary, wrongArchitecture,
            insecurePermissions, invalidContents
    }

    package var kind: Kind
    package var message: String
    /// What could be read of the manifest before the problem, for naming the plugin.
    package var identifier: String?
    package var extensionPoint: String?
    /// The library file the problem concerns, when there is one (caches watch it for changes).
    package var libraryPath: String?
    /// The identities of the bundle directory and of its manifest, as far as the inspection took
    /// them before reading anything: what a cache keys a rejected bundle on.
    package var directoryIdentity: FileIdentity?
    package var manifestIdentity: FileIdentity?
    /// The directory could not be opened, or holds no manifest: no bundle (or one still being
    /// copied in), which a scan passes over.
    package var hasNoManifest = false

    package var description: String { message }
}

/// Checks one bundle directory. Used by the catalog on every new or changed bundle, and by
/// `plugind verify` as its first stage.
package enum BundleInspector {
    package static func inspect(
        bundleAt path: String,
        resolver: @autoclosure () -> LibraryResolver = LibraryResolver()
    ) -> Result<InspectedBundle, BundleProblem> {
        inspect(bundleAt: path, opened: BundleDirectory.open(path), resolver: resolver())
    }

    /// Checks the bundle `name` inside `root`, a canonical directory open as `rootDescriptor`
    /// (unless that is negative).
    package static func inspect(
        bundleNamed name: String,
        inCanonicalRoot root: String,
        descriptor rootDescriptor: CInt = -1,
        resolver: @autoclosure () -> LibraryResolver = LibraryResolver()
    ) -> Result<InspectedBundle, BundleProblem> {
        inspect(
            bundleAt: root + "/" + name, opened: BundleDirectory.open(name, inCanonicalDirectory: root, descriptor: rootDescriptor),
            resolver: resolver())
    }

    /// Every file of the bundle is examined relative to the directory opened once here: what is
    /// checked is what was opened, even if the path is renamed meanwhile, and each file costs
    /// a shorter path walk (a first scan of many bundles is mostly system calls).
    private static func inspect(
        bundleAt path: String,
        opened: Result<BundleDirectory, Errno>,
        resolver: @autoclosure () -> LibraryResolver
    ) -> Result<InspectedBundle, BundleProblem> {
        let manifestPath = path + "/" + Manifest.fileName
        let bundle: BundleDirectory
        switch opened {
        case .success(let directory): bundle = directory
        case .failure(let error):
            var problem = BundleProblem(kind: .invalidManifest, message: "\(path) cannot be opened as a bundle directory: \(error)")
            problem.hasNoManifest = true
            return .failure(problem)
        }
        defer { close(bundle.descriptor) }
        let bundlePath = bundle.path
        let parsed: ManifestParser.Result
        let manifestStatus: FileStatus
        switch readManifest(of: bundle, path: manifestPath) {
        case .success(let read): (parsed, manifestStatus) = read
        case .failure(let problem): return .failure(problem)
        }
        let manifest = parsed.manifest
        var checkedLibrary: String?
        func problem(_ kind: BundleProblem.Kind, _ message: String) -> Result<InspectedBundle, BundleProblem> {
            var problem = BundleProblem(
                kind: kind,
                message: message,
                identifier: manifest.identifier,
                extensionPoint: manifest.extensionPoint,
                libraryPath: checkedLibrary
            )
            problem.directoryIdentity = bundle.status.identity
            problem.manifestIdentity = manifestStatus.identity
            return .failure(problem)
        }

        // Taken once for every file of the bundle.
        let user = effectiveUserID
        for (what, status) in [("bundle directory \(bundlePath)", bundle.status), ("manifest \(manifestPath)", manifestStatus)] {
            if let reason = status.writableByOthersProblem(user: user) {
                return problem(.insecurePermissions, "\(what) \(reason); run 'chmod go-w' on it")
            }
        }

        let libraryPath: String
        // The library's status when it was found as a plain entry of the bundle (not a symlink).
        var foundLibraryStatus: FileStatus?
        var usesSystemLibrary = false
        let candidate = bundlePath + "/" + manifest.library
        checkedLibrary = candidate
        if let adapter = manifest.adapter {
            // The unchanged library its package installed, outside the bundle: trusted as a
            // system library is, root owning every directory on the way and the file.
            switch TrustedLibraryPath.resolve(manifest.library, rule: .systemPlugin) {
            case .success(let resolution): libraryPath = resolution.canonicalPath
            case .failure(let refusal):
                return problem(.insecurePermissions, "\(adapter.abi.name) library '\(manifest.library)' is refused: \(refusal)")
            }
            usesSystemLibrary = true
        } else if let resolved = bundle.canonicalEntry(manifest.library) {
            guard resolved.path.hasPrefix(bundlePath + "/") else {
                return problem(
                    .libraryOutsideBundle, "library '\(manifest.library)' resolves to \(resolved.path), outside the bundle \(bundlePath)")
            }
            libraryPath = resolved.path
            foundLibraryStatus = resolved.status
        } else if manifest.librarySonameCandidate && !manifest.functions.isEmpty,
            let systemLibrary = resolver().candidate(for: manifest.library)
        {
            // Sonames are symlinks to versioned files (libz.so.1 -> libz.so.1.2.13), in
            // directories reached through symlinks (/lib -> usr/lib): followed as far as root
            // alone could have made them, ending in the system library directories.
            switch TrustedLibraryPath.resolve(systemLibrary, rule: .systemLibrary) {
            case .success(let resolution): libraryPath = resolution.canonicalPath
            case .failure(let refusal):
                return problem(.insecurePermissions, "system library '\(manifest.library)' is refused: \(refusal)")
            }
            usesSystemLibrary = true
        } else {
            let hint =
                manifest.librarySonameCandidate && manifest.functions.isEmpty
                ? " (a system library named by soname is only allowed for function-only bundles)" : ""
            return problem(.libraryMissing, "library '\(manifest.library)' not found in \(bundlePath)\(hint)")
        }
        checkedLibrary = libraryPath
        guard let libraryStatus = foundLibraryStatus ?? FileStatus(path: libraryPath), libraryStatus.isRegularFile else {
            return problem(.libraryMissing, "library \(libraryPath) is not a regular file")
        }
        if let reason = libraryStatus.writableByOthersProblem(user: user) {
            return problem(.insecurePermissions, "library \(libraryPath) \(reason); run 'chmod go-w' on it")
        }
        let libraryEntry = usesSystemLibrary ? nil : String(libraryPath.dropFirst(bundlePath.count + 1))
        let contents: BundleContents
        let libraryHeader: [UInt8]?
        do {
            (contents, libraryHeader) = try BundleContents.read(
                directory: bundle.descriptor, status: bundle.status, bundlePath: bundlePath, user: user,
                textFile: BundleContents.FileReadAsText(path: Manifest.fileName, status: manifestStatus), keepingHeaderOf: libraryEntry)
        } catch {
            let kind: BundleProblem.Kind =
                error.reason.contains("writable") || error.reason.contains("owned by") ? .insecurePermissions : .invalidContents
            return problem(kind, "\(error); \(error.fix)")
        }
        if let libraryEntry, contents.entry(libraryEntry)?.isLoadable != true {
            return problem(.notALibrary, "library \(libraryPath) is not an ELF file of the bundle")
        }
        do {
            // A bundle's library was read by the contents' walk; a system library is read here.
            if let libraryHeader {
                _ = try ELFFile.checkHeader(bytes: libraryHeader)
            } else {
                _ = try ELFFile.checkHeader(atPath: libraryPath)
            }
        } catch {
            switch error {
            case .wrongClass, .wrongByteOrder, .wrongMachine:
                return problem(.wrongArchitecture, "library \(libraryPath) \(error)")
            default:
                return problem(.notALibrary, "library \(libraryPath) \(error)")
            }
        }
        return .success(
            InspectedBundle(
                manifest: manifest,
                warnings: parsed.warnings.map(\.description),
                bundlePath: bundlePath,
                manifestPath: manifestPath,
                libraryPath: libraryPath,
                libraryStatus: libraryStatus,
                manifestStatus: manifestStatus,
                bundleStatus: bundle.status,
                usesSystemLibrary: usesSystemLibrary,
                contents: contents
            )
        )
    }

    /// The bundle's manifest, parsed, with its status taken on its descriptor before it was read
    /// (a change while it is read gives it a new identity).
    private static func readManifest(of bundle: BundleDirectory, path manifestPath: String) -> Result<
        (parsed: ManifestParser.Result, status: FileStatus), BundleProblem
    > {
        var problem = BundleProblem(kind: .invalidManifest, message: "")
        problem.directoryIdentity = bundle.status.identity
        let descriptor = openat(bundle.descriptor, Manifest.fileName, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            let error = errno
            problem.message = "\(manifestPath): cannot be read: \(String(cString: strerror(error)))"
            problem.hasNoManifest = error == ENOENT
            return .failure(problem)
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            problem.message = "\(manifestPath): cannot be examined: \(Errno.current)"
            return .failure(problem)
        }
        problem.manifestIdentity = FileIdentity(status)
        do {
            return .success((try ManifestParser.parse(descriptor: descriptor, status: status, path: manifestPath), FileStatus(status)))
        } catch {
            problem.message = error.description
            return .failure(problem)
        }
    }
}
