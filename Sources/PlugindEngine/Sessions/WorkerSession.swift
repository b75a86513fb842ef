package import PlugindBundle
import PlugindSystem
package import PlugindWire

/// One running worker and the `AppExtensionProcess` handles that claim it. Like Apple's
/// extension processes, a worker is shared by every handle of the same identity in this host
/// process (unless one asks for a dedicated worker): each handle is a claim, the last release
/// ends the worker, and every live handle hears of an interruption.
package final class WorkerSession: Sendable {
    package let channel: WorkerChannel
    package let ready: Ready
    /// Why the shared launch pool could not start this worker, if a launcher of its own did.
    package let launchFallbackCause: String?
    package let plan: LaunchPlan
    /// What was launched, for the policy checks while it runs.
    let entry: CatalogEntry
    let host: AppExtensionHost
    /// Where the session is registered for sharing; nil for a dedicated worker.
    let key: Key?
    /// The runtime that launched it, which it leaves when it ends.
    let runtime: PlugindRuntime

    /// Identifies the worker a new handle may attach to: the same host configuration, the same
    /// bundle (the same files, by identity) under the same approval.
    package struct Key: Hashable, Sendable {
        var host: AppExtensionHost
        var bundle: InspectedBundle
        var approvedDigest: String?
        var requiresEnhancedSecurity: Bool

        package init(host: AppExtensionHost, bundle: InspectedBundle, approvedDigest: String?, requiresEnhancedSecurity: Bool) {
            self.host = host
            self.bundle = bundle
            self.approvedDigest = approvedDigest
            self.requiresEnhancedSecurity = requiresEnhancedSecurity
        }
    }

    private struct Claims {
        var handlers: [Int: @Sendable () -> Void] = [:]
        var nextClaim = 0
        /// No new claims: the worker is ending (or ended).
        var closed = false
    }

    private let claims = Locked(Claims())

    package init(
        _ launched: WorkerLauncher.Launched, plan: LaunchPlan, entry: CatalogEntry, host: AppExtensionHost, key: Key?,
        runtime: PlugindRuntime
    ) {
        self.channel = launched.channel
        self.ready = launched.ready
        self.launchFallbackCause = launched.fallbackCause
        self.plan = plan
        self.entry = entry
        self.host = host
        self.key = key
        self.runtime = runtime
        launched.channel.setInterruptionHandler { [weak self] in self?.interrupted() }
    }

    /// A new claim with its interruption handler; nil when the worker is ending.
    package func claim(onInterruption: @escaping @Sendable () -> Void) -> Int? {
        if channel.isTerminated || channel.isInvalidated { return nil }
        return claims.withLock { claims -> Int? in
            guard !claims.closed else { return nil }
            let id = claims.nextClaim
            claims.nextClaim += 1
            claims.handlers[id] = onInterruption
            return id
        }
    }

    /// Gives a claim back; the last one ends the worker. True when this was the last.
    @discardableResult
    package func release(_ claim: Int) -> Bool {
        let last = claims.withLock { claims -> Bool in
            guard claims.handlers.removeValue(forKey: claim) != nil, claims.handlers.isEmpty, !claims.closed else { return false }
            claims.closed = true
            return true
        }
        if last {
            runtime.forget(self)
            channel.invalidate(grace: plan.shutdownGracePeriod)
        }
        return last
    }

    var isUsable: Bool {
        !channel.isTerminated && !channel.isInvalidated && !claims.withLock(\.closed)
    }

    /// The worker died without being asked to: every live handle hears of it, once.
    private func interrupted() {
        let handlers = claims.withLock { claims -> [@Sendable () -> Void] in
            claims.closed = true
            defer { claims.handlers.removeAll() }
            return claims.handlers.keys.sorted().compactMap { claims.handlers[$0] }
        }
        runtime.forget(self)
        for handler in handlers { handler() }
    }
}
