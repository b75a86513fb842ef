import CPlugindConfinement
import Glibc
import PlugindSystem
import PlugindWire

/// Applies the confinement layers to the worker before any plugin code is loaded, verifies each
/// one, and reports what holds. A layer that cannot be applied fails the load, unless the host
/// explicitly allowed running without it.
enum Confinement {
    /// Layer names as reported in `Ready` and shown by `plugind info`.
    enum Layer {
        static let noNewPrivileges = "no-new-privileges"
        static let notDumpable = "not-dumpable"
        static let noCoreFiles = "no-core-files"
        static let resourceLimits = "resource-limits"
        static let network = "network"
        static let filesystem = "filesystem"
        static let signals = "signals"
        static let processTree = "process-tree"
        static let session = "session"
    }

    /// Paths every plugin may read: the system's libraries and what the dynamic linker needs.
    static let systemReadablePaths = stableSystemPaths + replaceableSystemFiles
    /// Directories and devices: the same inode for as long as the system runs.
    static let stableSystemPaths = [
        "/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.conf.d", "/dev/zero", "/dev/urandom", "/dev/random",
    ]
    /// Files that updates replace by rename: a new inode, which a rule made before does not cover.
    static let replaceableSystemFiles = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime"]
    static let systemWritablePaths = ["/dev/null"]

    /// Facts that do not change between workers, computed once: in the pre-forked launcher before
    /// it forks, so that every worker inherits them.
    static let libraryDirectories = mappedLibraryDirectories()

    static func prepareForForks() {
        _ = libraryDirectories
        _ = plugind_confinement_prepare_network_filter()
        LauncherWarmUp.run()
    }

    static func apply(_ load: LoadConfiguration, prepared: PreparedRulesets? = nil) throws(LoadFailure) -> [ConfinementLayerReport] {
        let request = load.confinement
        if request.disabled {
            prepared?.discard()
            return [
                ConfinementLayerReport(
                    layer: "all",
                    state: .notRequested,
                    detail: "confinement disabled by the host configuration"
                )
            ]
        }
        var reports: [ConfinementLayerReport] = []
        func record(_ report: ConfinementLayerReport) throws(LoadFailure) {
            if report.state == .unavailable && request.requiresEveryLayer {
                throw LoadFailure(
                    kind: .confinementFailed,
                    message: "confinement layer '\(report.layer)' cannot be applied: \(report.detail)"
                )
            }
            reports.append(report)
        }

        try record(processTree())
        try record(session())
        try record(noNewPrivileges())
        try record(notDumpable())
        try record(noCoreFiles())
        try record(resourceLimits(load.limits))
        try record(network(allowed: request.allowsNetwork))
        let landlock = filesystem(load, request: request, prepared: prepared)
        try record(landlock.filesystem)
        try record(landlock.signals)
        return reports
    }

    private static func applied(_ layer: String, _ detail: String) -> ConfinementLayerReport {
        ConfinementLayerReport(layer: layer, state: .applied, detail: detail)
    }

    private static func unavailable(_ layer: String, _ detail: String) -> ConfinementLayerReport {
        ConfinementLayerReport(layer: layer, state: .unavailable, detail: detail)
    }

    private static func describe(_ result: CInt) -> String {
        Errno(rawValue: result).description
    }

    private static func processTree() -> ConfinementLayerReport {
        getpid() == 1
            ? applied(Layer.processTree, "pid 1 of its own pid namespace: every process it starts dies with it")
            : unavailable(Layer.processTree, "not started in its own pid namespace (pid \(getpid()))")
    }

    private static func session() -> ConfinementLayerReport {
        getsid(0) == getpid()
            ? applied(Layer.session, "leads its own session: no controlling terminal")
            : unavailable(Layer.session, "shares the host's session")
    }

    private static func noNewPrivileges() -> ConfinementLayerReport {
        let result = plugind_confinement_set_no_new_privileges()
        var enabled: CInt = 0
        guard result == 0, plugind_confinement_get_no_new_privileges(&enabled) == 0, enabled == 1 else {
            return unavailable(Layer.noNewPrivileges, "prctl(PR_SET_NO_NEW_PRIVS) failed: \(describe(result))")
        }
        return applied(Layer.noNewPrivileges, "execve cannot grant privileges")
    }

    private static func notDumpable() -> ConfinementLayerReport {
        let result = plugind_confinement_set_not_dumpable()
        var dumpable: CInt = 1
        guard result == 0, plugind_confinement_get_dumpable(&dumpable) == 0, dumpable == 0 else {
            return unavailable(Layer.notDumpable, "prctl(PR_SET_DUMPABLE) failed: \(describe(result))")
        }
        return applied(Layer.notDumpable, "other processes of the user cannot ptrace it or read its memory")
    }

    private static func noCoreFiles() -> ConfinementLayerReport {
        let result = plugind_confinement_set_limit(PLUGIND_CONFINEMENT_LIMIT_CORE_FILE_SIZE, 0, 0)
        var soft: UInt64 = 1
        var hard: UInt64 = 1
        guard result == 0,
            plugind_confinement_get_limit(PLUGIND_CONFINEMENT_LIMIT_CORE_FILE_SIZE, &soft, &hard) == 0,
            soft == 0, hard == 0
        else {
            return unavailable(Layer.noCoreFiles, "setrlimit(RLIMIT_CORE) failed: \(describe(result))")
        }
        return applied(Layer.noCoreFiles, "a crash writes no core file")
    }

    /// One resource limit as setrlimit takes it, with the words that describe it ("memory 256 MiB").
    struct DescribedLimit {
        let resource: plugind_confinement_limit
        let soft: UInt64
        let hard: UInt64
        let text: String
    }

    /// The limits to set. The CPU limit's hard value is one second above the soft one: at the soft
    /// limit the kernel sends SIGXCPU, which the worker reports before it exits, so the host can
    /// name the CPU limit for certain; the hard limit's SIGKILL is only the backstop for a plugin
    /// that blocks SIGXCPU.
    static func describedLimits(_ limits: ResourceLimits) -> [DescribedLimit] {
        [
            DescribedLimit(
                resource: PLUGIND_CONFINEMENT_LIMIT_ADDRESS_SPACE,
                soft: limits.addressSpaceBytes,
                hard: limits.addressSpaceBytes,
                text: "memory \(ByteCount(limits.addressSpaceBytes))"
            ),
            DescribedLimit(
                resource: PLUGIND_CONFINEMENT_LIMIT_CPU_SECONDS,
                soft: limits.cpuSeconds,
                hard: min(limits.cpuSeconds, .max - 1) + 1,
                text: "CPU \(limits.cpuSeconds) s"
            ),
            DescribedLimit(
                resource: PLUGIND_CONFINEMENT_LIMIT_OPEN_FILES,
                soft: limits.openFiles,
                hard: limits.openFiles,
                text: "open files \(limits.openFiles)"
            ),
        ]
    }

    private static func resourceLimits(_ limits: ResourceLimits) -> ConfinementLayerReport {
        var applied: [String] = []
        for limit in describedLimits(limits) where limit.soft > 0 {
            let result = plugind_confinement_set_limit(limit.resource, limit.soft, limit.hard)
            var soft: UInt64 = 0
            var hard: UInt64 = 0
            guard result == 0, plugind_confinement_get_limit(limit.resource, &soft, &hard) == 0, soft == limit.soft, hard == limit.hard
            else {
                return unavailable(Layer.resourceLimits, "setrlimit for \(limit.text) failed: \(describe(result))")
            }
            applied.append(limit.text)
        }
        applied.append("message \(ByteCount(limits.maxMessageBytes))")
        return Self.applied(Layer.resourceLimits, applied.joined(separator: ", "))
    }

    private static func network(allowed: Bool) -> ConfinementLayerReport {
        if allowed {
            return ConfinementLayerReport(layer: Layer.network, state: .notRequested, detail: "network access approved by the owner")
        }
        let result = plugind_confinement_deny_network_sockets()
        guard result == 0 else {
            return unavailable(Layer.network, "seccomp filter could not be installed: \(describe(result))")
        }
        // Verify: an IPv4 socket must now be refused.
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if probe >= 0 {
            close(probe)
            return unavailable(Layer.network, "seccomp filter installed but an AF_INET socket was still created")
        }
        return applied(Layer.network, "seccomp: sockets other than AF_UNIX and io_uring refused")
    }

    /// Landlock rulesets a spare builds while it waits, with the rules every plugin gets (system
    /// libraries, the dynamic linker's files, /dev/null): one for plugins without network access
    /// and one for those with it. A launch then adds only the plugin's own paths.
    struct PreparedRulesets {
        let abi: CInt
        let withoutNetwork: FileDescriptor
        let withNetwork: FileDescriptor
        /// The identities of the files (not directories) the rules name, when they were made: a
        /// rule holds the file it was made for, so a file replaced since (a new ld.so.cache, say)
        /// would not be covered.
        let fileIdentities: [FileIdentity?]

        /// Nil when Landlock is unavailable or a rule cannot be added; the launch then builds
        /// its ruleset from scratch and reports why.
        static func prepare() -> PreparedRulesets? {
            var abi: CInt = 0
            let identities = currentFileIdentities()
            guard plugind_confinement_landlock_abi(&abi) == 0, abi >= 1,
                let withoutNetwork = Confinement.systemRuleset(abi: abi, allowsNetwork: false)
            else { return nil }
            guard let withNetwork = Confinement.systemRuleset(abi: abi, allowsNetwork: true) else {
                withoutNetwork.close()
                return nil
            }
            return PreparedRulesets(abi: abi, withoutNetwork: withoutNetwork, withNetwork: withNetwork, fileIdentities: identities)
        }

        /// The same rulesets after the spare moved them to other descriptor numbers.
        func moved(withoutNetwork: FileDescriptor, withNetwork: FileDescriptor) -> PreparedRulesets {
            PreparedRulesets(abi: abi, withoutNetwork: withoutNetwork, withNetwork: withNetwork, fileIdentities: fileIdentities)
        }

        /// The ruleset for `allowsNetwork`, the other one closed; nil (both closed) when a file
        /// the rules name was replaced since they were made.
        func take(allowsNetwork: Bool) -> FileDescriptor? {
            guard Self.currentFileIdentities() == fileIdentities else {
                discard()
                return nil
            }
            (allowsNetwork ? withoutNetwork : withNetwork).close()
            return allowsNetwork ? withNetwork : withoutNetwork
        }

        /// Closes both, unused.
        func discard() {
            withoutNetwork.close()
            withNetwork.close()
        }

        private static func currentFileIdentities() -> [FileIdentity?] {
            replaceableSystemFiles.map(FileIdentity.init(path:))
        }
    }

    /// A new ruleset with the rules every plugin gets, or nil.
    private static func systemRuleset(abi: CInt, allowsNetwork: Bool) -> FileDescriptor? {
        var ruleset: CInt = -1
        guard plugind_confinement_landlock_create(abi, allowsNetwork ? 0 : 1, &ruleset) == 0 else { return nil }
        let descriptor = FileDescriptor(rawValue: ruleset)
        guard allow(systemReadablePaths + libraryDirectories, writable: false, in: ruleset, abi: abi) == nil,
            allow(systemWritablePaths, writable: true, in: ruleset, abi: abi) == nil
        else {
            descriptor.close()
            return nil
        }
        return descriptor
    }

    /// Adds a rule for each path; returns why one could not be added, if one could not.
    private static func allow(_ paths: [String], writable: Bool, in ruleset: CInt, abi: CInt) -> String? {
        for path in paths {
            let result = plugind_confinement_landlock_allow(ruleset, abi, path, writable ? 1 : 0)
            // Paths that do not exist on this system (/lib32, say) simply grant nothing.
            if result != 0 && result != ENOENT { return "cannot add a rule for \(path): \(describe(result))" }
        }
        return nil
    }

    private static func filesystem(
        _ load: LoadConfiguration,
        request: ConfinementRequest,
        prepared: PreparedRulesets?
    ) -> (filesystem: ConfinementLayerReport, signals: ConfinementLayerReport) {
        var pluginReadable = request.readablePaths
        if !load.bundlePath.isEmpty { pluginReadable.append(load.bundlePath) }
        pluginReadable.append(load.libraryPath)
        let abi: CInt
        let ruleset: CInt
        if let prepared, let taken = prepared.take(allowsNetwork: request.allowsNetwork) {
            abi = prepared.abi
            ruleset = taken.rawValue
        } else {
            var kernelABI: CInt = 0
            let abiResult = plugind_confinement_landlock_abi(&kernelABI)
            guard abiResult == 0, kernelABI >= 1 else {
                let reason = abiResult == 0 ? "the kernel does not offer Landlock" : describe(abiResult)
                return (unavailable(Layer.filesystem, reason), unavailable(Layer.signals, reason))
            }
            abi = kernelABI
            guard let created = systemRuleset(abi: abi, allowsNetwork: request.allowsNetwork) else {
                let reason = "landlock_create_ruleset or a rule for the system paths failed"
                return (unavailable(Layer.filesystem, reason), unavailable(Layer.signals, reason))
            }
            ruleset = created.rawValue
        }
        if let problem = allow(pluginReadable, writable: false, in: ruleset, abi: abi)
            ?? allow(request.writablePaths, writable: true, in: ruleset, abi: abi)
        {
            close(ruleset)
            return (unavailable(Layer.filesystem, problem), unavailable(Layer.signals, problem))
        }
        let enforced = plugind_confinement_landlock_enforce(ruleset)
        guard enforced == 0 else {
            let reason = "landlock_restrict_self failed: \(describe(enforced))"
            return (unavailable(Layer.filesystem, reason), unavailable(Layer.signals, reason))
        }
        // Verify: the root directory is outside every rule unless someone granted it.
        let grantedRoot = (request.readablePaths + request.writablePaths).contains("/")
        let probe = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if probe >= 0 { close(probe) }
        guard grantedRoot || (probe < 0 && errno == EACCES) else {
            return (
                unavailable(Layer.filesystem, "Landlock ABI \(abi) enforced, but / is still readable"),
                unavailable(Layer.signals, "Landlock did not take effect")
            )
        }
        let grants = request.readablePaths.count + request.writablePaths.count
        let filesystemReport = applied(
            Layer.filesystem,
            "Landlock ABI \(abi): read-only bundle and system libraries"
                + (grants > 0 ? ", plus \(grants) approved path(s)" : "")
                + (abi >= 4 && !request.allowsNetwork ? "; TCP bind/connect denied" : "")
        )
        let signalsReport =
            abi >= 6
            ? applied(Layer.signals, "Landlock ABI \(abi): cannot signal processes outside the sandbox")
            : unavailable(Layer.signals, "Landlock ABI \(abi) has no signal scoping (needs 6)")
        return (filesystemReport, signalsReport)
    }

    /// Directories holding the libraries this worker has mapped (the Swift runtime among them),
    /// which Swift plugins need as well.
    private static func mappedLibraryDirectories() -> [String] {
        guard let maps = try? FileDescriptor.open("/proc/self/maps", O_RDONLY) else { return [] }
        defer { maps.close() }
        guard let bytes = try? maps.readToEnd(limit: 1 << 20) else { return [] }
        var directories: Set<String> = []
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = line[slash...]
            guard path.contains(".so"), let lastSlash = path.lastIndex(of: "/") else { continue }
            directories.insert(String(path[..<lastSlash]))
        }
        return directories.sorted()
    }
}
