import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem
import PlugindWire

/// Turns an identity into the bundle to launch, refusing it unless it is (still) approved and
/// enabled, and not quarantined. Checked at every launch, so a change of policy or bytes takes
/// effect at once.
package enum PluginResolution {
    /// The entry to launch for `identity`, with the approval it is launched under (nil for a
    /// plugin bundled with the host).
    package static func entry(for identity: AppExtensionIdentity, host: AppExtensionHost) throws(AppExtensionError) -> (
        CatalogEntry, Approval?
    ) {
        let id = identity.bundleIdentifier
        let roots = SearchRoot.roots(of: host)
        guard let entry = Catalog.shared.entry(atBundlePath: identity.bundlePath, roots: roots) else {
            throw AppExtensionError(.notFound, plugin: id, "is no longer installed at \(identity.bundlePath)")
        }
        switch entry {
        case .failure(let problem):
            throw AppExtensionError(.notFound, plugin: id, "cannot be used: \(problem.message)")
        case .success(let entry):
            guard entry.identifier == id else {
                throw AppExtensionError(.notFound, plugin: id, "\(identity.bundlePath) now holds \(entry.identifier)")
            }
            return (entry, try check(entry, host: host))
        }
    }

    /// Throws unless `entry` is usable under the current policy; returns the approval that makes
    /// it usable (nil for a plugin bundled with the host).
    @discardableResult
    static func check(_ entry: CatalogEntry, host: AppExtensionHost) throws(AppExtensionError) -> Approval? {
        let id = entry.identifier
        if let reason = HostCompatibility.problem(entry, host: host) {
            throw AppExtensionError(.unsupported, plugin: id, reason)
        }
        let policy = PolicySnapshot.read(for: host)
        if let error = policy.errors.first, !entry.root.isBundledWithHost {
            throw AppExtensionError(.notApproved, plugin: id, "cannot be approved while \(error)")
        }
        let evaluation = policy.evaluation(for: entry)
        let explanation = PolicyExplanation(decision: evaluation.decision, entry: entry, crashLog: CrashLog(host: host))
        if let refusal = explanation.launchRefusal(administratorDirectory: host.administratorPolicyDirectory.path) { throw refusal }
        return evaluation.approval
    }
}
