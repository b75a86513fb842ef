import PlugindWire

/// The confinement layers this machine's policy accepts as missing (`acceptMissingLayers` in the
/// policy files), for every launch of a host that requires every layer: Swift hosts, `plugind`'s
/// commands, the C and Python hosts alike.
///
/// The administrator's layers hold for every user; the owner's are added to them, unless the
/// administrator's file says `"ownersMayAcceptMissingLayers": false`. A file that cannot be used
/// accepts nothing, and an administrator's file that cannot be used leaves the owner's unused too
/// (whether owners may add is not known): a missing layer then refuses as it does with nothing
/// stated. A process whose extension point requires enhanced security requires every layer
/// whatever the policy says.
package struct MissingLayerAcceptance: Sendable, Hashable {
    /// Accepted by the administrator, for every user.
    package var administrator: [String] = []
    /// Accepted by the owner, for their own hosts (empty when they may not add any).
    package var owner: [String] = []
    /// Whether the administrator lets owners accept missing layers.
    package var ownersMayAccept = true
    /// The owner's and the administrator's policy files, for the words that say how to accept a
    /// layer.
    package var ownerFile: String
    package var administratorFile: String

    package init(ownerFile: String, administratorFile: String) {
        self.ownerFile = ownerFile
        self.administratorFile = administratorFile
    }

    /// What `user` (the owner's file) and `administrator` say; nil for a file that could not be
    /// used.
    package init(user: PolicyDocument?, administrator: PolicyDocument?, ownerFile: String, administratorFile: String) {
        self.init(ownerFile: ownerFile, administratorFile: administratorFile)
        guard let administrator else { return }
        self.administrator = administrator.acceptMissingLayers
        ownersMayAccept = administrator.ownersMayAcceptMissingLayers ?? true
        if ownersMayAccept, let user { owner = user.acceptMissingLayers }
    }

    /// The policy of `host` as its files are now (each decoded only when it changed).
    package static func read(for host: AppExtensionHost) -> MissingLayerAcceptance {
        let files = HostFiles.of(host)
        return MissingLayerAcceptance(
            user: try? PolicyDocument.load(from: files.userPolicyFile).get(),
            administrator: try? PolicyDocument.load(from: files.administratorPolicyFile).get(),
            ownerFile: files.userPolicyFile, administratorFile: files.administratorPolicyFile)
    }

    /// Every layer accepted as missing, in the order the worker reports them.
    package var layers: [String] {
        ConfinementLayerName.all.filter { administrator.contains($0) || owner.contains($0) }
    }

    /// Whose files accept `layer`: the paths, the administrator's first; empty when none does.
    package func acceptedBy(_ layer: String) -> [String] {
        (administrator.contains(layer) ? [administratorFile] : []) + (owner.contains(layer) ? [ownerFile] : [])
    }

    /// How to run plugins without `layers` on this machine, for the message of a launch they
    /// refused: the command, and the files it writes.
    package func advice(accepting layers: [String]) -> String {
        let (it, names) = layers.count == 1 ? ("it", "\"\(layers[0])\"") : ("them", layers.map { "\"\($0)\"" }.joined(separator: " and "))
        let words = layers.joined(separator: " ")
        guard ownersMayAccept else {
            return "to run plugins without \(it) on this machine, the administrator can run 'plugind policy accept-missing \(words) "
                + "--administrator' (adds \(names) to acceptMissingLayers in \(administratorFile); the administrator's policy does "
                + "not let owners accept missing layers; see plugind-policy(5))"
        }
        return "to run plugins without \(it) on this machine, run 'plugind policy accept-missing \(words)' (adds \(names) to "
            + "acceptMissingLayers in \(ownerFile); with --administrator, as root, in \(administratorFile) for every user; "
            + "see plugind-policy(5))"
    }

    /// `error` with the advice appended when it is a launch refused for layers the host requires
    /// and the policy could accept; else `error` unchanged.
    package func advised(_ error: AppExtensionError) -> AppExtensionError {
        guard error.code == .confinementUnavailable, let missing = MissingLayersRefusal.layers(in: error.reason) else { return error }
        // A load refused: no stack to keep.
        return AppExtensionError(
            error.code, plugin: error.pluginIdentifier, error.reason + "; " + advice(accepting: missing),
            termination: error.termination, exceededLimit: error.exceededLimit, pluginErrorCode: error.pluginErrorCode,
            standardErrorTail: error.standardErrorTail, underlying: error.underlying)
    }
}

// Read by hosts only: the search and split below come from `_StringProcessing`, which the worker
// (linking PlugindWire, where the message is written) must not link.
extension MissingLayersRefusal {
    /// The layers `message` names, when it is such a refusal.
    package static func layers(in message: String) -> [String]? {
        guard message.hasPrefix(opening) else { return nil }
        let rest = message.dropFirst(opening.count)
        guard let close = rest.firstIndex(of: "'"), ConfinementLayerName.all.contains(String(rest[..<close])) else { return nil }
        var layers = [String(rest[..<close])]
        // The others close the message: quoted names after the last "; nor can ".
        var tail = Substring(message)
        while let next = tail.firstRange(of: others) { tail = tail[next.upperBound...] }
        guard tail.count < message.count else { return layers }
        let named = tail.split(separator: ", ").map { String($0.dropFirst().dropLast()) }
        if tail.split(separator: ", ").allSatisfy({ $0.hasPrefix("'") && $0.hasSuffix("'") }),
            named.allSatisfy(ConfinementLayerName.all.contains)
        {
            layers += named
        }
        return layers
    }
}
