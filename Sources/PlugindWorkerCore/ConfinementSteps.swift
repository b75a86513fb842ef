package import PlugindWire

/// One step of a worker's confinement, as data: what it is, the layers it reports, whether a
/// best-effort host runs without it, what its failure says, and how the host's measurement turns
/// it off. The worker's steps are `table`, in the order the worker applies them; one loop
/// (`ConfinementSteps.run`) runs them, as bubblewrap runs its setup operations, and the worker
/// supplies only what each step does to the process (`Confinement.apply`).
package struct ConfinementStep: Equatable, Sendable {
    /// Which step: what the worker's action for it is chosen by.
    package enum ID: String, Equatable, Sendable, CaseIterable {
        case sealedCopies = "sealed-copies"
        case processTree = "process-tree"
        case session
        case filesystemView = "filesystem-view"
        case privileges
        case noNewPrivileges = "no-new-privileges"
        case notDumpable = "not-dumpable"
        case noCoreFiles = "no-core-files"
        case resourceLimits = "resource-limits"
        case systemCalls = "system-calls"
        case network
        case networkNamespace = "network-namespace"
        case landlock
        case hostTreeClosed = "host-tree-closed"
    }

    /// What an `unavailable` report of the step makes of the load.
    package enum Failure: Equatable, Sendable {
        /// "confinement layer 'L' cannot be applied: why", for a host that requires every layer.
        case layerCannotBeApplied
        /// The report's own words: no plugin code may run without the step, whatever the host
        /// requires.
        case loadRefused

        package func message(_ report: ConfinementLayerReport) -> String {
            message([report])
        }

        /// The message for the step's reports that fail the load (one or more): the first one's
        /// words, naming the others, so that a host says how to accept all of them at once.
        package func message(_ reports: [ConfinementLayerReport]) -> String {
            switch self {
            case .layerCannotBeApplied: MissingLayersRefusal.message(layers: reports.map(\.layer), detail: reports.first?.detail ?? "")
            case .loadRefused: reports.first?.detail ?? ""
            }
        }
    }

    /// How the host turns a step off for measurement (`plugind-bench`): the entry of
    /// `ConfinementRequest.skippedLayers` that does, and what is reported instead.
    package struct Skip: Equatable, Sendable {
        package let by: String
        package let reports: [ConfinementLayerReport]
    }

    package let id: ID
    /// What the step does, in words.
    package let name: String
    /// The layers the step reports, in order; none for a check, whose report is not recorded.
    package let layers: [String]
    /// Whether a host that does not require every layer runs without it (its `unavailable`
    /// reports are recorded and the next step runs); a step that may not be missing fails every
    /// load it does not hold for.
    package let mayBeMissing: Bool
    package let failure: Failure
    package let skip: Skip?

    /// A layer: reported, and missing only for a best-effort host.
    static func layer(_ id: ID, _ name: String, _ layers: [String], skip: Skip? = nil) -> ConfinementStep {
        ConfinementStep(id: id, name: name, layers: layers, mayBeMissing: true, failure: .layerCannotBeApplied, skip: skip)
    }

    /// A check no plugin code may run without: not reported, never missing.
    static func check(_ id: ID, _ name: String) -> ConfinementStep {
        ConfinementStep(id: id, name: name, layers: [], mayBeMissing: false, failure: .loadRefused, skip: nil)
    }

    /// Turned off by the host with `layer`, reporting each of `layers` not requested with `detail`.
    static func skipped(
        by layer: String, reporting layers: [String], _ detail: String = "turned off by the host for measurement"
    ) -> Skip {
        Skip(by: layer, reports: layers.map { ConfinementLayerReport(layer: $0, state: .notRequested, detail: detail) })
    }

    /// The worker's steps in the order it applies them. The order is the confinement's own: the
    /// view before the privileges end, while the process still holds the capabilities it needs
    /// for it; no new privileges before the seccomp filter, which requires it; the filter after every step that
    /// makes a call it refuses (mounts, keyrings, capability changes) and before the network
    /// check that relies on it; Landlock last, since a domain in force refuses the mount changes
    /// the view makes; then the check that nothing of the host's tree is left open.
    ///
    /// No step runs between a fork and an exec: a worker confines itself after it was exec'd, or
    /// in a child of the single-threaded launcher, which forks without exec.
    package static let table: [ConfinementStep] = {
        typealias Layer = ConfinementLayerName
        return [
            .check(.sealedCopies, "make the sealed copies the plugin's own"),
            .layer(.processTree, "pid 1 of its own pid namespace", [Layer.processTree]),
            .layer(.session, "a session of its own", [Layer.session]),
            .layer(
                .filesystemView, "complete and enter the view", [Layer.filesystemView],
                skip: skipped(by: Layer.filesystemView, reporting: [Layer.filesystemView])),
            .layer(.privileges, "take the plugin's ids, end every capability", [Layer.privileges]),
            .layer(.noNewPrivileges, "no new privileges", [Layer.noNewPrivileges]),
            .layer(.notDumpable, "not dumpable", [Layer.notDumpable]),
            .layer(.noCoreFiles, "no core files", [Layer.noCoreFiles]),
            .layer(.resourceLimits, "resource limits", [Layer.resourceLimits]),
            .layer(
                .systemCalls, "install the seccomp filter", [Layer.systemCalls],
                skip: skipped(by: Layer.systemCalls, reporting: [Layer.systemCalls])),
            .layer(
                .network, "check that the filter refuses sockets", [Layer.network],
                skip: skipped(
                    by: Layer.systemCalls, reporting: [Layer.network], "turned off with the system-call layer, for measurement")),
            .layer(
                .networkNamespace, "a network namespace of its own", [Layer.networkNamespace],
                skip: skipped(by: Layer.networkNamespace, reporting: [Layer.networkNamespace])),
            .layer(
                .landlock, "enforce the Landlock ruleset", [Layer.filesystem, Layer.signals],
                skip: skipped(by: Layer.filesystem, reporting: [Layer.filesystem])),
            .check(.hostTreeClosed, "no descriptor of the host's tree left open"),
        ]
    }()
}

/// The loop that runs confinement steps.
package enum ConfinementSteps {
    /// Runs `steps` in order and returns the reports of their layers. A step the host turned off
    /// (`request.skippedLayers`) gets `skipped` (what turning it off takes, if anything) and its
    /// `notRequested` reports; any other gets `apply`, which is given the reports so far (a step
    /// may depend on how an earlier one went) and returns what it found. An `unavailable` report
    /// fails the load when the host requires its layer (every layer, less those this machine's
    /// policy accepts as missing: `ConfinementRequest.requires`) or the step may not be missing;
    /// otherwise it is recorded and the next step runs. `apply` and `skipped` may also fail the
    /// load themselves, for what no host runs without (the plugin's bundle gone, say).
    package static func run(
        _ steps: [ConfinementStep] = ConfinementStep.table,
        request: ConfinementRequest,
        apply: (ConfinementStep, _ reports: [ConfinementLayerReport]) throws(LoadFailure) -> [ConfinementLayerReport],
        skipped: (ConfinementStep) throws(LoadFailure) -> Void = { _ in }
    ) throws(LoadFailure) -> [ConfinementLayerReport] {
        var reports: [ConfinementLayerReport] = []
        for step in steps {
            let found: [ConfinementLayerReport]
            if let skip = step.skip, request.skippedLayers.contains(skip.by) {
                try skipped(step)
                found = skip.reports
            } else {
                found = try apply(step, reports)
            }
            for report in found {
                assert(step.layers.isEmpty || step.layers.contains(report.layer), "step \(step.id) reported layer \(report.layer)")
            }
            let refusing = found.filter { $0.state == .unavailable && (!step.mayBeMissing || request.requires($0.layer)) }
            if !refusing.isEmpty { throw LoadFailure(kind: .confinementFailed, message: step.failure.message(refusing)) }
            if !step.layers.isEmpty { reports += found }
        }
        return reports
    }
}
