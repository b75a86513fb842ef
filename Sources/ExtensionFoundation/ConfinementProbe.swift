import PlugindWire

extension AppExtensionProcess {
    /// The confinement a worker for `identifier` gets on this machine, verified layer by layer by
    /// a worker that applies it and exits without loading the plugin's code, so it is safe for a
    /// plugin that is not approved yet. For `plugind info`. Linux addition.
    package static func probeConfinement(of item: Inventory.Item, host: AppExtensionHost) async throws -> [ConfinementLayer] {
        var plan = LaunchPlan(entry: item.entry, host: host)
        plan.load.probeOnly = true
        let (channel, ready) = try await WorkerLauncher.launch(plan)
        channel.invalidate(grace: plan.shutdownGracePeriod)
        _ = await channel.termination()
        return ready.confinement.map(ConfinementLayer.init)
    }
}

extension AppExtensionProcess.ConfinementLayer {
    init(_ report: ConfinementLayerReport) {
        let state: State
        switch report.state {
        case .applied: state = .applied
        case .notRequested: state = .notRequested
        case .unavailable: state = .unavailable
        }
        self.init(name: report.layer, state: state, detail: report.detail)
    }
}
