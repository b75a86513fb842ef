import Foundation
import PlugindBundle
import PlugindWire

/// Whether the host may use a catalog entry, and if not, why.
package enum PolicyDecision: Sendable, Equatable {
    /// Usable. `bundledWithHost` when no approval was needed.
    case available(bundledWithHost: Bool)
    case unapproved
    case disabled(byAdministrator: Bool)
    /// Approved once, but what was approved changed; the text says what.
    case approvalOutdated(String)

    package var isAvailable: Bool {
        if case .available = self { return true }
        return false
    }
}

/// The owner's and the administrator's policy files as read at one moment, and the decisions
/// that follow from them. A file that cannot be read approves nothing (fails closed) and is
/// reported.
package struct PolicySnapshot: Sendable {
    package var user: PolicyDocument
    package var administrator: PolicyDocument
    package var errors: [PolicyFileError]

    package static func read(for host: AppExtensionHost) -> PolicySnapshot {
        var errors: [PolicyFileError] = []
        func load(_ directory: URL) -> PolicyDocument {
            switch PolicyDocument.load(from: directory.appendingPathComponent(PolicyDocument.fileName).path) {
            case .success(let document): return document
            case .failure(let error):
                errors.append(error)
                return PolicyDocument()
            }
        }
        let user = load(host.policyDirectory)
        let administrator = load(host.administratorPolicyDirectory)
        return PolicySnapshot(user: user, administrator: administrator, errors: errors)
    }

    /// The decision for `entry`. Administrator denials win over everything; then the owner's.
    package func decision(for entry: CatalogEntry, hashes: ContentHashes = .shared) -> PolicyDecision {
        let identifier = entry.identifier
        let adminPolicy = administrator.plugins[identifier]
        let userPolicy = user.plugins[identifier]
        if adminPolicy?.state == .disabled { return .disabled(byAdministrator: true) }
        if userPolicy?.state == .disabled { return .disabled(byAdministrator: false) }
        if entry.root.isBundledWithHost { return .available(bundledWithHost: true) }
        // A policy file that cannot be read approves nothing external.
        if !errors.isEmpty { return .unapproved }

        var outdated: String?
        for policy in [userPolicy, adminPolicy] {
            guard let policy, policy.state == .approved, let approval = policy.approval else { continue }
            if let change = Self.changeSinceApproval(approval, entry: entry, hashes: hashes) {
                outdated = outdated ?? change
            } else {
                return .available(bundledWithHost: false)
            }
        }
        if let outdated { return .approvalOutdated(outdated) }
        return .unapproved
    }

    /// What differs between an approval and the bundle as it is now, or nil when nothing does.
    package static func changeSinceApproval(_ approval: Approval, entry: CatalogEntry, hashes: ContentHashes) -> String? {
        let bundle = entry.bundle
        if approval.permissions != bundle.manifest.permissions {
            return
                "its requested permissions changed (approved: \(approval.permissions.summary); now: \(bundle.manifest.permissions.summary))"
        }
        func matches(_ path: String, _ identity: FileIdentity, pinnedIdentity: FileIdentity, pinnedDigest: String) -> Bool {
            if identity == pinnedIdentity { return true }
            return (try? hashes.digest(ofFileAtPath: path, identity: identity)) == pinnedDigest
        }
        if !matches(
            bundle.libraryPath, bundle.libraryStatus.identity, pinnedIdentity: approval.libraryFile, pinnedDigest: approval.librarySHA256)
        {
            return "its library \(bundle.libraryPath) changed since it was approved (SHA-256 no longer matches)"
        }
        if !matches(
            bundle.manifestPath, bundle.manifestStatus.identity, pinnedIdentity: approval.manifestFile,
            pinnedDigest: approval.manifestSHA256)
        {
            return "its manifest changed since it was approved (SHA-256 no longer matches)"
        }
        return nil
    }
}
