import FoundationEssentials
import Glibc
package import PlugindBundle
package import PlugindSystem
package import PlugindWire

/// A file a launch hands the worker as a sealed copy: the host reads it (beneath its bundle,
/// without following symlinks), hashes it, seals the copy, and refuses the launch when the hash
/// is not the one expected.
package struct SealedSource: Sendable, Hashable {
    /// The bundle directory the file is read beneath, or nil for a system library (`path` is
    /// then absolute).
    package var bundlePath: String?
    /// Relative to `bundlePath`, or absolute.
    package var path: String
    /// The file's identity when the catalog saw it: a hint for reusing a copy of a plugin that
    /// needs no approval, never a proof.
    package var identity: FileIdentity
    /// The SHA-256 the owner approved, when there is an approval.
    package var expectedDigest: String?
    /// How a file outside every bundle is walked to: a system library, or a foreign plugin's
    /// library wherever its package put it.
    package var outsideRule: TrustedLibraryPath.Rule = .systemLibrary

    /// The path as the host sees it, for messages.
    package var displayPath: String {
        bundlePath.map { $0 + "/" + path } ?? path
    }
}

/// Everything needed to start one worker for one plugin, derived from its catalog entry, its
/// approval, the host's caps and the extension point: what the worker loads, the view it gets,
/// the files it gets as sealed copies and the limits it runs under.
package struct LaunchPlan: Sendable {
    package let pluginIdentifier: String
    /// Whether this plan holds for as long as the files it was made from are unchanged (see
    /// `DependencyDirectories.directories(of:)`).
    let isSettled: Bool
    /// Why a library the plugin needs outside its bundle is not loaded (reached through
    /// something another user could change), naming it: the launch is refused before any
    /// process starts.
    package let dependencyRefusal: String?
    /// Why a library the plugin needs could not be checked at all: the host ran out of
    /// descriptors or memory (the host's limit, not the plugin's doing).
    let dependencyHostFailure: String?
    package var load: LoadConfiguration
    /// In the order of the worker's descriptors, from `firstSealedDescriptor` on.
    package var sealedFiles: [SealedSource]
    package let requestTimeout: Duration
    /// The host application, named to the plugin when it opens a connection.
    package let hostIdentifier: String
    /// How many of the plugin's asks may wait on one connection.
    package let asksPerConnection: Int
    let launchTimeout: Duration
    package let shutdownGracePeriod: Duration
    let cancellationGracePeriod: Duration
    let workerExecutable: URL?
    let launchStrategy: AppExtensionHost.LaunchStrategy
    let primesWorkers: Bool
    /// A delegated cgroup v2 directory for workers that may start processes.
    let cgroupDirectory: String?
    /// Who the worker's log entries and statistics page name, and where they go.
    let activity: WorkerActivity.Subject
    /// The machine's policy on missing layers, when it applies to this launch (a host that
    /// requires every layer, a process not requiring enhanced security): the layers it accepts
    /// went into `load.confinement`, and a refusal for another says how to accept it.
    let missingLayerPolicy: MissingLayerAcceptance?
    /// Told the worker's pid and executable as soon as it runs, before it answers the handshake
    /// (`plugind debug` attaches the debugger then).
    package var workerStarted: (@Sendable (_ pid: Int32, _ executable: String) -> Void)?

    /// The worker's descriptor of the first sealed file: after standard input, output and error,
    /// the two protocol pipes and the shared memory.
    package static let firstSealedDescriptor: Int32 = 6
    /// Where a bundle's data files appear to the worker (its libraries are sealed copies).
    package static let bundleDataPath = "/.plugind/bundle"
    /// Where a system library named by soname appears to the worker.
    package static let systemLibraryDirectory = "/.plugind/system"
    /// The files a worker with network access needs to resolve names and check certificates.
    static let networkFiles = [
        "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
        "/etc/ssl/certs", "/usr/share/ca-certificates", "/etc/ca-certificates",
    ]

    /// - Parameters:
    ///   - approval: the owner's approval the launch is checked against: its file digests are
    ///     the bytes the worker may load, its grants the paths it gets. Nil for a plugin bundled
    ///     with the host and for probes, which resolve grants now.
    ///   - permissions: what the worker is granted instead of what the approval (or manifest)
    ///     says: none at all for `plugind verify --load`.
    ///   - missingLayerPolicy: the machine's policy on missing layers as read for this launch;
    ///     nil: read now.
    package init(
        entry: CatalogEntry, host: AppExtensionHost, approval: Approval? = nil, requiresEnhancedSecurity: Bool = false,
        permissions overridden: Manifest.Permissions? = nil, missingLayerPolicy: MissingLayerAcceptance? = nil
    ) {
        let manifest = entry.manifest
        let bundle = entry.bundle
        let caps = host.limits
        func capped(_ requested: UInt64?, _ cap: UInt64) -> UInt64 {
            min(requested ?? cap, cap)
        }
        let limits = ResourceLimits(
            addressSpaceBytes: capped(manifest.limits.memoryBytes, caps.memoryBytes),
            cpuSeconds: capped(manifest.limits.cpuSeconds, caps.cpuSeconds),
            openFiles: capped(manifest.limits.openFiles, caps.openFiles),
            tasks: capped(manifest.limits.threads, caps.threads),
            maxMessageBytes: capped(manifest.limits.maxMessageBytes, caps.maxMessageBytes),
            fileBytes: caps.fileBytes
        )
        var requestTimeout = caps.requestTimeout
        if let milliseconds = manifest.limits.requestTimeoutMilliseconds {
            requestTimeout = min(.milliseconds(Int64(clamping: milliseconds)), caps.requestTimeout)
        }
        let permissions = overridden ?? approval?.permissions ?? manifest.permissions
        let grants = Self.resolvedGrants(permissions, approval: approval)
        let strict = host.confinement == .required || requiresEnhancedSecurity
        let policy =
            Self.appliesMissingLayerPolicy(host: host, requiresEnhancedSecurity: requiresEnhancedSecurity)
            ? (missingLayerPolicy ?? MissingLayerAcceptance.read(for: host)) : nil
        let confinement = ConfinementRequest(
            allowsNetwork: permissions.network,
            allowsProcesses: permissions.processes,
            allowsSymlinks: permissions.symlinks,
            readablePaths: grants.read,
            writablePaths: grants.write,
            requiresEveryLayer: strict,
            disabled: host.confinement == .disabled && !requiresEnhancedSecurity,
            skippedLayers: host.skippedConfinementLayers,
            acceptedMissingLayers: policy?.layers ?? []
        )

        var view = WorkerViewPlan(bundle: bundle, approval: approval)
        let dependencies = DependencyDirectories.shared.directories(of: bundle)
        view.addDependencyDirectories(dependencies.directories)
        for path in grants.read { view.operations.append(.bind(source: path, path: path, writable: false)) }
        for path in grants.write { view.operations.append(.bind(source: path, path: path, writable: true)) }
        if permissions.network {
            for path in Self.networkFiles { view.operations += ViewOperation.systemPath(path) }
        }
        let scratch = manifest.limits.scratchBytes.map { min($0, caps.scratchBytes) } ?? 0
        // First, so that what the view puts under /tmp (a bundle's mirror, a grant) is made
        // inside the scratch space instead of being hidden by it.
        if scratch > 0 { view.operations.insert(.scratch(path: "/tmp", bytes: scratch), at: 0) }

        self.pluginIdentifier = manifest.identifier
        self.dependencyRefusal = dependencies.refusal
        self.dependencyHostFailure = dependencies.hostFailure
        self.isSettled = dependencies.settled
        self.sealedFiles = view.sealedFiles
        self.load = LoadConfiguration(
            pluginIdentifier: manifest.identifier,
            libraryPath: view.libraryPath,
            libraryDescriptor: view.libraryDescriptor,
            bundlePath: bundle.bundlePath,
            view: view.operations,
            functions: manifest.functions,
            requiresEntryPoint: manifest.functions.isEmpty,
            limits: limits,
            confinement: confinement
        )
        self.load.concurrency = UInt32(manifest.concurrency ?? 0)
        self.load.preloadLibraries = dependencies.libraries
        if let adapter = manifest.adapter {
            self.load.adapter = ForeignPluginAdapter(
                abi: adapter.abi, plugin: adapter.plugin, dataBytes: adapter.abi.dataBytes(buffers: adapter.buffers))
        }
        let (seconds, attoseconds) = requestTimeout.components
        self.load.askTimeoutMilliseconds = UInt32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        self.requestTimeout = requestTimeout
        self.hostIdentifier = host.identifier
        self.activity = WorkerActivity.Subject(
            plugin: manifest.identifier, pluginVersion: manifest.version, bundleDigest: approval?.bundleDigest,
            hostIdentifier: host.identifier, memoryLimit: limits.addressSpaceBytes, log: PluginLogWriter.forHost(host),
            statisticsDirectory: host.runtimeDirectory.appendingPathComponent("workers").path,
            activity: PluginActivityStore(host: host))
        self.asksPerConnection = host.asksPerConnection
        self.launchTimeout = host.launchTimeout
        self.shutdownGracePeriod = host.shutdownGracePeriod
        self.cancellationGracePeriod = host.cancellationGracePeriod
        self.workerExecutable = host.workerExecutable
        self.launchStrategy = host.launchStrategy
        self.primesWorkers = host.primesWorkers
        self.cgroupDirectory = host.workerCgroupDirectory?.path
        self.missingLayerPolicy = policy
    }

    /// Whether the machine's policy on missing layers decides for a launch: only where a missing
    /// layer would refuse it otherwise, and not where the extension point requires enhanced
    /// security (every layer, whatever the host or the machine says).
    static func appliesMissingLayerPolicy(host: AppExtensionHost, requiresEnhancedSecurity: Bool) -> Bool {
        host.confinement == .required && !requiresEnhancedSecurity
    }

    /// The grants as the approval resolved them; without one (a bundled plugin, a probe), as
    /// they resolve now.
    static func resolvedGrants(_ permissions: Manifest.Permissions, approval: Approval?) -> (read: [String], write: [String]) {
        func resolve(_ path: String) -> String {
            approval?.resolvedGrants[path] ?? GrantResolution.resolve(path)
        }
        return (permissions.read.map(resolve), permissions.write.map(resolve))
    }
}

/// The worker's view of one plugin's bundle: a mirror of the bundle at its own path, where each
/// library is a symlink to its sealed copy and each data file a symlink into a read-only bind of
/// the bundle; the library to dlopen; the files to seal.
struct WorkerViewPlan {
    var operations: [ViewOperation] = []
    var sealedFiles: [SealedSource] = []
    var libraryPath: String
    var libraryDescriptor: Int32 = -1

    init(bundle: InspectedBundle, approval: Approval?) {
        let root = bundle.bundlePath
        libraryPath = bundle.libraryPath
        if bundle.contents.regularFiles.contains(where: { !$0.isLoadable }) {
            operations.append(.bind(source: root, path: LaunchPlan.bundleDataPath, writable: false))
        }
        operations.append(.directory(path: root))
        for entry in bundle.contents.entries {
            let path = root + "/" + entry.path
            switch entry.kind {
            case .directory:
                operations.append(.directory(path: path))
            case .file(isLoadable: true):
                let descriptor = seal(
                    SealedSource(
                        bundlePath: root, path: entry.path, identity: entry.status.identity, expectedDigest: approval?.files[entry.path]))
                operations.append(.sealed(path: path, descriptor: descriptor))
                if path == bundle.libraryPath { libraryDescriptor = descriptor }
            case .file(isLoadable: false):
                operations.append(.symlink(path: path, target: LaunchPlan.bundleDataPath + "/" + entry.path))
            case .symlink(let target):
                operations.append(.symlink(path: path, target: target))
            }
        }
        if bundle.usesSystemLibrary {
            let name = bundle.libraryPath.lastPathComponent
            // No digest: the approval pins the soname and who may change the file (root alone),
            // so a security update of the library keeps the plugin usable. The sealed copy is
            // opened through the same trusted walk that found it.
            var source = SealedSource(
                bundlePath: nil, path: bundle.libraryPath, identity: bundle.libraryStatus.identity, expectedDigest: nil)
            if bundle.manifest.adapter != nil { source.outsideRule = .systemPlugin }
            let descriptor = seal(source)
            libraryPath = LaunchPlan.systemLibraryDirectory + "/" + name
            libraryDescriptor = descriptor
            operations.append(.sealed(path: libraryPath, descriptor: descriptor))
        }
    }

    private mutating func seal(_ source: SealedSource) -> Int32 {
        sealedFiles.append(source)
        return LaunchPlan.firstSealedDescriptor + Int32(sealedFiles.count - 1)
    }

    /// Binds the directories of the plugin's dependencies outside its bundle.
    mutating func addDependencyDirectories(_ directories: [String]) {
        for directory in directories {
            operations.append(.bind(source: directory, path: directory, writable: false))
        }
    }
}

/// A path as it resolves now, symlinks followed: the deepest existing ancestor made canonical,
/// the rest appended (a grant may name a directory the plugin creates).
enum GrantResolution {
    static func resolve(_ path: String) -> String {
        var existing = path
        var rest: [String] = []
        while existing != "/" {
            if let resolved = realpath(existing, nil) {
                defer { free(resolved) }
                return ([String(cString: resolved)] + rest.reversed()).joined(separator: "/").replacing("//", with: "/")
            }
            rest.append(existing.lastPathComponent)
            existing = existing.deletingLastPathComponent
        }
        return path
    }
}
