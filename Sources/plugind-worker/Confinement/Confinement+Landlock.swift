import CPlugindConfinement
import Glibc
import PlugindSystem
import PlugindWire
import PlugindWorkerCore

/// Landlock, the second filesystem layer: the rulesets a spare prepares ahead, and the plugin's
/// own rules added at its launch.
extension Confinement {

    /// Landlock rulesets a spare builds while it waits, with the rules of the common view: one for
    /// plugins without network access (TCP handled, so refused) and one for those with it. A
    /// launch adds only the plugin's own paths.
    struct PreparedRulesets {
        let abi: CInt
        let withoutNetwork: FileDescriptor
        let withNetwork: FileDescriptor
        /// Rules that could not be added, with why.
        let dropped: [String]

        /// The rulesets, or why Landlock is unavailable, which the launch reports.
        /// `viewRoot`: where the view's paths are while it is built.
        static func prepare(inView: Bool, viewRoot: String) -> Result<PreparedRulesets, Unavailable> {
            var abi: CInt = 0
            let probed = plugind_confinement_landlock_abi(&abi)
            guard probed == 0, abi >= 1 else { return .failure(Unavailable(probing: probed)) }
            var dropped: [String] = []
            let withoutNetwork: FileDescriptor
            switch commonRuleset(abi: abi, denyTCP: true, inView: inView, viewRoot: viewRoot, dropped: &dropped) {
            case .success(let ruleset): withoutNetwork = ruleset
            case .failure(let failure): return .failure(failure)
            }
            var ignored: [String] = []
            switch commonRuleset(abi: abi, denyTCP: false, inView: inView, viewRoot: viewRoot, dropped: &ignored) {
            case .success(let withNetwork):
                return .success(PreparedRulesets(abi: abi, withoutNetwork: withoutNetwork, withNetwork: withNetwork, dropped: dropped))
            case .failure(let failure):
                withoutNetwork.close()
                return .failure(failure)
            }
        }

        /// The same rulesets after the spare moved them to other descriptor numbers.
        func moved(withoutNetwork: FileDescriptor, withNetwork: FileDescriptor) -> PreparedRulesets {
            PreparedRulesets(abi: abi, withoutNetwork: withoutNetwork, withNetwork: withNetwork, dropped: dropped)
        }

        /// The ruleset for `allowsNetwork`; the other one is closed.
        func take(allowsNetwork: Bool) -> FileDescriptor {
            (allowsNetwork ? withoutNetwork : withNetwork).close()
            return allowsNetwork ? withNetwork : withoutNetwork
        }

        func discard() {
            withoutNetwork.close()
            withNetwork.close()
        }

        private static func commonRuleset(
            abi: CInt, denyTCP: Bool, inView: Bool, viewRoot: String, dropped: inout [String]
        ) -> Result<FileDescriptor, Unavailable> {
            var ruleset: CInt = -1
            let created = plugind_confinement_landlock_create(abi, denyTCP ? 1 : 0, &ruleset)
            guard created == 0 else { return .failure(Unavailable(creating: created)) }
            let prefix = inView ? viewRoot : ""
            for (path, writable) in commonRules(inView: inView) {
                let result = plugind_confinement_landlock_allow(ruleset, abi, prefix + path, writable ? 1 : 0)
                if result != 0 && result != ENOENT { dropped.append("\(path) (\(describe(result)))") }
            }
            return .success(FileDescriptor(rawValue: ruleset))
        }

        /// What every plugin may read (and write, for /dev/null): the common view's paths.
        private static func commonRules(inView: Bool) -> [(String, Bool)] {
            var rules: [(String, Bool)] = WorkerView.common.compactMap { operation in
                if case .bind(let source, let path, _) = operation { return (inView ? path : source, false) }
                return nil
            }
            rules += WorkerView.devices.map { ($0, $0 == "/dev/null") }
            rules.append((inView ? "/proc" : "/proc/self", false))
            return rules
        }
    }

    /// Why no ruleset could be prepared, in the words the launch reports.
    struct Unavailable: Error {
        let reason: String

        /// Whether the process ran under a seccomp filter it did not install: read when it
        /// probes, before its own.
        private static var underInheritedFilter: Bool {
            var mode: CInt = 0
            return plugind_confinement_get_seccomp_mode(&mode) == 0 && mode == 2
        }

        /// The version query failed with `errno`: a kernel without Landlock, or a filter that
        /// refuses the call.
        init(probing errno: CInt) {
            reason = FeatureProbeFailure(errno: errno).reason(
                feature: "Landlock", call: "landlock_create_ruleset", underInheritedFilter: Self.underInheritedFilter)
        }

        /// The kernel offers Landlock, but creating a ruleset failed with `errno`.
        init(creating errno: CInt) {
            let failure = FeatureProbeFailure(errno: errno)
            reason =
                failure == .refusedByFilter
                ? failure.reason(feature: "Landlock", call: "landlock_create_ruleset", underInheritedFilter: Self.underInheritedFilter)
                : "the ruleset could not be created: \(describe(errno))"
        }
    }

    /// `unavailable`: why there is no ruleset, when `prepared` is nil.
    static func filesystem(
        _ load: LoadConfiguration,
        request: ConfinementRequest,
        prepared: PreparedRulesets?,
        unavailable landlockUnavailable: String?,
        inView: Bool
    ) -> (filesystem: ConfinementLayerReport, signals: ConfinementLayerReport) {
        guard let prepared else {
            let reason = landlockUnavailable ?? "the kernel does not offer Landlock"
            return (unavailable(Layer.filesystem, reason), unavailable(Layer.signals, reason))
        }
        let abi = prepared.abi
        let ruleset = prepared.take(allowsNetwork: request.allowsNetwork).rawValue
        var dropped = prepared.dropped
        for (path, access) in pluginRules(load, inView: inView) {
            let result = plugind_confinement_landlock_allow(ruleset, abi, path, access)
            if result != 0 && result != ENOENT { dropped.append("\(path) (\(describe(result)))") }
        }
        // Rules left out are a filesystem layer short of what the host requires; a host that
        // accepts the layer missing gets the rest of it, as a best-effort host does.
        if !dropped.isEmpty && request.requires(Layer.filesystem) {
            close(ruleset)
            let reason = "cannot add rules for " + dropped.joinedSpecialized(separator: ", ")
            return (unavailable(Layer.filesystem, reason), unavailable(Layer.signals, reason))
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
        var detail =
            "Landlock ABI \(abi): read-only bundle and system libraries"
            + (grants > 0 ? ", plus \(grants) approved path(s)" : "")
            + (abi >= 4 && !request.allowsNetwork ? "; TCP bind/connect denied" : "")
        if !dropped.isEmpty { detail += "; rules left out: " + dropped.joinedSpecialized(separator: ", ") }
        let filesystemReport = applied(Layer.filesystem, detail)
        let signalsReport =
            abi >= 6
            ? applied(Layer.signals, "Landlock ABI \(abi): cannot signal processes or reach abstract sockets outside the sandbox")
            : unavailable(Layer.signals, "Landlock ABI \(abi) has no signal scoping (needs 6)")
        return (filesystemReport, signalsReport)
    }

    /// The plugin's own Landlock rules: what its view binds, its scratch space, its bundle.
    private static let commonBindPaths: Set<String> = Set(
        WorkerView.common.compactMap { operation in
            if case .bind(let source, let path, _) = operation, source == path { return path }
            return nil
        })

    /// Each path with the `writable` argument of `plugind_confinement_landlock_allow`: 0 to
    /// read, 1 to write, `PLUGIND_CONFINEMENT_WRITABLE_WITH_SYMLINKS` to write symlinks too (in
    /// write grants only when the manifest asks). Not in the scratch space either: Landlock's
    /// rights reach every path beneath a rule, a grant under /tmp included.
    private static func pluginRules(_ load: LoadConfiguration, inView: Bool) -> [(String, CInt)] {
        let grantAccess: CInt = load.confinement.allowsSymlinks ? PLUGIND_CONFINEMENT_WRITABLE_WITH_SYMLINKS : 1
        var rules: [(String, CInt)] = []
        for operation in load.view {
            switch operation {
            case .bind(let source, let path, let writable):
                // The prepared ruleset has the common view's directories read-only already.
                if !writable && commonBindPaths.contains(path) { continue }
                rules.append((inView ? path : source, writable ? grantAccess : 0))
            case .scratch(let path, _): rules.append((path, grantAccess))
            case .symlink, .directory, .sealed: break
            }
        }
        if !load.bundlePath.isEmpty { rules.append((load.bundlePath, 0)) }
        if inView { rules.append(("/.plugind", 0)) }
        return rules
    }
}
