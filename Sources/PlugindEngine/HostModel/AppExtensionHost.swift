public import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem

/// Who the host is and where plugind looks for its plugins, policy and worker. The Linux stand-in
/// for what Apple platforms take from the app bundle and the system.
///
/// Every value has a default derived from the environment; set `AppExtensionHost.current` once at
/// start-up to change them for the whole process.
public struct AppExtensionHost: Sendable, Hashable {
    /// The host's identifier in reverse DNS. An extension point declared with `Name("x")` gets the
    /// full identifier "<identifier>.x".
    public var identifier: String
    /// Plugins shipped with the host itself: searched first and enabled without approval (Apple's
    /// `Scope(restriction: .application)`).
    public var bundledPluginsDirectory: URL?
    /// Directories searched for installed plugins, in precedence order (after the bundled ones).
    public var searchPaths: [URL]
    /// Where hosts' extension-point descriptors are read from, in precedence order: normally
    /// `$XDG_DATA_HOME/plugind/extension-points`, `/usr/local/share/plugind/extension-points`,
    /// `/usr/share/plugind/extension-points` (`PLUGIND_EXTENSION_POINTS_PATH` replaces them).
    /// `installExtensionPointDescriptors(_:)` writes to the first that is not under `/usr`.
    /// Linux addition: the counterpart of the `.appext` descriptions inside an Apple app.
    public var extensionPointDirectories: [URL]
    /// The owner's policy store (`policy.json`), normally `$XDG_CONFIG_HOME/plugind`.
    public var policyDirectory: URL
    /// The administrator's policy store, whose denials win, normally `/etc/plugind`.
    public var administratorPolicyDirectory: URL
    /// Where plugind keeps crash records and caches, normally `$XDG_STATE_HOME/plugind`.
    public var stateDirectory: URL
    /// The `plugind-worker` executable. When nil, plugind uses `$PLUGIND_WORKER`, then
    /// `plugind-worker` beside the running executable, then the one on `PATH`.
    public var workerExecutable: URL?
    /// The most any plugin may ask for, and the values used when its manifest asks nothing.
    public var limits: Limits
    /// Whether a worker may run when a confinement layer cannot be applied.
    public var confinement: ConfinementRequirement
    /// How long a worker may take from spawn to `ready`.
    public var launchTimeout: Duration
    /// How long `invalidate()` waits for the worker to exit before killing it.
    public var shutdownGracePeriod: Duration
    /// How long a worker may take to confirm a cancelled or timed-out request before it is
    /// considered stuck and killed.
    public var cancellationGracePeriod: Duration
    /// When repeated crashes quarantine a plugin.
    public var quarantine: QuarantinePolicy
    /// The host's own version, such as "2.1.0": a plugin whose manifest's `minimumHostVersion`
    /// is newer is not listed by this host's monitors (a `requires-newer-host` diagnostic says
    /// why) and does not launch. Defaults to plugind's version; `PLUGIND_HOST_VERSION` sets it for
    /// `plugind` commands.
    public var version: String
    /// How workers are started.
    public var launchStrategy: LaunchStrategy
    /// The languages an identity's `localizedName` is chosen in, most preferred first, as
    /// normalised tags ("de_AT", "de"): by default from the environment the host was made with,
    /// as gettext reads it (`LANGUAGE`, then the first of `LC_ALL`, `LC_MESSAGES`, `LANG`; none
    /// for the `C` locale). A plugin without a translation for any of them shows its `name`.
    /// Linux addition (Apple's comes from the bundle's localizations).
    public var preferredLanguages: [String]
    /// A cgroup v2 directory delegated to this host (for example by a systemd unit with
    /// `Delegate=yes`), with the memory and pids controllers enabled for its children and no
    /// process of its own. Workers of plugins approved to start processes each get a group in
    /// it. Without one, plugind uses the cgroup v1 hierarchies when it may write them (as root);
    /// otherwise such plugins have per-process limits only. Linux addition.
    public var workerCgroupDirectory: URL?
    /// Where the host records what its plugins do (`PLUGIND_LOG`: automatic, journal, file or
    /// off). Linux addition.
    public var pluginLog: PluginLogDestination
    /// The journal namespace the entries go to, nil for the system's own
    /// (`PLUGIND_JOURNAL_NAMESPACE`): an administrator can keep plugin logs apart, with a
    /// retention of their own. Linux addition.
    public var journalNamespace: String?
    /// Where the statistics of this host's running workers are published for `plugind top`:
    /// `$XDG_RUNTIME_DIR/plugind`, else `/run/plugind` for root and `<state>/run` for others
    /// (`PLUGIND_RUNTIME_DIR`). Linux addition.
    public var runtimeDirectory: URL
    /// Confinement layers turned off to measure what each costs (`plugind-bench` only; a worker
    /// reports each as not requested).
    package var skippedConfinementLayers: [String] = []
    /// How many of a plugin's asks may wait for this host's answer on one connection; more fail
    /// at once with "too many asks". Tests lower it.
    package var asksPerConnection = 64
    /// Whether a launch leaves a worker primed for the next launch of the same plugin
    /// (`PrimedWorker`). Benchmarks of a plugin's first launch turn it off.
    package var primesWorkers = true

    public enum LaunchStrategy: String, Sendable, Hashable {
        /// From a spare, or forked on the spot, by a pre-forked launcher (`plugind-worker
        /// --launcher`) that has the worker's runtime loaded already and forks that one worker:
        /// each worker gets an address-space layout, stack canary and hash seed of its own. The
        /// next launcher is exec'd ahead, off the launch's path; each worker holds more memory of
        /// its own than with `preforkedSharingLayout` (Documentation/Performance.md has both
        /// figures). The default.
        case preforked
        /// Like `preforked`, but one launcher per host forks every worker: less unique memory per
        /// worker, and launches in quick succession never wait for a launcher to start;
        /// but every worker of the host shares the launcher's address-space layout, stack canary
        /// and hash seed, so a plugin learns where the code and data of the others are.
        case preforkedSharingLayout
        /// A launcher executed afresh for every launch forks that one worker, with no spares: the
        /// slowest start.
        case spawn

        /// How many children each launcher forks; nil without pre-forked launchers.
        var forks: LaunchPool.Forks? {
            switch self {
            case .preforked: .one
            case .preforkedSharingLayout: .many
            case .spawn: nil
            }
        }
    }

    /// Caps and defaults for plugin resource limits.
    public struct Limits: Sendable, Hashable {
        /// Address space of a worker, in bytes.
        public var memoryBytes: UInt64
        /// CPU time of a worker, in seconds.
        public var cpuSeconds: UInt64
        /// Open descriptors of a worker.
        public var openFiles: UInt64
        /// Deadline of one request, when the caller gives none.
        public var requestTimeout: Duration
        /// Largest request or response.
        public var maxMessageBytes: UInt64
        /// Threads of a worker (and its processes, for a plugin approved to start them).
        public var threads: UInt64
        /// Size of a worker's private scratch directory, when its manifest asks for one. Scratch
        /// space is memory, on top of `memoryBytes`.
        public var scratchBytes: UInt64
        /// Largest file a worker may write, in its write grants or its scratch space
        /// (`RLIMIT_FSIZE`: a write past it fails with `EFBIG`). Not a bound on the total a
        /// plugin writes, which only the file system's quota sets.
        public var fileBytes: UInt64

        public init(
            memoryBytes: UInt64 = 1 << 30,
            cpuSeconds: UInt64 = 3600,
            openFiles: UInt64 = 1024,
            requestTimeout: Duration = .seconds(30),
            maxMessageBytes: UInt64 = 64 << 20,
            threads: UInt64 = 64,
            scratchBytes: UInt64 = 64 << 20,
            fileBytes: UInt64 = 1 << 30
        ) {
            self.memoryBytes = memoryBytes
            self.cpuSeconds = cpuSeconds
            self.openFiles = openFiles
            self.requestTimeout = requestTimeout
            self.maxMessageBytes = maxMessageBytes
            self.threads = threads
            self.scratchBytes = scratchBytes
            self.fileBytes = fileBytes
        }
    }

    public enum ConfinementRequirement: String, Sendable, Hashable {
        /// Every layer must apply, or the launch fails naming the layer (the default); except
        /// those the machine's policy accepts as missing (`acceptMissingLayers` in the policy
        /// files, plugind-policy(5)), which the worker reports unavailable as for `bestEffort`.
        case required
        /// Apply what the system offers; report the rest in `AppExtensionProcess.confinement`.
        case bestEffort
        /// Apply nothing. For debugging plugins only.
        case disabled
    }

    /// A plugin that crashes `crashes` times within `window` is quarantined until its bytes
    /// change or the owner clears it.
    public struct QuarantinePolicy: Sendable, Hashable {
        public var crashes: Int
        public var window: Duration

        public init(crashes: Int = 3, window: Duration = .seconds(300)) {
            self.crashes = crashes
            self.window = window
        }
    }

    /// A host with defaults taken from `environment`: `PLUGIND_PATH`, `XDG_DATA_HOME`,
    /// `XDG_CONFIG_HOME`, `XDG_STATE_HOME`, `PLUGIND_ADMIN_POLICY_DIR`, `HOME`. The variables of
    /// `commandLineEnvironment` (`PLUGIND_SEARCH_PATH`, `PLUGIND_EXTENSION_POINTS_PATH`, `PLUGIND_BUNDLED_PLUGINS_DIR`,
    /// `PLUGIND_POLICY_DIR`, `PLUGIND_STATE_DIR`, `PLUGIND_HOST_VERSION`, `PLUGIND_MEMORY_LIMIT` in bytes, `PLUGIND_LOG`,
    /// `PLUGIND_JOURNAL_NAMESPACE`, `PLUGIND_RUNTIME_DIR`) override
    /// them, each when it holds absolute paths (or a number).
    public init(identifier: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let home = environment["HOME"].map { URL(fileURLWithPath: $0) } ?? FileManager.default.homeDirectoryForCurrentUser
        func directory(_ variable: String, fallback: String) -> URL {
            if let value = environment[variable], value.hasPrefix("/") { return URL(fileURLWithPath: value) }
            return home.appendingPathComponent(fallback)
        }
        let dataHome = directory("XDG_DATA_HOME", fallback: ".local/share")
        let configHome = directory("XDG_CONFIG_HOME", fallback: ".config")
        let stateHome = directory("XDG_STATE_HOME", fallback: ".local/state")

        self.identifier = identifier
        let pluginPath = (environment["PLUGIND_PATH"] ?? "").split(separator: ":").map { URL(fileURLWithPath: String($0)) }
        self.searchPaths =
            pluginPath + [
                dataHome.appendingPathComponent("plugind/plugins"),
                URL(fileURLWithPath: "/usr/local/lib/plugind/plugins"),
                URL(fileURLWithPath: "/usr/lib/plugind/plugins"),
            ]
        self.extensionPointDirectories = [
            dataHome.appendingPathComponent("plugind/extension-points"),
            URL(fileURLWithPath: "/usr/local/share/plugind/extension-points"),
            URL(fileURLWithPath: "/usr/share/plugind/extension-points"),
        ]
        self.policyDirectory = configHome.appendingPathComponent("plugind")
        self.administratorPolicyDirectory = URL(fileURLWithPath: environment["PLUGIND_ADMIN_POLICY_DIR"] ?? "/etc/plugind")
        self.stateDirectory = stateHome.appendingPathComponent("plugind")
        self.workerExecutable = nil
        self.limits = Limits()
        self.confinement = .required
        self.launchTimeout = .seconds(10)
        self.shutdownGracePeriod = .seconds(2)
        self.cancellationGracePeriod = .seconds(1)
        self.quarantine = QuarantinePolicy()
        self.version = environment["PLUGIND_HOST_VERSION"].flatMap { $0.isEmpty ? nil : $0 } ?? HostVersion.current.description
        self.launchStrategy = .preforked
        self.preferredLanguages = LanguagePreference(environment: environment).tags
        func absolute(_ variable: String) -> URL? {
            environment[variable].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0) : nil }
        }
        if let searchPath = environment["PLUGIND_SEARCH_PATH"] {
            let paths = searchPath.split(separator: ":").map(String.init)
            if paths.allSatisfy({ $0.hasPrefix("/") }) { self.searchPaths = paths.map { URL(fileURLWithPath: $0) } }
        }
        // The cap on a plugin's address space, for a host (or an owner's `plugind run`) whose
        // plugins reserve more than they use: the Go runtime reserves about 1 GiB at start-up.
        if let memory = environment["PLUGIND_MEMORY_LIMIT"].flatMap(UInt64.init), memory >= 16 << 20 {
            self.limits.memoryBytes = memory
        }
        if let pointsPath = environment["PLUGIND_EXTENSION_POINTS_PATH"] {
            let paths = pointsPath.split(separator: ":").map(String.init)
            if paths.allSatisfy({ $0.hasPrefix("/") }) { self.extensionPointDirectories = paths.map { URL(fileURLWithPath: $0) } }
        }
        self.pluginLog = environment["PLUGIND_LOG"].flatMap(PluginLogDestination.init(rawValue:)) ?? .automatic
        let namespace = environment["PLUGIND_JOURNAL_NAMESPACE"] ?? ""
        self.journalNamespace = Self.isJournalNamespace(namespace) ? namespace : nil
        let runtime =
            absolute("XDG_RUNTIME_DIR").map { $0.appendingPathComponent("plugind") }
            ?? (getuid() == 0 ? URL(fileURLWithPath: "/run/plugind") : stateHome.appendingPathComponent("plugind/run"))
        self.runtimeDirectory = absolute("PLUGIND_RUNTIME_DIR") ?? runtime
        self.bundledPluginsDirectory = absolute("PLUGIND_BUNDLED_PLUGINS_DIR")
        self.policyDirectory = absolute("PLUGIND_POLICY_DIR") ?? policyDirectory
        self.stateDirectory = absolute("PLUGIND_STATE_DIR") ?? stateDirectory
    }

    /// The variables that make `plugind` (which configures itself from its environment) see this
    /// host: the same plugin directories, policies and state. For running `plugind` on a host's
    /// behalf, as `AppExtensionBrowser` does.
    public var commandLineEnvironment: [String: String] {
        var environment = [
            "PLUGIND_HOST_IDENTIFIER": identifier,
            "PLUGIND_SEARCH_PATH": searchPaths.map(\.path).joined(separator: ":"),
            "PLUGIND_EXTENSION_POINTS_PATH": extensionPointDirectories.map(\.path).joined(separator: ":"),
            "PLUGIND_POLICY_DIR": policyDirectory.path,
            "PLUGIND_ADMIN_POLICY_DIR": administratorPolicyDirectory.path,
            "PLUGIND_STATE_DIR": stateDirectory.path,
            "PLUGIND_HOST_VERSION": version,
            "PLUGIND_MEMORY_LIMIT": String(limits.memoryBytes),
            "PLUGIND_LOG": pluginLog.rawValue,
            "PLUGIND_RUNTIME_DIR": runtimeDirectory.path,
        ]
        if let journalNamespace { environment["PLUGIND_JOURNAL_NAMESPACE"] = journalNamespace }
        if let bundledPluginsDirectory { environment["PLUGIND_BUNDLED_PLUGINS_DIR"] = bundledPluginsDirectory.path }
        if let workerExecutable { environment["PLUGIND_WORKER"] = workerExecutable.path }
        return environment
    }

    /// A journal namespace's name as systemd takes it: letters, digits, '_', '-' and '.', at most 64.
    static func isJournalNamespace(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && !name.hasPrefix(".")
            && name.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "_-.".unicodeScalars.contains($0))
            }
    }

    /// The user's own extension-points directory: the first of `extensionPointDirectories` not
    /// under `/usr`.
    public var userExtensionPointsDirectory: URL? {
        extensionPointDirectories.first { !$0.path.hasPrefix("/usr/") }
    }

    /// The user's own plugin directory, where `plugind install` puts bundles.
    public var userPluginsDirectory: URL {
        let data = searchPaths.first { $0.path.hasSuffix("/plugind/plugins") && !$0.path.hasPrefix("/usr/") }
        return data ?? policyDirectory.appendingPathComponent("plugins")
    }

    private static let storage = Locked(AppExtensionHost(identifier: defaultIdentifier()))

    /// The configuration used wherever none is passed explicitly.
    public static var current: AppExtensionHost {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// `PLUGIND_HOST_IDENTIFIER`, or "local." followed by the executable's name.
    private static func defaultIdentifier() -> String {
        if let identifier = ProcessInfo.processInfo.environment["PLUGIND_HOST_IDENTIFIER"], !identifier.isEmpty {
            return identifier
        }
        let name = ProcessInfo.processInfo.processName.filter { $0.isLetter || $0.isNumber || $0 == "-" }
        return "local." + (name.isEmpty ? "host" : name)
    }
}
