import PlugindSystem

/// Plans already made, by what they depend on: making one (the dependency walk, the view) would
/// otherwise be on every launch's path. Bounded; a changed bundle, approval, host or policy on
/// missing layers makes a new key. One per runtime (`PlugindRuntime.launchPlans`).
package final class LaunchPlanCache: Sendable {
    private struct Key: Hashable {
        var entry: CatalogEntry
        var host: AppExtensionHost
        var approval: Approval?
        var requiresEnhancedSecurity: Bool
        /// The machine's policy on missing layers as read for this launch: a change of it makes
        /// a new plan at the next launch, with no restart.
        var missingLayerPolicy: MissingLayerAcceptance?
    }

    private let plans = Locked<[Key: LaunchPlan]>([:])
    static let capacity = 64

    /// The plan for a launch of `entry`, made once per bundle, approval and host.
    package func plan(entry: CatalogEntry, host: AppExtensionHost, approval: Approval?, requiresEnhancedSecurity: Bool) -> LaunchPlan {
        let policy =
            LaunchPlan.appliesMissingLayerPolicy(host: host, requiresEnhancedSecurity: requiresEnhancedSecurity)
            ? MissingLayerAcceptance.read(for: host) : nil
        let key = Key(
            entry: entry, host: host, approval: approval, requiresEnhancedSecurity: requiresEnhancedSecurity, missingLayerPolicy: policy)
        if let known = plans.withLock({ $0[key] }) { return known }
        let plan = LaunchPlan(
            entry: entry, host: host, approval: approval, requiresEnhancedSecurity: requiresEnhancedSecurity, missingLayerPolicy: policy)
        // A plan made while the host could not read what it needed (out of descriptors, say) is
        // used once and made again next time, never kept as the plugin's lasting refusal.
        guard plan.isSettled else { return plan }
        plans.withLock { plans in
            if plans.count >= Self.capacity { plans.removeAll() }
            plans[key] = plan
        }
        return plan
    }

    func removeAll() {
        plans.withLock { $0.removeAll() }
    }
}
