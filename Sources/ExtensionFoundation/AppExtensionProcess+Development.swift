import FoundationEssentials
import Glibc
package import PlugindBundle
import PlugindEngine
import PlugindSystem

extension AppExtensionProcess {
    /// A process of a bundle that is neither installed nor approved, for `plugind dev`: confined
    /// exactly as an approved plugin with the permissions its manifest asks for, in a worker of
    /// its own. No host lists the bundle (it is in no search path), no approval is written, its
    /// crashes go to no crash log (they would quarantine the installed plugin of the same
    /// identifier) and the owner's policy does not end it: the caller, the owner's own command,
    /// is the only one that decides.
    ///
    /// - Parameter inspected: the bundle as `BundleInspector` found it (the checks a catalog makes).
    /// - Throws: what a launch throws.
    package static func development(_ inspected: InspectedBundle, host: AppExtensionHost) async throws -> AppExtensionProcess {
        let path = inspected.bundlePath
        let entry = CatalogEntry(
            bundle: inspected, root: SearchRoot(path: path.deletingLastPathComponent, isBundledWithHost: false))
        // No approval: the grants the manifest asks for are resolved now, as for a bundled plugin.
        let plan = LaunchPlan(entry: entry, host: host)
        let runtime = PlugindRuntime.current
        try runtime.checkRunning(for: entry.identifier)
        let launched = try await WorkerLauncher.launch(plan, in: runtime)
        let session = WorkerSession(launched, plan: plan, entry: entry, host: host, key: nil, runtime: runtime)
        guard let claim = session.claim(onInterruption: {}) else {
            throw AppExtensionError(.workerExited, plugin: entry.identifier, "its worker ended as it started")
        }
        let manifest = inspected.manifest
        let identity = AppExtensionIdentity(
            bundleIdentifier: manifest.identifier, extensionPointIdentifier: manifest.extensionPoint, localizedName: manifest.name,
            bundlePath: inspected.bundlePath, capabilities: manifest.capabilities, host: host)
        var configuration = Configuration(appExtensionIdentity: identity)
        configuration.host = host
        configuration.sharing = .dedicated
        return AppExtensionProcess(configuration: configuration, session: session, claim: claim)
    }
}
