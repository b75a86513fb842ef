import Glibc
import PlugindWire
import PlugindWorkerCore
import TestSupport
import Testing

/// The worker's confinement steps as data and the loop that runs them, with steps that make no
/// system call: the order, what a missing layer does to a host requiring every layer and to a
/// best-effort one, what the host's measurement turns off; and how a failed probe of a kernel
/// feature is told apart from a filter that refuses it.
@Suite("Confinement steps: the order and what a missing layer does", .tags(.unit))
struct ConfinementStepsTests {
    typealias Layer = ConfinementLayerName

    /// Runs the table with every step applied (or as `outcome` says), and records what ran.
    struct Run {
        var request = ConfinementRequest()
        var outcome: [String: ConfinementLayerReport.State] = [:]
        var applied: [ConfinementStep.ID] = []
        var skipped: [ConfinementStep.ID] = []
        var seen: [ConfinementStep.ID: [String]] = [:]

        mutating func run(_ steps: [ConfinementStep] = ConfinementStep.table) throws(LoadFailure) -> [ConfinementLayerReport] {
            let outcome = outcome
            var applied: [ConfinementStep.ID] = []
            var skipped: [ConfinementStep.ID] = []
            var seen: [ConfinementStep.ID: [String]] = [:]
            defer {
                self.applied = applied
                self.skipped = skipped
                self.seen = seen
            }
            return try ConfinementSteps.run(
                steps, request: request,
                apply: { step, reports in
                    applied.append(step.id)
                    seen[step.id] = reports.map(\.layer)
                    let layers = step.layers.isEmpty ? [""] : step.layers
                    return layers.map { layer in
                        let state = outcome[layer.isEmpty ? step.id.rawValue : layer] ?? .applied
                        return ConfinementLayerReport(layer: layer, state: state, detail: "\(step.id.rawValue) \(state)")
                    }
                },
                skipped: { step in skipped.append(step.id) })
        }
    }

    static let layerOrder = [
        Layer.processTree, Layer.session, Layer.filesystemView, Layer.privileges, Layer.noNewPrivileges, Layer.notDumpable,
        Layer.noCoreFiles, Layer.resourceLimits, Layer.systemCalls, Layer.network, Layer.networkNamespace, Layer.filesystem,
        Layer.signals,
    ]

    @Test("the table holds every step once, in the order of Documentation/Architecture.md, checks first and last")
    func order() {
        let table = ConfinementStep.table
        #expect(Set(table.map(\.id)) == Set(ConfinementStep.ID.allCases))
        #expect(table.count == ConfinementStep.ID.allCases.count)
        #expect(table.flatMap(\.layers) == Self.layerOrder)
        #expect(table.first?.id == .sealedCopies)
        #expect(table.last?.id == .hostTreeClosed)
        for step in table {
            // A layer may be missing for a best-effort host and says which; a check never is.
            #expect(step.mayBeMissing == !step.layers.isEmpty, "\(step.id)")
            #expect(step.failure == (step.layers.isEmpty ? .loadRefused : .layerCannotBeApplied), "\(step.id)")
        }
    }

    @Test("every step applied: each layer reported once, in order; checks are not reported")
    func allApplied() throws {
        var run = Run()
        let reports = try run.run()
        #expect(reports.map(\.layer) == Self.layerOrder)
        #expect(reports.allSatisfy { $0.state == .applied })
        #expect(run.applied == ConfinementStep.table.map(\.id))
        #expect(run.skipped.isEmpty)
    }

    @Test("a step sees the reports of the steps before it")
    func earlierReports() throws {
        var run = Run()
        _ = try run.run()
        #expect(run.seen[.network] == Array(Self.layerOrder.prefix(while: { $0 != Layer.network })))
        #expect(run.seen[.sealedCopies] == [])
    }

    @Test(
        "a host requiring every layer refuses at the first missing one, naming it, and runs nothing after",
        arguments: [Layer.processTree, Layer.filesystemView, Layer.systemCalls, Layer.signals])
    func strictRefuses(_ layer: String) throws {
        var run = Run()
        run.outcome[layer] = .unavailable
        let step = try #require(ConfinementStep.table.first { $0.layers.contains(layer) })
        #expect(
            throws: LoadFailure(
                kind: .confinementFailed, message: "confinement layer '\(layer)' cannot be applied: \(step.id.rawValue) unavailable")
        ) {
            try run.run()
        }
        #expect(run.applied.last == step.id)
        #expect(!run.applied.contains(.hostTreeClosed))
    }

    @Test(
        "a best-effort host records the missing layer and goes on",
        arguments: [Layer.processTree, Layer.filesystemView, Layer.systemCalls, Layer.signals])
    func bestEffortGoesOn(_ layer: String) throws {
        var run = Run()
        run.request.requiresEveryLayer = false
        run.outcome[layer] = .unavailable
        let reports = try run.run()
        #expect(reports.map(\.layer) == Self.layerOrder)
        #expect(reports.filter { $0.state == .unavailable }.map(\.layer) == [layer])
        #expect(run.applied == ConfinementStep.table.map(\.id))
    }

    @Test(
        "a check that fails refuses even a best-effort host, in its own words",
        arguments: [ConfinementStep.ID.sealedCopies, .hostTreeClosed])
    func checkRefusesEveryHost(_ id: ConfinementStep.ID) {
        var run = Run()
        run.request.requiresEveryLayer = false
        run.outcome[id.rawValue] = .unavailable
        #expect(throws: LoadFailure(kind: .confinementFailed, message: "\(id.rawValue) unavailable")) { try run.run() }
        #expect(run.applied.last == id)
    }

    @Test("a failure a step throws itself ends the run whatever the host requires")
    func thrownFailure() {
        let failure = LoadFailure(kind: .bundleChanged, message: "its bundle was removed")
        var applied: [ConfinementStep.ID] = []
        #expect(throws: failure) {
            try ConfinementSteps.run(
                request: ConfinementRequest(requiresEveryLayer: false),
                apply: { step, _ throws(LoadFailure) in
                    applied.append(step.id)
                    if step.id == .filesystemView { throw failure }
                    return step.layers.map { ConfinementLayerReport(layer: $0, state: .applied, detail: "") }
                })
        }
        #expect(applied == [.sealedCopies, .processTree, .session, .filesystemView])
    }

    @Test("the system-call layer turned off for measurement takes the network check with it")
    func skippedSystemCalls() throws {
        var run = Run()
        run.request.skippedLayers = [Layer.systemCalls]
        let reports = try run.run()
        #expect(run.skipped == [.systemCalls, .network])
        #expect(!run.applied.contains(.systemCalls) && !run.applied.contains(.network))
        #expect(reports.map(\.layer) == Self.layerOrder)
        #expect(
            reports.filter { $0.state == .notRequested } == [
                ConfinementLayerReport(layer: Layer.systemCalls, state: .notRequested, detail: "turned off by the host for measurement"),
                ConfinementLayerReport(
                    layer: Layer.network, state: .notRequested, detail: "turned off with the system-call layer, for measurement"),
            ])
    }

    @Test("Landlock turned off for measurement reports its filesystem layer only; a skipped step never fails a strict host")
    func skippedLandlock() throws {
        var run = Run()
        run.request.skippedLayers = [Layer.filesystem, Layer.filesystemView, Layer.networkNamespace]
        run.outcome[Layer.signals] = .unavailable
        let reports = try run.run()
        #expect(run.skipped == [.filesystemView, .networkNamespace, .landlock])
        #expect(!reports.contains { $0.layer == Layer.signals })
        #expect(reports.last?.layer == Layer.filesystem)
        #expect(reports.allSatisfy { $0.state != .unavailable })
    }

    @Test("a layer name the table does not know turns nothing off")
    func unknownSkip() throws {
        var run = Run()
        run.request.skippedLayers = [Layer.privileges, "no-such-layer"]
        _ = try run.run()
        // Only the steps the table lets the host turn off can be turned off.
        #expect(run.skipped.isEmpty)
    }

    // MARK: Telling a kernel without a feature from a filter that refuses it

    @Test(
        "the errno of a probe says whether the kernel lacks the feature or a filter refuses the call",
        arguments: [
            (ENOSYS, FeatureProbeFailure.notInKernel), (EOPNOTSUPP, .notEnabled), (EPERM, .refusedByFilter), (EINVAL, .failed(EINVAL)),
            (EACCES, .failed(EACCES)),
        ])
    func classification(_ errno: CInt, _ expected: FeatureProbeFailure) {
        #expect(FeatureProbeFailure(errno: errno) == expected)
    }

    @Test("each is said in its own words")
    func reasons() {
        func reason(_ errno: CInt, inherited: Bool = false) -> String {
            FeatureProbeFailure(errno: errno).reason(feature: "Landlock", call: "landlock_create_ruleset", underInheritedFilter: inherited)
        }
        #expect(reason(ENOSYS) == "the kernel does not offer Landlock (ENOSYS)")
        // Podman's profiles answer ENOSYS for calls they do not know: under a filter of someone
        // else's, ENOSYS is not the kernel's for certain. Both start as the kernel's answer does.
        #expect(
            reason(ENOSYS, inherited: true)
                == "the kernel does not offer Landlock (ENOSYS), or the seccomp filter this process was started under hides landlock_create_ruleset"
        )
        #expect(reason(EOPNOTSUPP) == "the kernel does not offer Landlock: built in but not enabled at boot (EOPNOTSUPP)")
        for inherited in [false, true] {
            #expect(
                reason(EPERM, inherited: inherited)
                    == "a seccomp filter of this container or service refuses landlock_create_ruleset (EPERM); the kernel may support Landlock"
            )
        }
        #expect(reason(EINVAL) == "landlock_create_ruleset failed: Invalid argument")
    }
}
