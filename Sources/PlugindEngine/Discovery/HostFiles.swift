import FoundationEssentials
import Glibc
import PlugindSystem

/// The paths of a host's files as strings, derived from its URLs once per configuration rather
/// than at every launch (URL manipulation is a noticeable part of a launch's host-side time).
struct HostFiles: Sendable {
    let roots: [SearchRoot]
    let userPolicyFile: String
    let administratorPolicyDirectory: String
    let administratorPolicyFile: String
    let crashLogFile: String

    private init(_ host: AppExtensionHost) {
        var roots: [SearchRoot] = []
        if let bundled = host.bundledPluginsDirectory {
            roots.append(SearchRoot(path: bundled.path, isBundledWithHost: true))
        }
        roots += host.searchPaths.map { SearchRoot(path: $0.path, isBundledWithHost: false) }
        // Last: the bundles discovery made for the machine's LADSPA and frei0r plugins.
        roots.append(SearchRoot(path: ForeignPluginBundles.root(stateDirectory: host.stateDirectory.path), isBundledWithHost: false))
        self.roots = roots
        userPolicyFile = host.policyDirectory.path + "/" + PolicyDocument.fileName
        administratorPolicyDirectory = host.administratorPolicyDirectory.path
        administratorPolicyFile = administratorPolicyDirectory + "/" + PolicyDocument.fileName
        crashLogFile = host.stateDirectory.path + "/" + CrashLog.fileName
    }

    /// The last host asked about, which is nearly always the next one.
    private static let last = Locked<(host: AppExtensionHost, files: HostFiles)?>(nil)

    static func of(_ host: AppExtensionHost) -> HostFiles {
        if let cached = last.withLock({ $0 }), cached.host == host { return cached.files }
        let files = HostFiles(host)
        last.withLock { $0 = (host, files) }
        return files
    }
}
