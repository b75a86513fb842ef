import CPlugindConfinement
import Glibc
import PlugindSystem
import PlugindWire
import PlugindWorkerCore

/// Applies the confinement layers to the worker before any plugin code is loaded, verifies each
/// one, and reports what holds. A layer that cannot be applied fails the load, unless the host
/// explicitly allowed running without it.
///
/// The order of the steps and what each may do when it cannot hold are data
/// (`ConfinementStep.table`, run by `ConfinementSteps.run`): the private filesystem view (mount
/// namespace), the end of every privilege (user namespace, no capabilities, a new session
/// keyring), process attributes, resource limits, the seccomp filter, and Landlock as a second
/// filesystem layer. This file holds what each step does to the process, each next to the
/// report it makes; Landlock's rules (`Confinement+Landlock.swift`) and the view
/// (`WorkerView.swift`) have files of their own.
enum Confinement {
    /// Layer names as reported in `Ready` and shown by `plugind info` (`ConfinementLayerName`'s,
    /// here for the worker's files that do not import PlugindWorkerCore).
    enum Layer {
        static let filesystemView = ConfinementLayerName.filesystemView
        static let privileges = ConfinementLayerName.privileges
        static let noNewPrivileges = ConfinementLayerName.noNewPrivileges
        static let notDumpable = ConfinementLayerName.notDumpable
        static let noCoreFiles = ConfinementLayerName.noCoreFiles
        static let resourceLimits = ConfinementLayerName.resourceLimits
        static let systemCalls = ConfinementLayerName.systemCalls
        static let network = ConfinementLayerName.network
        static let networkNamespace = ConfinementLayerName.networkNamespace
        static let filesystem = ConfinementLayerName.filesystem
        static let signals = ConfinementLayerName.signals
        static let processTree = ConfinementLayerName.processTree
        static let session = ConfinementLayerName.session
    }

    /// What a spare (or a worker forked on the spot) set up before it knew its plugin.
    struct Prepared {
        /// The view begun, or why there is none.
        var view: Result<WorkerView.Prepared, WorkerView.Failure>
        /// The Landlock ruleset with the rules of the common view, when Landlock is available.
        var rulesets: PreparedRulesets?
        /// The restrictions already in force; nil when the process restricted nothing ahead
        /// (the host may turn its confinement off).
        var advance: AdvanceRestrictions?
        /// Whether the process was forked into a network namespace of its own.
        var hasNetworkNamespace = false
        /// Why there are no rulesets, when Landlock is unavailable (the reason its layers report).
        var landlockUnavailable: String? = nil
    }

    /// What every plugin gets, applied while the process waits for its plugin, so that a launch
    /// pays only for the plugin's own part: the half of the privilege drop the view does not
    /// need, a new empty session keyring, no-new-privileges and the first stage of the seccomp
    /// filter. Each is an errno (0 when it holds); the launch reports them in their layers.
    struct AdvanceRestrictions {
        var capabilityLimit: CInt
        /// The bounding set read back afterwards.
        var bounding: UInt64
        var keyring: CInt
        var noNewPrivileges: CInt
        var baseFilter: CInt

        static func apply() -> AdvanceRestrictions {
            let limited = plugind_sandbox_limit_capabilities()
            var bounding: UInt64 = .max
            _ = plugind_sandbox_bounding_set(&bounding)
            // Anonymous and empty whoever owns it: the worker changes its ids later, and the
            // plugin cannot reach any keyring through the system-call filter anyway.
            let keyring = plugind_sandbox_join_new_session_keyring()
            let noNewPrivileges = plugind_confinement_set_no_new_privileges()
            return AdvanceRestrictions(
                capabilityLimit: limited, bounding: bounding, keyring: keyring, noNewPrivileges: noNewPrivileges,
                baseFilter: plugind_confinement_install_base_filter())
        }
    }

    /// Facts that do not change between workers, computed once: in the pre-forked launcher before
    /// it forks, so that every worker inherits them.
    static func prepareForForks() {
        _ = WorkerView.common
        _ = WorkerIdentity.current
        let filters = plugind_confinement_prepare_filters()
        if filters != 0 {
            // Each worker tries again and reports its system-call layer unavailable if it fails.
            WorkerMain.report("launcher: the seccomp filters could not be compiled: \(Errno(rawValue: filters))" + filterCompilerFailure)
        }
        // Read before any filter is in force (it reads the process's affinity).
        _ = BusyPolling.isWorthwhile
        LauncherWarmUp.run()
    }

    /// Loads libseccomp, which compiles the filters, in a worker started without a launcher:
    /// before its hello, while its limits and identity are still the host's. A failure is
    /// reported with the system-call layer.
    static func loadFilterCompiler() {
        _ = plugind_confinement_load_filter_compiler()
    }

    /// Why libseccomp, which compiles the filters, could not be loaded (" (the loader's words)"),
    /// or "".
    static var filterCompilerFailure: String {
        let reason = String(cString: plugind_confinement_filter_compiler_failure())
        return reason.isEmpty ? "" : " (\(reason))"
    }

    /// Begins the view (when the process has namespaces of its own) and the Landlock ruleset;
    /// with `restrictingAhead`, applies the restrictions every plugin gets. A spare (`isSpare`)
    /// also settles into its view while it waits; a worker forked for a launch would only move
    /// that work around.
    static func prepare(hasNamespaces: Bool, hasNetworkNamespace: Bool, restrictingAhead: Bool, isSpare: Bool = false) -> Prepared {
        let view: Result<WorkerView.Prepared, WorkerView.Failure>
        if hasNamespaces {
            // A spare restricts itself ahead, so it never shows the host's whole tree.
            view = WorkerView.prepare(settlingAhead: isSpare && restrictingAhead)
        } else {
            view = .failure(WorkerView.Failure(step: "create user and mount namespaces", errno: .operationNotPermitted))
        }
        let begun = try? view.get()
        // Before the restrictions ahead: the probe tells a filter of someone else's from its own.
        let rulesets = PreparedRulesets.prepare(inView: begun != nil, viewRoot: begun?.settled == false ? "/newroot" : "")
        let landlockUnavailable: String? = if case .failure(let unavailable) = rulesets { unavailable.reason } else { nil }
        return Prepared(
            view: view, rulesets: try? rulesets.get(), advance: restrictingAhead ? .apply() : nil,
            hasNetworkNamespace: hasNetworkNamespace, landlockUnavailable: landlockUnavailable)
    }

    static func apply(_ load: LoadConfiguration, prepared: Prepared) throws(LoadFailure) -> [ConfinementLayerReport] {
        let request = load.confinement
        if request.disabled {
            prepared.rulesets?.discard()
            guard prepared.advance == nil else {
                throw LoadFailure(
                    kind: .confinementFailed,
                    message: "this worker restricted itself before its launch and cannot run with confinement turned off")
            }
            // Born not dumpable (see the launcher); with confinement off, a debugger may attach.
            _ = plugind_confinement_set_dumpable()
            try showHostTree(prepared.view)
            return [
                ConfinementLayerReport(
                    layer: "all",
                    state: .notRequested,
                    detail: "confinement disabled by the host configuration"
                )
            ]
        }
        // The ids the plugin runs as, and whether the process has namespaces of its own: several
        // steps depend on them.
        let identity = WorkerIdentity.current.forPlugin(load.pluginIdentifier)
        let inUserNamespace = (try? prepared.view.get()) != nil
        // The prepared rulesets until the Landlock step takes them: a failure before closes them,
        // a failure after must not close them again.
        var unusedRulesets = prepared.rulesets
        func takeRulesets() -> PreparedRulesets? {
            defer { unusedRulesets = nil }
            return unusedRulesets
        }
        do throws(LoadFailure) {
            return try ConfinementSteps.run(
                request: request,
                apply: { step, reports throws(LoadFailure) in
                    func state(_ layer: String) -> ConfinementLayerReport.State? { reports.last { $0.layer == layer }?.state }
                    switch step.id {
                    case .sealedCopies:
                        return [makeSealedCopiesPrivate(load, owner: identity.uid)]
                    case .processTree:
                        return [processTree()]
                    case .session:
                        return [session()]
                    case .filesystemView:
                        return [try filesystemView(load, prepared: prepared.view, owner: identity)]
                    case .privileges:
                        return [privileges(inUserNamespace: inUserNamespace, advance: prepared.advance, identity: identity)]
                    case .noNewPrivileges:
                        return [noNewPrivileges(advance: prepared.advance)]
                    case .notDumpable:
                        return [notDumpable()]
                    case .noCoreFiles:
                        return [noCoreFiles()]
                    case .resourceLimits:
                        return [resourceLimits(load.limits, inUserNamespace: inUserNamespace)]
                    case .systemCalls:
                        return [systemCalls(request, advance: prepared.advance)]
                    case .network:
                        return [network(request, filterApplied: state(Layer.systemCalls) == .applied)]
                    case .networkNamespace:
                        return [try networkNamespace(request, prepared: prepared)]
                    case .landlock:
                        let landlock = filesystem(
                            load, request: request, prepared: takeRulesets(), unavailable: prepared.landlockUnavailable,
                            inView: state(Layer.filesystemView) == .applied)
                        return [landlock.filesystem, landlock.signals]
                    case .hostTreeClosed:
                        return [hostTreeClosed()]
                    }
                },
                skipped: { step throws(LoadFailure) in
                    switch step.id {
                    // A spare began its view before it knew: it ends it showing the host's whole tree.
                    case .filesystemView: try showHostTree(prepared.view)
                    case .landlock: takeRulesets()?.discard()
                    default: break
                    }
                })
        } catch {
            takeRulesets()?.discard()
            throw error
        }
    }

    /// Ends a view begun before the worker knew its confinement was off (or its view turned off
    /// for measurement) showing the host's whole tree, writable.
    private static func showHostTree(_ prepared: Result<WorkerView.Prepared, WorkerView.Failure>) throws(LoadFailure) {
        guard case .success(let begun) = prepared else { return }
        if case .failure(let failure) = WorkerView.complete([.bind(source: "/", path: "/", writable: true)], prepared: begun, grants: []) {
            throw LoadFailure(kind: .confinementFailed, message: "cannot show the host's filesystem: \(failure)")
        }
    }

    /// Whatever path the steps took, no plugin code runs while the host's tree is at hand.
    private static func hostTreeClosed() -> ConfinementLayerReport {
        plugind_sandbox_host_tree() < 0
            ? applied("", "the host's tree is closed")
            : unavailable("", "the view was not completed: the host's tree is still open")
    }

    /// The host shares one sealed copy of a file between its launches; its mode allows no write,
    /// so only its owner could change its mode or attributes. A worker that will run as that
    /// owner (an ordinary user's) swaps each for a copy of its own before any plugin code runs,
    /// so that nothing it does to one reaches another launch.
    private static func makeSealedCopiesPrivate(_ load: LoadConfiguration, owner: UInt32) -> ConfinementLayerReport {
        for operation in load.view {
            guard case .sealed(let path, let descriptor) = operation else { continue }
            var status = stat()
            guard fstat(descriptor, &status) == 0 else {
                return unavailable("", "the sealed copy of \(path) (descriptor \(descriptor)) is missing")
            }
            guard status.st_uid == owner else { continue }
            do throws(SystemError) {
                try SealedFile.makePrivate(FileDescriptor(rawValue: descriptor))
            } catch {
                return unavailable("", "cannot make a private copy of \(path): \(error)")
            }
        }
        return applied("", "every sealed copy the plugin's ids own is its own")
    }

    static func applied(_ layer: String, _ detail: String) -> ConfinementLayerReport {
        ConfinementLayerReport(layer: layer, state: .applied, detail: detail)
    }

    static func unavailable(_ layer: String, _ detail: String) -> ConfinementLayerReport {
        ConfinementLayerReport(layer: layer, state: .unavailable, detail: detail)
    }

    static func notRequested(_ layer: String, _ detail: String) -> ConfinementLayerReport {
        ConfinementLayerReport(layer: layer, state: .notRequested, detail: detail)
    }

    static func describe(_ result: CInt) -> String {
        Errno(rawValue: result).description
    }

    /// Without the network, a namespace of its own: the host's abstract unix names (X11's, an
    /// application's), its socket tables (/proc/self/net) and interfaces do not exist there.
    private static func networkNamespace(_ request: ConfinementRequest, prepared: Prepared) throws(LoadFailure) -> ConfinementLayerReport {
        if request.allowsNetwork {
            guard !prepared.hasNetworkNamespace else {
                throw LoadFailure(
                    kind: .confinementFailed,
                    message: "this worker was started in a network namespace of its own and cannot reach the network the owner granted")
            }
            return notRequested(
                Layer.networkNamespace,
                "shares the host's network namespace (the owner granted the network): it sees the host's socket tables; its unix sockets come only from socketpair and bind only IP, netlink and packet addresses"
            )
        }
        return prepared.hasNetworkNamespace
            ? applied(
                Layer.networkNamespace,
                "its own network namespace: no abstract unix name, socket table or interface of the host exists for it")
            : unavailable(Layer.networkNamespace, "shares the host's network namespace: the kernel refused a new one")
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

    /// Completes the view; a failure of the plugin's own part (its bundle, its library) fails the
    /// load whatever the host requires, since the plugin cannot be loaded from sealed copies then.
    private static func filesystemView(
        _ load: LoadConfiguration,
        prepared: Result<WorkerView.Prepared, WorkerView.Failure>,
        owner: WorkerIdentity
    ) throws(LoadFailure) -> ConfinementLayerReport {
        switch prepared {
        case .failure(let failure):
            return unavailable(Layer.filesystemView, "no private view: \(failure)")
        case .success(let begun):
            let grants = Set(load.confinement.readablePaths + load.confinement.writablePaths)
            switch WorkerView.complete(
                load.view, prepared: begun, grants: grants, owner: owner)
            {
            case .failure(let failure) where failure.isBundleGone:
                throw LoadFailure(
                    kind: .bundleChanged,
                    message: "its bundle was removed or replaced while its worker started (\(failure)); nothing was loaded")
            case .failure(let failure):
                throw LoadFailure(kind: .confinementFailed, message: "cannot build the plugin's view: \(failure)")
            case .success(let completion):
                var detail = "its own root: the bundle, system libraries, /dev/null, /dev/zero, /dev/urandom"
                if !grants.isEmpty { detail += ", \(grants.count - completion.dropped.count) approved path(s)" }
                detail += "; nothing else of the host's filesystem exists for it"
                if !completion.dropped.isEmpty {
                    detail += "; left out: " + completion.dropped.joinedSpecialized(separator: ", ")
                }
                return applied(Layer.filesystemView, detail)
            }
        }
    }

    /// Ends every privilege: the securebits locked and the bounding set emptied (ahead, when the
    /// process restricted itself before its launch), the worker's unprivileged ids (a root host's
    /// worker built its view as root of its namespace), a new, empty session keyring, then no
    /// capability in any set. Verified from the kernel's own view of the thread.
    private static func privileges(
        inUserNamespace: Bool, advance: AdvanceRestrictions?, identity: WorkerIdentity
    ) -> ConfinementLayerReport {
        var limited = advance?.capabilityLimit ?? plugind_sandbox_limit_capabilities()
        var bounding: UInt64 = .max
        if let advance {
            bounding = advance.bounding
        } else {
            _ = plugind_sandbox_bounding_set(&bounding)
        }
        // A root host's worker takes its plugin's ids with or without a user namespace (without
        // one, on a kernel that refuses them, it also drops root's groups): never root's.
        let dropsRoot = !inUserNamespace && geteuid() == 0
        if inUserNamespace || dropsRoot {
            let result = limited == 0 ? plugind_sandbox_set_identity(identity.uid, identity.gid, dropsRoot ? 1 : 0) : limited
            guard result == 0, getuid() == identity.uid, geteuid() == identity.uid, getgid() == identity.gid else {
                return unavailable(Layer.privileges, "cannot take uid \(identity.uid) and gid \(identity.gid): \(describe(result))")
            }
        }
        let keyring = advance?.keyring ?? plugind_sandbox_join_new_session_keyring()
        if !inUserNamespace && geteuid() != 0 {
            // An ordinary user's process outside a user namespace holds no capability to drop,
            // and may not lock securebits or empty the bounding set (which only file
            // capabilities would use, and no-new-privileges makes execve ignore them).
            var effective: UInt64 = 1
            var permitted: UInt64 = 1
            guard plugind_sandbox_capabilities(&effective, &permitted) == 0, effective == 0, permitted == 0 else {
                return unavailable(Layer.privileges, "capabilities remain (effective \(hex(effective)), permitted \(hex(permitted)))")
            }
            var detail = "no capabilities (effective and permitted sets empty); uid \(getuid()), no user namespace"
            detail += keyring == 0 ? "; a new empty session keyring" : "; keyring not replaced (\(describe(keyring)))"
            return applied(Layer.privileges, detail)
        }
        if limited == 0 { limited = plugind_sandbox_clear_capabilities() }
        var effective: UInt64 = 1
        var permitted: UInt64 = 1
        guard limited == 0, plugind_sandbox_capabilities(&effective, &permitted) == 0, effective == 0, permitted == 0, bounding == 0
        else {
            return unavailable(
                Layer.privileges,
                "capabilities remain (effective \(hex(effective)), permitted \(hex(permitted)), bounding \(hex(bounding))): \(describe(limited))"
            )
        }
        var detail = "no capabilities (effective, permitted and bounding sets empty, securebits locked)"
        detail += inUserNamespace ? "; uid \(getuid()) in its own user namespace" : "; uid \(getuid()), no user namespace"
        detail += keyring == 0 ? "; a new empty session keyring" : "; keyring not replaced (\(describe(keyring)))"
        return applied(Layer.privileges, detail)
    }

    private static func hex(_ value: UInt64) -> String {
        "0x" + String(value, radix: 16)
    }

    private static func noNewPrivileges(advance: AdvanceRestrictions?) -> ConfinementLayerReport {
        let result = advance?.noNewPrivileges ?? plugind_confinement_set_no_new_privileges()
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
    /// that blocks SIGXCPU. The task limit counts the tasks of the worker's user in its own user
    /// namespace: with no processes allowed, the plugin's threads.
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
            DescribedLimit(
                resource: PLUGIND_CONFINEMENT_LIMIT_TASKS,
                soft: limits.tasks,
                hard: limits.tasks,
                text: "threads \(limits.tasks)"
            ),
            DescribedLimit(
                resource: PLUGIND_CONFINEMENT_LIMIT_FILE_SIZE,
                soft: limits.fileBytes,
                hard: limits.fileBytes,
                text: "files written \(ByteCount(limits.fileBytes)) each"
            ),
        ]
    }

    private static func resourceLimits(_ limits: ResourceLimits, inUserNamespace: Bool) -> ConfinementLayerReport {
        var applied: [String] = []
        // RLIMIT_NPROC counts the tasks of a uid in a user namespace. Without one of its own, an
        // ordinary user's worker shares its uid with every process of the user, which the limit
        // would count too (a root host's worker has its plugin's own uid): not applied then.
        let countsOthers = !inUserNamespace && WorkerIdentity.current.count == 1
        for limit in describedLimits(limits) where limit.soft > 0 {
            if countsOthers && limit.resource == PLUGIND_CONFINEMENT_LIMIT_TASKS {
                applied.append("no thread limit (without a user namespace of its own it would count every process of uid \(getuid()))")
                continue
            }
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
        return Self.applied(Layer.resourceLimits, applied.joinedSpecialized(separator: ", "))
    }

    /// Installs the seccomp filter's second stage (and its first, unless the process did ahead)
    /// and checks one refusal of each kind it promises.
    private static func systemCalls(_ request: ConfinementRequest, advance: AdvanceRestrictions?) -> ConfinementLayerReport {
        var options: CInt = 0
        if request.allowsNetwork { options |= PLUGIND_CONFINEMENT_ALLOW_NETWORK }
        if request.allowsProcesses { options |= PLUGIND_CONFINEMENT_ALLOW_PROCESSES }
        var result = advance?.baseFilter ?? plugind_confinement_install_base_filter()
        if result == 0 { result = plugind_confinement_install_filter(options) }
        guard result == 0 else {
            // The kernel answers EACCES, not EPERM, to a filter it will not take: EPERM is a filter's.
            let reason =
                FeatureProbeFailure(errno: result) == .refusedByFilter
                ? "a seccomp filter of this container or service refuses installing another (EPERM)" : describe(result)
            return unavailable(Layer.systemCalls, "the seccomp filter could not be installed: \(reason)" + filterCompilerFailure)
        }
        // Verify: a keyring call, a new user namespace and (without processes) a fork must now be
        // refused.
        var refusedProbes: CInt = 0
        _ = plugind_confinement_probe_filter(&refusedProbes)
        var expected = PLUGIND_CONFINEMENT_PROBE_KEYRING | PLUGIND_CONFINEMENT_PROBE_NAMESPACE
        if !request.allowsProcesses { expected |= PLUGIND_CONFINEMENT_PROBE_FORK }
        guard refusedProbes & expected == expected else {
            return unavailable(Layer.systemCalls, "seccomp filter installed but a call it should refuse went through")
        }
        var refused = [
            "keyrings", "bpf", "perf events", "userfaultfd", "clocks", "kernel log", "mounts", "namespaces", "ptrace",
            "fanotify and inotify", "setuid and setgid modes", "io_uring",
        ]
        if !request.allowsProcesses { refused.append("processes and memfd (threads only)") }
        return applied(Layer.systemCalls, "seccomp refuses " + refused.joinedSpecialized(separator: ", "))
    }

    private static func network(_ request: ConfinementRequest, filterApplied: Bool) -> ConfinementLayerReport {
        if request.allowsNetwork {
            return notRequested(Layer.network, "network access approved by the owner")
        }
        guard filterApplied else {
            return unavailable(Layer.network, "the seccomp filter that refuses sockets is not installed")
        }
        // Verify: an IPv4 socket must now be refused.
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if probe >= 0 {
            close(probe)
            return unavailable(Layer.network, "seccomp filter installed but an AF_INET socket was still created")
        }
        return applied(Layer.network, "seccomp: sockets other than AF_UNIX refused")
    }
}
