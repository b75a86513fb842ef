import Foundation
import PlugindBundle
package import PlugindWire

/// Everything needed to start one worker for one plugin, derived from its catalog entry, the
/// host's caps and the extension point.
package struct LaunchPlan: Sendable {
    let pluginIdentifier: String
    package var load: LoadConfiguration
    package let requestTimeout: Duration
    let launchTimeout: Duration
    let shutdownGracePeriod: Duration
    let cancellationGracePeriod: Duration
    let workerExecutable: URL?
    let launchStrategy: AppExtensionHost.LaunchStrategy

    package init(entry: CatalogEntry, host: AppExtensionHost, requiresEnhancedSecurity: Bool = false) {
        let manifest = entry.manifest
        let caps = host.limits
        func capped(_ requested: UInt64?, _ cap: UInt64) -> UInt64 {
            min(requested ?? cap, cap)
        }
        let limits = ResourceLimits(
            addressSpaceBytes: capped(manifest.limits.memoryBytes, caps.memoryBytes),
            cpuSeconds: capped(manifest.limits.cpuSeconds, caps.cpuSeconds),
            openFiles: capped(manifest.limits.openFiles, caps.openFiles),
            maxMessageBytes: capped(manifest.limits.maxMessageBytes, caps.maxMessageBytes)
        )
        var requestTimeout = caps.requestTimeout
        if let milliseconds = manifest.limits.requestTimeoutMilliseconds {
            requestTimeout = min(.milliseconds(Int64(clamping: milliseconds)), caps.requestTimeout)
        }
        let strict = host.confinement == .required || requiresEnhancedSecurity
        let confinement = ConfinementRequest(
            allowsNetwork: manifest.permissions.network,
            readablePaths: manifest.permissions.read,
            writablePaths: manifest.permissions.write,
            requiresEveryLayer: strict,
            disabled: host.confinement == .disabled && !requiresEnhancedSecurity
        )
        self.pluginIdentifier = manifest.identifier
        self.load = LoadConfiguration(
            pluginIdentifier: manifest.identifier,
            libraryPath: entry.bundle.libraryPath,
            bundlePath: entry.bundle.bundlePath,
            libraryFile: entry.bundle.libraryStatus.identity,
            functions: manifest.functions,
            requiresEntryPoint: manifest.functions.isEmpty,
            limits: limits,
            confinement: confinement
        )
        self.requestTimeout = requestTimeout
        self.launchTimeout = host.launchTimeout
        self.shutdownGracePeriod = host.shutdownGracePeriod
        self.cancellationGracePeriod = host.cancellationGracePeriod
        self.workerExecutable = host.workerExecutable
        self.launchStrategy = host.launchStrategy
    }
}
