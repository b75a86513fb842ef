import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem
import PlugindWire

extension Manifest.Limits {
    /// The limits as an approval records them: field name → value, absent fields left out.
    package var recorded: [String: UInt64] {
        let fields: [(String, UInt64?)] = [
            ("memoryBytes", memoryBytes), ("cpuSeconds", cpuSeconds), ("openFiles", openFiles),
            ("requestTimeoutMilliseconds", requestTimeoutMilliseconds), ("maxMessageBytes", maxMessageBytes),
            ("threads", threads), ("scratchBytes", scratchBytes),
        ]
        return Dictionary(uniqueKeysWithValues: fields.compactMap { name, value in value.map { (name, $0) } })
    }

    /// The limits that are higher than `approved` allowed, by name. A limit left out means the
    /// host's default, which counts as higher than any stated value.
    package func raises(beyond approved: [String: UInt64]) -> [String] {
        let now = recorded
        let names = ["memoryBytes", "cpuSeconds", "openFiles", "requestTimeoutMilliseconds", "maxMessageBytes", "threads", "scratchBytes"]
        return names.filter { name in
            guard let before = approved[name] else { return false }
            guard let after = now[name] else { return true }
            return after > before
        }
    }
}

/// The rule that keeps an approval across a publisher's updates: a version signed by the key the
/// owner approved, asking for no more permissions and no higher limits, is approved as it is —
/// its own bytes pinned in a successor approval, so that a launch still loads exactly what was
/// checked here.
enum PublisherUpdate {
    /// The successor approval for `entry`, or why the update does not keep `approval`; nil when
    /// `approval` names no publisher.
    static func successor(of approval: Approval, for entry: CatalogEntry, hashes: ContentHashes) -> Result<Approval, Refusal>? {
        guard let key = approval.publisherKey else { return nil }
        let bundle = entry.bundle
        let approvedKey = (Data(base64Encoded: key)).flatMap { try? PublisherKeys.PublicKey(raw: [UInt8]($0)) }
        let approvedName = approvedKey?.fingerprint ?? "an unreadable key"
        guard !bundle.usesSystemLibrary else { return .failure(Refusal("its library is now a system library, which no signature covers")) }
        guard let digest = try? hashes.digest(of: bundle) else { return .failure(Refusal("a file of the new version cannot be read")) }
        switch BundleSignature.status(ofBundleAt: bundle.bundlePath, digest: digest.digest) {
        case .unsigned:
            return .failure(Refusal("this version is unsigned; the approved one was signed by \(approvedName)"))
        case .invalid(let reason, _):
            return .failure(Refusal("this version's signature is invalid (\(reason)); the approved one was signed by \(approvedName)"))
        case .valid(let signer) where signer != approvedKey:
            return .failure(Refusal("this version is signed by \(signer.fingerprint), not by the approved publisher \(approvedName)"))
        case .valid:
            break
        }
        let manifest = bundle.manifest
        if let refusal = versionRefusal(manifest.version, approved: approval.version) { return .failure(refusal) }
        let added = manifest.permissions.additions(beyond: approval.permissions)
        guard added.isEmpty else {
            return .failure(Refusal("this version by the same publisher also asks for " + added.joined(separator: ", ")))
        }
        guard let approvedLimits = approval.limits else {
            return .failure(Refusal("the approval does not record the limits it allowed (it is older than publisher updates)"))
        }
        let raised = manifest.limits.raises(beyond: approvedLimits)
        guard raised.isEmpty else {
            return .failure(Refusal("this version by the same publisher asks for higher limits: " + raised.joined(separator: ", ")))
        }
        var identities: [String: FileIdentity] = [:]
        for file in bundle.contents.regularFiles { identities[file.path] = file.status.identity }
        let grants = approval.resolvedGrants.filter {
            manifest.permissions.read.contains($0.key) || manifest.permissions.write.contains($0.key)
        }
        return .success(
            Approval(
                bundlePath: bundle.bundlePath, bundleDigest: digest.digest, files: digest.files, fileIdentities: identities,
                systemLibrary: nil, permissions: manifest.permissions, resolvedGrants: grants, publisherKey: key,
                limits: manifest.limits.recorded, version: manifest.version))
    }

    /// Why `version` does not succeed the approved one, or nil when it is strictly newer: a
    /// rollback to an older version (or other bytes under the same version) needs the owner.
    static func versionRefusal(_ version: String, approved: String?) -> Refusal? {
        guard let approved else {
            return Refusal("the approval does not record the version it approved (it is older than monotonic approvals)")
        }
        guard let new = HostVersion(version), let old = HostVersion(approved) else {
            return Refusal("version \(version) cannot be compared with the approved \(approved) (versions are dotted numbers)")
        }
        if new < old { return Refusal("older than the approved \(approved)") }
        if new == old { return Refusal("the same version \(approved) as approved, with other bytes") }
        return nil
    }

    struct Refusal: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
