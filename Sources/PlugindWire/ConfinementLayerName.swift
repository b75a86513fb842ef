/// The names of the confinement layers, as reported in `Ready`, shown by `plugind info` and
/// named in the policy files' `acceptMissingLayers`.
package enum ConfinementLayerName {
    package static let filesystemView = "filesystem-view"
    package static let privileges = "privileges"
    package static let noNewPrivileges = "no-new-privileges"
    package static let notDumpable = "not-dumpable"
    package static let noCoreFiles = "no-core-files"
    package static let resourceLimits = "resource-limits"
    package static let systemCalls = "system-calls"
    package static let network = "network"
    package static let networkNamespace = "network-namespace"
    package static let filesystem = "filesystem"
    package static let signals = "signals"
    package static let processTree = "process-tree"
    package static let session = "session"

    /// Every layer, in the order the worker reports them.
    package static let all = [
        processTree, session, filesystemView, privileges, noNewPrivileges, notDumpable, noCoreFiles, resourceLimits, systemCalls,
        network, networkNamespace, filesystem, signals,
    ]

    /// The layers a mechanism stands for, when a policy names the mechanism ("landlock") rather
    /// than what the worker reports: for the message that refuses it.
    package static func layers(ofMechanism name: String) -> [String]? {
        switch name.lowercased() {
        case "landlock": [filesystem, signals]
        case "seccomp": [systemCalls, network]
        default: nil
        }
    }
}

/// The words of a load refused because layers the host requires cannot be applied: written by
/// the worker, read back by the host, which adds how this machine's policy could accept them.
package enum MissingLayersRefusal {
    package static let opening = "confinement layer '"
    package static let others = "; nor can "

    /// "confinement layer 'filesystem' cannot be applied: why; nor can 'signals'".
    package static func message(layers: [String], detail: String) -> String {
        var text = opening + (layers.first ?? "") + "' cannot be applied: " + detail
        if layers.count > 1 { text += others + layers.dropFirst().map { "'\($0)'" }.joined(separator: ", ") }
        return text
    }
}
