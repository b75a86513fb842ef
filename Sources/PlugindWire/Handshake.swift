import Glibc
package import PlugindSystem

/// What the host asks the worker to load, and how to confine it. Sent in `Hello`.
package struct LoadConfiguration: Equatable, Sendable {
    /// The plugin's identifier, for messages.
    package var pluginIdentifier: String
    /// The path to dlopen inside the worker's view: a symlink to the sealed copy of the library,
    /// which the worker's view maps to `libraryDescriptor`.
    package var libraryPath: String
    /// The descriptor holding the sealed copy of the library (the worker dlopens it through
    /// /proc/self/fd when it has no view), or -1 when the library is not sealed (tests only).
    package var libraryDescriptor: Int32
    /// The bundle directory as the host sees it, or empty for none.
    package var bundlePath: String
    /// How the worker builds its view beyond what every worker gets: the bundle, the plugin's
    /// dependency directories, the owner's grants, scratch space. In order.
    package var view: [ViewOperation]
    /// Functions the manifest declares, in the order calls refer to them.
    package var functions: [FunctionSignature]
    /// Whether the library must export `plugind_plugin_entry` (false for function-only bundles).
    package var requiresEntryPoint: Bool
    package var limits: ResourceLimits
    package var confinement: ConfinementRequest
    /// What the worker does with the library.
    package var mode: LoadMode = .serve
    /// How many requests the manifest says the plugin handles at once; 0 when it does not say
    /// (the plugin's descriptor decides, else 1).
    package var concurrency: UInt32 = 0
    /// How long the plugin's asks wait for the host when they name no deadline: the host's
    /// request timeout.
    package var askTimeoutMilliseconds: UInt32 = 30_000
    /// The libraries outside the bundle that the plugin's libraries need (canonical paths the
    /// host resolved and checked, inside the view): a primed worker loads them while it waits,
    /// so that the launch that says go loads only the plugin. A Swift plugin's runtime is most
    /// of its load: the installed worker links its own runtime statically, not the plugin's.
    package var preloadLibraries: [String] = []
    /// Set when the library is a plugin of a foreign ABI that the worker drives through its
    /// adapter (and exports no `plugind_plugin_entry`).
    package var adapter: ForeignPluginAdapter?

    package init(
        pluginIdentifier: String,
        libraryPath: String,
        libraryDescriptor: Int32 = -1,
        bundlePath: String = "",
        view: [ViewOperation] = [],
        functions: [FunctionSignature] = [],
        requiresEntryPoint: Bool = true,
        limits: ResourceLimits = ResourceLimits(),
        confinement: ConfinementRequest = ConfinementRequest()
    ) {
        self.pluginIdentifier = pluginIdentifier
        self.libraryPath = libraryPath
        self.libraryDescriptor = libraryDescriptor
        self.bundlePath = bundlePath
        self.view = view
        self.functions = functions
        self.requiresEntryPoint = requiresEntryPoint
        self.limits = limits
        self.confinement = confinement
    }
}

/// One step of building a worker's filesystem view. Paths are absolute; a `source` is a path
/// as the host sees it, resolved without symlinks (a component that became one since fails the
/// step), a `path` is where it appears to the plugin.
package enum ViewOperation: Equatable, Sendable {
    /// A bind mount of `source` on `path`: read-only unless `writable`; never setuid or devices.
    case bind(source: String, path: String, writable: Bool)
    /// A symlink at `path` whose contents are `target`.
    case symlink(path: String, target: String)
    /// A directory.
    case directory(path: String)
    /// A file the host hashed and sealed, held by the worker as `descriptor`: a symlink at `path`
    /// to /proc/self/fd/`descriptor`, so that loading it maps exactly the sealed bytes.
    case sealed(path: String, descriptor: Int32)
    /// A private tmpfs of at most `bytes`, writable by the plugin.
    case scratch(path: String, bytes: UInt64)

    /// Why the view contains this step, for reports: the path it makes.
    package var path: String {
        switch self {
        case .bind(_, let path, _), .symlink(let path, _), .directory(let path), .sealed(let path, _), .scratch(let path, _): path
        }
    }
}

extension ViewOperation {
    /// A system file or directory at its canonical location, with a symlink from `path` when that
    /// differs (/etc/localtime → /usr/share/zoneinfo/…). Nothing when it does not exist.
    package static func systemPath(_ path: String) -> [ViewOperation] {
        guard let resolved = realpath(path, nil) else { return [] }
        defer { free(resolved) }
        let canonical = String(cString: resolved)
        var operations: [ViewOperation] = [.bind(source: canonical, path: canonical, writable: false)]
        if canonical != path { operations.append(.symlink(path: path, target: canonical)) }
        return operations
    }
}

extension ViewOperation: CustomStringConvertible {
    package var description: String {
        switch self {
        case .bind(let source, let path, let writable):
            "bind \(source)" + (source == path ? "" : " on \(path)") + (writable ? " (writable)" : "")
        case .symlink(let path, let target): "link \(path) → \(target)"
        case .directory(let path): "directory \(path)"
        case .sealed(let path, let descriptor): "sealed copy \(path) (descriptor \(descriptor))"
        case .scratch(let path, let bytes): "scratch \(path) (\(ByteCount(bytes)))"
        }
    }
}

/// What a worker is started for.
package enum LoadMode: UInt8, Sendable {
    /// Load the plugin, call its init, serve requests.
    case serve = 0
    /// Apply the confinement, report it in `Ready` and exit without opening the library: shows
    /// the layers of a plugin that may not run yet.
    case probeConfinement = 1
    /// Apply the confinement, open the library and check its entry point, ABI version and
    /// declared functions, report in `Ready` (or `LoadFailure`) and exit without calling init:
    /// `plugind verify`.
    case inspectLibrary = 2
    /// Apply the confinement, then wait: a worker made ahead of a likely launch. The launch sends
    /// a second `hello` whose load is the same in mode `serve`; anything else ends the worker
    /// before any plugin code runs.
    case primed = 3
    /// Like `serve`, for `plugind debug`: once confined, the worker is made traceable by the
    /// owner's debugger, waits for it to attach and stops before the plugin's init.
    case debug = 4
}

extension PayloadWriter {
    package mutating func write(_ identity: FileIdentity?) {
        write(identity != nil)
        guard let identity else { return }
        write(identity.device)
        write(identity.inode)
        write(identity.size)
        write(identity.modificationNanoseconds)
        write(identity.changeNanoseconds)
    }
}

extension PayloadReader {
    package mutating func readFileIdentity() throws(WireError) -> FileIdentity? {
        guard try readBool() else { return nil }
        return FileIdentity(
            device: try readUInt64(),
            inode: try readUInt64(),
            size: try readUInt64(),
            modificationNanoseconds: try readInt64(),
            changeNanoseconds: try readInt64()
        )
    }
}

/// Limits the worker applies to itself; 0 means "none" for each.
package struct ResourceLimits: Equatable, Sendable {
    package var addressSpaceBytes: UInt64 = 0
    package var cpuSeconds: UInt64 = 0
    package var openFiles: UInt64 = 0
    /// Threads (and, with the `processes` permission, processes) of the plugin, the worker's own
    /// included.
    package var tasks: UInt64 = 0
    /// Largest request or response payload; always set.
    package var maxMessageBytes: UInt64 = 64 << 20
    /// Largest file the plugin may write (in its grants, its scratch space); 0: no limit.
    package var fileBytes: UInt64 = 0

    package init(
        addressSpaceBytes: UInt64 = 0, cpuSeconds: UInt64 = 0, openFiles: UInt64 = 0, tasks: UInt64 = 0, maxMessageBytes: UInt64 = 64 << 20,
        fileBytes: UInt64 = 0
    ) {
        self.fileBytes = fileBytes
        self.addressSpaceBytes = addressSpaceBytes
        self.cpuSeconds = cpuSeconds
        self.openFiles = openFiles
        self.tasks = tasks
        self.maxMessageBytes = maxMessageBytes
    }
}

/// The confinement the host wants; the worker reports what it achieved in `Ready`.
package struct ConfinementRequest: Equatable, Sendable {
    /// Leave network sockets and TCP usable.
    package var allowsNetwork: Bool = false
    /// Let the plugin start processes and create memfds (the owner approved `processes`).
    package var allowsProcesses: Bool = false
    /// Create symlinks in the writable paths (the manifest's `symlinks` permission).
    package var allowsSymlinks: Bool = false
    /// Extra paths readable beneath (approved by the owner), as bound in the view.
    package var readablePaths: [String] = []
    /// Extra paths writable beneath (approved by the owner), as bound in the view.
    package var writablePaths: [String] = []
    /// Fail the load when a layer cannot be applied, instead of reporting it unavailable.
    package var requiresEveryLayer: Bool = true
    /// Apply no confinement at all (tests and debugging only; reported as such).
    package var disabled: Bool = false
    /// Layers the host turned off for measurement (`plugind-bench` only; reported as such).
    package var skippedLayers: [String] = []
    /// Layers whose absence does not fail the load although every layer is required: those the
    /// machine's policy accepts as missing (`acceptMissingLayers` in the policy files). Each is
    /// still applied when it can be, and reported unavailable when it cannot.
    package var acceptedMissingLayers: [String] = []

    /// Whether `layer` missing fails the load.
    package func requires(_ layer: String) -> Bool {
        requiresEveryLayer && !acceptedMissingLayers.contains(layer)
    }

    /// Whether a worker may apply what every plugin gets before it knows its plugin (a spare
    /// does, and moves into its view): not when confinement, the system-call layer that is part
    /// of it, or the view (then the worker shows the host's whole tree) is off.
    package var permitsAdvanceRestrictions: Bool {
        !disabled && !skippedLayers.contains("system-calls") && !skippedLayers.contains("filesystem-view")
    }

    /// Whether a spare (or a worker primed from one) can serve the launch: it restricted itself
    /// ahead and waits in a network namespace of its own, so not for a plugin granted the network.
    package var permitsSpare: Bool {
        permitsAdvanceRestrictions && !allowsNetwork && !skippedLayers.contains("network-namespace")
    }

    package init(
        allowsNetwork: Bool = false,
        allowsProcesses: Bool = false,
        allowsSymlinks: Bool = false,
        readablePaths: [String] = [],
        writablePaths: [String] = [],
        requiresEveryLayer: Bool = true,
        disabled: Bool = false,
        skippedLayers: [String] = [],
        acceptedMissingLayers: [String] = []
    ) {
        self.allowsNetwork = allowsNetwork
        self.allowsProcesses = allowsProcesses
        self.allowsSymlinks = allowsSymlinks
        self.readablePaths = readablePaths
        self.writablePaths = writablePaths
        self.requiresEveryLayer = requiresEveryLayer
        self.disabled = disabled
        self.skippedLayers = skippedLayers
        self.acceptedMissingLayers = acceptedMissingLayers
    }
}

/// One confinement layer as the worker found it after applying it.
package struct ConfinementLayerReport: Equatable, Sendable {
    package enum State: UInt8, Sendable {
        /// Applied and verified.
        case applied = 0
        /// Not applied because the plugin's approved permissions do not call for it.
        case notRequested = 1
        /// Could not be applied on this system; `detail` says why.
        case unavailable = 2
    }

    package var layer: String
    package var state: State
    package var detail: String

    package init(layer: String, state: State, detail: String) {
        self.layer = layer
        self.state = state
        self.detail = detail
    }
}

/// First message, host → worker.
package struct Hello: Equatable, Sendable {
    package var minimumProtocolVersion: UInt16
    package var maximumProtocolVersion: UInt16
    package var features: [String]
    package var load: LoadConfiguration

    package init(
        minimumProtocolVersion: UInt16 = ProtocolVersion.minimum,
        maximumProtocolVersion: UInt16 = ProtocolVersion.current,
        features: [String] = ProtocolFeature.all,
        load: LoadConfiguration
    ) {
        self.minimumProtocolVersion = minimumProtocolVersion
        self.maximumProtocolVersion = maximumProtocolVersion
        self.features = features
        self.load = load
    }
}

/// Answer to `Hello` once the plugin is loaded.
package struct Ready: Equatable, Sendable {
    package var protocolVersion: UInt16
    package var pluginABIVersion: UInt32
    package var features: [String]
    package var pluginName: String
    package var pluginVersion: String
    /// False for function-only libraries, which accept typed calls only.
    package var hasRequestHandler: Bool
    package var confinement: [ConfinementLayerReport]
    /// The worker's pid as the worker sees it (1 inside its own pid namespace).
    package var workerProcessIdentifier: Int32
    /// How many requests the worker runs at once.
    package var concurrency: UInt32

    package init(
        protocolVersion: UInt16,
        pluginABIVersion: UInt32,
        features: [String],
        pluginName: String,
        pluginVersion: String,
        hasRequestHandler: Bool,
        confinement: [ConfinementLayerReport],
        workerProcessIdentifier: Int32,
        concurrency: UInt32 = 1
    ) {
        self.concurrency = concurrency
        self.protocolVersion = protocolVersion
        self.pluginABIVersion = pluginABIVersion
        self.features = features
        self.pluginName = pluginName
        self.pluginVersion = pluginVersion
        self.hasRequestHandler = hasRequestHandler
        self.confinement = confinement
        self.workerProcessIdentifier = workerProcessIdentifier
    }
}

/// Why the worker could not load the plugin. It exits after sending this.
package struct LoadFailure: Equatable, Sendable, Error {
    package enum Kind: UInt8, Sendable {
        case incompatibleProtocol = 1
        case invalidConfiguration = 2
        case confinementFailed = 3
        /// The plugin's bundle was removed or replaced between the host sealing its files and
        /// the worker binding it into the view (an uninstall or `install --force` racing the
        /// launch): not a fault of the plugin or of the machine's confinement.
        case bundleChanged = 4
        case libraryOpenFailed = 5
        case symbolMissing = 6
        case abiMismatch = 7
        case initializationFailed = 8
    }

    package var kind: Kind
    package var message: String
    /// The plugin's own error code when `init` failed.
    package var pluginCode: Int32

    package init(kind: Kind, message: String, pluginCode: Int32 = 0) {
        self.kind = kind
        self.message = message
        self.pluginCode = pluginCode
    }
}

/// A plugin's answer of failure: its code and message.
package struct PluginFailure: Equatable, Sendable {
    package var code: Int32
    package var message: String

    package init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }
}

/// What the worker's fatal-signal handler writes before it dies. Fixed layout, written by C code
/// in a signal handler (see `plugind_shim_install_fatal_signal_report`).
package struct FatalSignalReport: Equatable, Sendable {
    package static let payloadSize = 32

    package var signal: Int32
    package var code: Int32
    package var faultAddress: UInt64
    package var addressSpaceBytes: UInt64
    package var openDescriptors: UInt64

    package init(signal: Int32, code: Int32, faultAddress: UInt64, addressSpaceBytes: UInt64, openDescriptors: UInt64) {
        self.signal = signal
        self.code = code
        self.faultAddress = faultAddress
        self.addressSpaceBytes = addressSpaceBytes
        self.openDescriptors = openDescriptors
    }
}

/// Why the host did not answer a plugin's ask.
package struct AskFailure: Error, Equatable, Sendable {
    package enum Reason: UInt8, Sendable {
        /// The connection has no request handler.
        case unsupported = 1
        /// The handler threw: `code` and `message` are what it threw.
        case handlerFailed = 2
        /// Too many asks of the connection are waiting already.
        case tooManyAsks = 3
        /// The ask or its answer is over the message limit.
        case tooLarge = 4
        /// The connection was closed (or its process is ending) before the answer.
        case closed = 5
    }

    package var reason: Reason
    package var code: Int32
    package var message: String

    package init(reason: Reason, code: Int32 = 0, message: String) {
        self.reason = reason
        self.code = code
        self.message = message
    }
}
