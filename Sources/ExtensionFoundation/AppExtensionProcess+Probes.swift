import FoundationEssentials
import Glibc
package import PlugindBundle
import PlugindEngine
import PlugindSystem
import PlugindWire

extension AppExtensionProcess {
    /// The confinement a worker for `item` gets on this machine, verified layer by layer by a
    /// worker that applies it and exits without opening the plugin's library, so it is safe for a
    /// plugin that is not approved yet. For `plugind info`.
    package static func probeConfinement(of item: Inventory.Item, host: AppExtensionHost) async throws -> [ConfinementLayer] {
        let ready = try await probe(item.entry, mode: .probeConfinement, host: host)
        return ready.confinement.map(ConfinementLayer.init)
    }

    /// What a confined worker finds when it opens the library of `bundle` without calling its
    /// init: entry point, ABI version, declared functions. For `plugind verify --load`, which the
    /// user asks for explicitly: the library's constructors run, so the worker gets none of the
    /// permissions the manifest asks for.
    ///
    /// - Throws: the `AppExtensionError` a launch would meet: `abiMismatch`, `symbolMissing`,
    ///   `pluginLoadFailed`, `workerCrashed` (a crash while loading), …
    package static func inspectLibrary(of bundle: InspectedBundle, host: AppExtensionHost) async throws -> LibraryInspection {
        let root = SearchRoot(path: bundle.bundlePath.deletingLastPathComponent, isBundledWithHost: false)
        let ready = try await probe(CatalogEntry(bundle: bundle, root: root), mode: .inspectLibrary, host: host, withoutPermissions: true)
        return LibraryInspection(abiVersion: ready.pluginABIVersion, hasEntryPoint: ready.hasRequestHandler, pluginName: ready.pluginName)
    }

    /// The result of `inspectLibrary`.
    package struct LibraryInspection: Sendable {
        package var abiVersion: UInt32
        package var hasEntryPoint: Bool
        package var pluginName: String
    }

    private static func probe(_ entry: CatalogEntry, mode: LoadMode, host: AppExtensionHost, withoutPermissions: Bool = false) async throws
        -> Ready
    {
        var plan = LaunchPlan(entry: entry, host: host, permissions: withoutPermissions ? Manifest.Permissions() : nil)
        plan.load.mode = mode
        let launched = try await WorkerLauncher.launch(plan, in: .current)
        launched.channel.invalidate(grace: plan.shutdownGracePeriod)
        _ = await launched.channel.termination()
        return launched.ready
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
