public import FoundationEssentials
import PlugindEngine
import PlugindTypes

/// What `scanForeignPlugins` found: each plugin listed, and each library that could not be used.
public struct ForeignPluginScan: Sendable, Hashable {
    public struct Plugin: Sendable, Hashable {
        /// `ladspa.<library>.<label>` or `frei0r.<library>`, the identity it is listed, approved
        /// and launched under.
        public let identifier: String
        /// "ladspa" or "frei0r".
        public let abi: String
        public let library: String
        public let name: String
        /// Ports or parameters, maker or author, properties.
        public let summary: String
    }

    public struct Failure: Sendable, Hashable {
        public let library: String
        public let reason: String
    }

    public let plugins: [Plugin]
    public let failures: [Failure]
    /// Libraries described by a scanning worker now, and those whose description was kept.
    public let scanned: Int
    public let reused: Int
}

extension AppExtensionHost {
    /// Finds the machine's LADSPA and frei0r plugins and lists each through a bundle of its own,
    /// for the extension points `org.plugind.ladspa` and `org.plugind.frei0r` (Linux addition;
    /// what `plugind scan` does). The directories are `LADSPA_PATH` (else `~/.ladspa`),
    /// `/usr/local/lib/ladspa`, `/usr/lib/ladspa`, and `FREI0R_PATH` (else `~/.frei0r-1/lib`),
    /// `/usr/local/lib/frei0r-1`, `/usr/lib/frei0r-1`, from `environment`. Each library is
    /// described by a confined worker with no permissions, once per version of its bytes; one
    /// that is not root's, crashes, hangs past `timeout` or is no library is reported and the
    /// rest are listed. Monitors see the plugins appear; nothing runs before it is approved.
    public func scanForeignPlugins(
        environment: [String: String] = ProcessInfo.processInfo.environment, timeout: Duration = .seconds(30)
    ) async throws -> ForeignPluginScan {
        let report = try await ForeignPluginDiscovery.refresh(
            host: self, directories: ForeignPluginDirectory.defaults(environment: environment), scanTimeout: timeout)
        return ForeignPluginScan(
            plugins: report.plugins.map {
                .init(identifier: $0.identifier, abi: $0.abi, library: $0.library, name: $0.name, summary: $0.summary)
            },
            failures: report.failures.map { .init(library: $0.library, reason: $0.reason) }, scanned: report.scanned,
            reused: report.reused)
    }
}
